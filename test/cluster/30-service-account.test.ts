// The LlamaIndex trainer: a pod on the `default` ServiceAccount that reads a secret, asks for more
// memory than any node has, and sets no securityContext. The module moves it to a dedicated
// ServiceAccount it creates through the real API under its own RBAC, asks the real authorizer
// (SubjectAccessReview) whether that account may read the secret, and judges node fit against Node
// objects. Then the ServiceAccount over its life on a real API server: deleted by an admin, needed
// by a dry run, raced for by two pods.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import type { V1PodSpec } from "@kubernetes/client-node";
import type { KubeObject } from "../../lib/objects/pod";
import { runCheck } from "../support/check-command";
import { REPO_ROOT } from "../support/controller";
import { loadManifests } from "../support/manifests";
import { eventually } from "../support/wait";
import {
  addNode,
  applyObjects,
  connect,
  exportSnapshot,
  kubectl,
  namespace,
  useModule,
} from "./support/cluster";

const cluster = connect();
const guard = useModule(cluster, {
  // As the cluster of the field report enforces it: a pod whose account may not read its secrets
  // is refused.
  env: { ADMISSION_GUARD_SERVICE_ACCOUNT_SECRET_ACCESS: "enforce" },
});

const NS = "llama-index";
const SECRET = "llama-index-config";
const [trainer] = loadManifests(join(REPO_ROOT, "examples/llamaindex-trainer.yaml")).map(
  m => m.object,
);
const exampleCluster = loadManifests(join(REPO_ROOT, "examples/cluster")).map(m => m.object);
const nodes = exampleCluster.filter(o => o.kind === "Node");
const limitRange = exampleCluster.find(o => o.kind === "LimitRange")!;

const withMemory = (pod: KubeObject, memory: string): KubeObject => {
  const copy = structuredClone(pod);
  (
    copy.spec as { containers: { resources: { limits: Record<string, string> } }[] }
  ).containers[0].resources.limits.memory = memory;
  return copy;
};
const create = (obj: KubeObject, ...flags: string[]) =>
  kubectl(cluster, ["create", ...flags, "-f", "-"], stringify(obj));
const getPod = async (ns: string, name: string) =>
  (await cluster.admin.get(`/api/v1/namespaces/${ns}/pods/${name}`)).body;
const serviceAccount = (ns: string, name: string) =>
  cluster.admin.get(`/api/v1/namespaces/${ns}/serviceaccounts/${name}`);

beforeAll(async () => {
  await applyObjects(cluster, [
    namespace(NS),
    { ...limitRange, metadata: { name: "default-resources", namespace: NS } },
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: SECRET, namespace: NS },
      stringData: { OPENAI_API_KEY: "not-a-real-key" },
    },
  ]);
  for (const node of nodes) await addNode(cluster, node);
});

describe("without admission-guard", () => {
  test("the API server admits the trainer as it is: on `default`, with an API token, and no node can run it", async () => {
    const result = await create(trainer);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const pod = await getPod(NS, "llamaindex-trainer");
    const spec = pod.spec as V1PodSpec;
    expect(spec.serviceAccountName).toBe("default");
    expect((spec.volumes ?? []).map(v => v.name)).toEqual([
      expect.stringMatching(/^kube-api-access-[a-z0-9]{5}$/),
    ]);
    // 8Gi asked; the largest schedulable node allocates 4Gi: it would stay Pending for good.
    expect(spec.containers[0].resources?.requests?.memory).toBe("8Gi");
    expect((await kubectl(cluster, ["delete", "pod", "llamaindex-trainer", "-n", NS])).code).toBe(
      0,
    );
  });
});

