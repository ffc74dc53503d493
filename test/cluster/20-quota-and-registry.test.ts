// The MLflow training job: a pod asking 8 CPUs in a namespace whose ResourceQuota has 5 left, from
// a registry the platform does not allow. First on the bare control plane (the real ResourceQuota
// plugin's refusal), then with the module: denied by our validating webhook — before the quota
// plugin — with the same numbers the quota plugin uses and fixes that work when followed.
import { join } from "node:path";
import { stringify } from "yaml";
import type { KubeObject } from "../../lib/objects/pod";
import { REPO_ROOT } from "../support/controller";
import { loadManifests } from "../support/manifests";
import { eventually } from "../support/wait";
import { applyObjects, connect, kubectl, namespace, useModule } from "./support/cluster";

const cluster = connect();
const guard = useModule(cluster, {
  env: { ADMISSION_GUARD_REGISTRIES_ALLOWED: "ghcr.io,docker.io" },
});

const NS = "mlflow-prod";
const [training] = loadManifests(join(REPO_ROOT, "examples/mlflow-train.yaml")).map(m => m.object);
const quota: KubeObject = {
  apiVersion: "v1",
  kind: "ResourceQuota",
  metadata: { name: "compute-resources", namespace: NS },
  spec: { hard: { "requests.cpu": "8", "requests.memory": "64Gi", "limits.memory": "64Gi" } },
};

/** A pod of the namespace asking `cpu` cores and 4Gi. */
function podAsking(name: string, cpu: string, image = "ghcr.io/mlflow/mlflow:v2.16.0"): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: NS },
    spec: {
      containers: [
        {
          name: "main",
          image,
          resources: { requests: { cpu, memory: "4Gi" }, limits: { memory: "4Gi" } },
        },
      ],
    },
  };
}

const withImage = (pod: KubeObject, image: string): KubeObject => {
  const copy = structuredClone(pod);
  (copy.spec as { containers: { image: string }[] }).containers[0].image = image;
  return copy;
};

async function quotaStatus(): Promise<{
  hard: Record<string, string>;
  used: Record<string, string>;
}> {
  const res = await cluster.admin.get(`/api/v1/namespaces/${NS}/resourcequotas/compute-resources`);
  return res.body.status as { hard: Record<string, string>; used: Record<string, string> };
}

const create = (pod: KubeObject) => kubectl(cluster, ["create", "-f", "-"], stringify(pod));

beforeAll(async () => {
  await applyObjects(cluster, [namespace(NS), quota]);
  // 3 of the 8 cores in use. The quota plugin counts a pod at admission, scheduled or not.
  await eventually(async () => {
    const result = await create(podAsking("mlflow-serving", "3"));
    if (result.code !== 0) throw new Error(result.stderr); // quota status not computed yet
  }, 30_000);
});

describe("without admission-guard", () => {
  test("the training pod is refused by the ResourceQuota plugin", async () => {
    const result = await create(training);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      "exceeded quota: compute-resources, requested: requests.cpu=8, used: requests.cpu=3, limited: requests.cpu=8",
    );
  });
});

describe("with admission-guard", () => {
  beforeAll(async () => {
    await guard.install();
  }, 60_000);

  test("denied by our webhook first: the quota numbers the API server uses, and the registry", async () => {
    const { hard, used } = await quotaStatus();
    expect([hard["requests.cpu"], used["requests.cpu"]]).toEqual(["8", "3"]);
    const result = await eventually(async () => {
      const r = await create(training);
      if (!r.stderr.includes("admission-guard/resource-quota")) throw new Error(r.stderr);
      return r;
    }, 20_000);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('admission webhook "pepr-');
    expect(result.stderr).toContain(
      `admission-guard/resource-quota: Pod ${NS}/mlflow-train exceeds the namespace quota: requests.cpu: pod asks 8, quota compute-resources has 5 of 8 left (3 used)`,
    );
    expect(result.stderr).toContain("lower the pod's requests.cpu to at most 5");
    expect(result.stderr).toMatch(
      /admission-guard\/image-registry: .*private-registry\.com\/mlflow-train:latest.* not allowed/,
    );
    // Refused before the quota plugin: nothing was counted.
    expect((await quotaStatus()).used["requests.cpu"]).toBe("3");
  });

  test("following the first fix (at most 5 cores, an allowed image), the real quota plugin admits it", async () => {
    const result = await create(podAsking("mlflow-train-small", "5"));
    expect(result.stderr).not.toContain("denied");
    expect(result.code).toBe(0);
    await eventually(async () => expect((await quotaStatus()).used["requests.cpu"]).toBe("8"));
  });

  test("following the admin's fix (the kubectl patch in the message), the full-size pod is admitted", async () => {
    const allowedImage = withImage(training, "ghcr.io/mlflow/mlflow-train:v1");
    const denied = await eventually(async () => {
      const r = await create(allowedImage);
      if (!r.stderr.includes("0 of 8 left (8 used)")) throw new Error(r.stderr);
      return r;
    }, 20_000);
    const command = /kubectl patch resourcequota (\S+) -n (\S+) --type merge -p '([^']+)'/.exec(
      denied.stderr,
    );
    expect(command).not.toBeNull();
    const [, name, ns, patch] = command!;
    expect(JSON.parse(patch)).toEqual({ spec: { hard: { "requests.cpu": "16" } } });
    const patched = await kubectl(cluster, [
      "patch",
      "resourcequota",
      name,
      "-n",
      ns,
      "--type",
      "merge",
      "-p",
      patch,
    ]);
    expect(patched.code).toBe(0);

    const admitted = await eventually(async () => {
      const r = await create(allowedImage);
      if (r.code !== 0) throw new Error(r.stderr); // until the module's cache has the new quota
      return r;
    }, 20_000);
    expect(admitted.stdout).toContain("pod/mlflow-train created");
    expect((await quotaStatus()).used["requests.cpu"]).toBe("16");
  });
});