describe("with admission-guard", () => {
  beforeAll(async () => {
    await guard.install();
  }, 60_000);

  let denial = "";
  test("denied with the reasons and their fixes; the dedicated ServiceAccount was made through the real API", async () => {
    const result = await eventually(async () => {
      const r = await create(trainer);
      if (!r.stderr.includes("fits no node")) throw new Error(r.stderr); // caches filling
      return r;
    }, 20_000);
    expect(result.code).toBe(1);
    denial = result.stderr;
    // The real SubjectAccessReview: the Role of the example lets workload read a ConfigMap, not the secret.
    expect(denial).toContain(
      `admission-guard/service-account: ServiceAccount ${NS}/workload of Pod ${NS}/llamaindex-trainer may not get secret "${SECRET}" (envFrom of container "trainer")`,
    );
    expect(denial).toContain(
      `admission-guard/resource-quota: Pod ${NS}/llamaindex-trainer fits no node and would stay Pending: memory request and limit 8Gi is more than any schedulable node can allocate: the largest candidate, node "gpu-node-1", has 4Gi allocatable memory (2 of 4 nodes are candidates; excluded: 2 by taints)`,
    );
    const sa = await serviceAccount(NS, "workload");
    expect(sa.status).toBe(200);
    expect(sa.body.metadata?.labels).toEqual({ "app.kubernetes.io/managed-by": "admission-guard" });
    // Written by the module's own identity (its token, its ClusterRole), not by the test's admin.
    const managers = (sa.body.metadata?.managedFields as { manager: string }[]).map(m => m.manager);
    expect(managers).toEqual(["pepr"]);
  });

  test("`check` on a snapshot exported from this cluster says the same", async () => {
    const dir = mkdtempSync(join(tmpdir(), "admission-guard-snapshot-"));
    try {
      await exportSnapshot(cluster, dir);
      writeFileSync(join(dir, "settings.yaml"), "serviceAccount: {secretAccess: enforce}\n");
      writeFileSync(join(dir, "trainer.yaml"), stringify(trainer));
      const check = await runCheck(
        ["--cluster", "cluster.yaml", "--settings", "settings.yaml", "trainer.yaml"],
        dir,
      );
      expect(check.code).toBe(1);
      for (const rule of ["service-account/secret-access", "resource-quota/node-fit"]) {
        const line = check.stdout.split("\n").find(l => l.includes(`denied    ${rule}: `))!;
        expect(line).toBeDefined();
        expect(denial).toContain(line.split(`${rule}: `)[1]);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("following both fixes — the grant commands as printed, and memory lowered as told — the trainer is admitted", async () => {
    const grant = /Fix: (kubectl create role .*? && kubectl create rolebinding [^;\n]*)/.exec(
      denial,
    );
    expect(grant).not.toBeNull();
    for (const command of grant![1].split(" && ")) {
      const args = command.split(" ").slice(1);
      const ran = await kubectl(cluster, args);
      expect(ran.stderr).toBe("");
      expect(ran.code).toBe(0);
    }
    expect(denial).toContain(
      "lower resources.requests.memory and resources.limits.memory so the pod asks at most 4Gi memory",
    );

    const result = await eventually(async () => {
      const r = await create(withMemory(trainer, "4Gi"));
      if (r.code !== 0) throw new Error(r.stderr); // a denied access review is reused a few seconds
      return r;
    }, 20_000);
    expect(result.stdout).toContain("pod/llamaindex-trainer created");
    const spec = (await getPod(NS, "llamaindex-trainer")).spec as V1PodSpec;
    expect(spec.serviceAccountName).toBe("workload");
    expect(spec.automountServiceAccountToken).toBe(false);
    // The injected API token volume is gone (whatever sources this API server's ServiceAccount
    // admission put in it), and so are its mounts.
    expect((spec.volumes ?? []).map(v => v.name)).toEqual([]);
    expect((spec.containers[0].volumeMounts ?? []).map(m => m.name)).toEqual([]);
  });
});

describe("the dedicated ServiceAccount on a real API server", () => {
  const TEAM = "team-b";
  const busybox = (name: string): KubeObject => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: TEAM },
    spec: { containers: [{ name: "main", image: "busybox:1.36", command: ["sleep", "3600"] }] },
  });

  test("a new namespace gets it at once, and its pods are moved to it", async () => {
    expect((await kubectl(cluster, ["create", "namespace", TEAM])).code).toBe(0);
    await eventually(async () => expect((await serviceAccount(TEAM, "workload")).status).toBe(200));
    const result = await create(busybox("first"));
    expect(result.code).toBe(0);
    expect(
      ((await getPod(TEAM, "first")).spec as { serviceAccountName: string }).serviceAccountName,
    ).toBe("workload");
  });

  test("deleted by an admin, it is created again by the next pod, which is admitted", async () => {
    expect(
      (await kubectl(cluster, ["delete", "serviceaccount", "workload", "-n", TEAM])).code,
    ).toBe(0);
    // Soon after the delete: the module's watch must have seen it (milliseconds), never the API
    // server's `serviceaccount "workload" not found`.
    await new Promise(r => setTimeout(r, 500));
    const result = await create(busybox("after-delete"));
    expect(result.stderr).not.toContain("not found");
    expect(result.code).toBe(0);
    expect(
      ((await getPod(TEAM, "after-delete")).spec as { serviceAccountName: string })
        .serviceAccountName,
    ).toBe("workload");
    expect((await serviceAccount(TEAM, "workload")).status).toBe(200);
  });

  test("a server-side dry run with the account missing: admitted on its own account, told what the real request does, nothing created", async () => {
    expect(
      (await kubectl(cluster, ["delete", "serviceaccount", "workload", "-n", TEAM])).code,
    ).toBe(0);
    await new Promise(r => setTimeout(r, 500));
    const result = await kubectl(
      cluster,
      ["apply", "--dry-run=server", "-o", "yaml", "-f", "-"],
      stringify(busybox("dry")),
    );
    expect(result.code).toBe(0);
    expect(result.stderr).toContain(
      `admission-guard/service-account: dry run: Pod ${TEAM}/dry would be moved off ServiceAccount "default" to ServiceAccount ${TEAM}/workload, which does not exist yet and would be created by the real request`,
    );
    expect(result.stdout).toContain("serviceAccountName: default");
    expect((await serviceAccount(TEAM, "workload")).status).toBe(404);
    expect((await cluster.admin.get(`/api/v1/namespaces/${TEAM}/pods/dry`)).status).toBe(404);
  });

  test("two pods created at once while it is missing: both admitted, on the same account", async () => {
    expect((await serviceAccount(TEAM, "workload")).status).toBe(404);
    const [a, b] = await Promise.all([create(busybox("racer-a")), create(busybox("racer-b"))]);
    expect([a.stderr, b.stderr].join("\n")).not.toMatch(/error|not found|denied/i);
    expect([a.code, b.code]).toEqual([0, 0]);
    for (const name of ["racer-a", "racer-b"])
      expect(
        ((await getPod(TEAM, name)).spec as { serviceAccountName: string }).serviceAccountName,
      ).toBe("workload");
  });
});

test("the module's own RBAC, as generated, sufficed: the controller was refused nothing", () => {
  // Every call above — watches, the ServiceAccount applies, the access reviews, Pepr's store — was
  // made with the module's token; a refused one is logged with the API server's 403 (`HTTP 403
  // Forbidden: ... is forbidden: User "system:serviceaccount:pepr-system:..." cannot ...`, or a
  // watch's `list failed: 403 Forbidden`).
  const logs = guard.module!.controller.logs();
  expect(logs).toContain("ServiceAccount ensured"); // the log is the controller's, and it acted
  expect(
    logs
      .split("\n")
      .filter(l => /is forbidden: User|\b403 Forbidden\b|"statusText":"Forbidden"/.test(l)),
  ).toEqual([]);
});
