// The GPT-4 canary: a pod and a Deployment with no securityContext in a namespace that enforces Pod
// Security "restricted". First on the bare control plane (the API server's own refusal), then with
// the module: fixed by our mutating webhook, admitted by the real PodSecurity admission, and the
// Deployment's pods — made by the real ReplicaSet controller — fixed the same way.
import { join } from "node:path";
import { stringify } from "yaml";
import type { V1PodSpec } from "@kubernetes/client-node";
import type { KubeObject } from "../../lib/objects/pod";
import { REPO_ROOT } from "../support/controller";
import { loadManifests } from "../support/manifests";
import { eventually } from "../support/wait";
import { applyObjects, connect, kubectl, namespace, useModule } from "./support/cluster";

const cluster = connect();
const guard = useModule(cluster);

const [pod, deployment] = loadManifests(join(REPO_ROOT, "examples/gpt4-canary.yaml")).map(
  m => m.object,
);
const NS = "gpt4-canary";
const yaml = (obj: KubeObject) => stringify(obj);

async function pods(labelSelector: string): Promise<KubeObject[]> {
  const res = await cluster.admin.get(
    `/api/v1/namespaces/${NS}/pods?labelSelector=${encodeURIComponent(labelSelector)}`,
  );
  return (res.body.items as KubeObject[]) ?? [];
}

async function replicaSetOf(name: string): Promise<KubeObject> {
  const res = await cluster.admin.get(`/apis/apps/v1/namespaces/${NS}/replicasets`);
  const rs = (res.body.items as KubeObject[]).find(r =>
    (r.metadata?.ownerReferences as { name: string }[] | undefined)?.some(o => o.name === name),
  );
  if (!rs) throw new Error(`no ReplicaSet of Deployment ${name} yet`);
  return rs;
}

beforeAll(async () => {
  await applyObjects(cluster, [
    namespace(NS, {
      "pod-security.kubernetes.io/enforce": "restricted",
      "admission-guard.dev/require-component": "gpt4",
    }),
  ]);
});

describe("without admission-guard", () => {
  test("the pod is refused by Pod Security admission, naming each missing field", async () => {
    const result = await kubectl(cluster, ["apply", "-f", "-"], yaml(pod));
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('violates PodSecurity "restricted:latest"');
    for (const said of [
      "allowPrivilegeEscalation != false",
      "unrestricted capabilities",
      "runAsNonRoot != true",
      "seccompProfile",
    ])
      expect(result.stderr).toContain(said);
  });

  test("the Deployment is stored with a warning, and its ReplicaSet fails to make pods", async () => {
    const result = await kubectl(cluster, ["apply", "-f", "-"], yaml(deployment));
    expect(result.code).toBe(0);
    expect(result.stderr).toContain('would violate PodSecurity "restricted:latest"');
    const failure = await eventually(async () => {
      const rs = await replicaSetOf("gpt4-canary");
      const conditions = ((rs.status as { conditions?: KubeObject[] })?.conditions ?? []) as {
        type: string;
        message: string;
      }[];
      const failed = conditions.find(c => c.type === "ReplicaFailure");
      if (!failed) throw new Error("no ReplicaFailure condition yet");
      return failed.message;
    }, 30_000);
    expect(failure).toContain('violates PodSecurity "restricted:latest"');
    expect(await pods("app=gpt4")).toEqual([]);
    expect(
      (await kubectl(cluster, ["delete", "deployment", "gpt4-canary", "-n", NS, "--wait=true"]))
        .code,
    ).toBe(0);
  });
});

describe("with admission-guard", () => {
  beforeAll(async () => {
    await guard.install();
  }, 60_000);

  test("the same pod is fixed, admitted by Pod Security admission, and says what was fixed", async () => {
    const result = await eventually(async () => {
      const r = await kubectl(cluster, ["apply", "-f", "-"], yaml(pod));
      // The module's namespace cache may not hold the namespace's labels for the first instant.
      if (r.code !== 0) throw new Error(r.stderr);
      return r;
    }, 20_000);
    expect(result.stdout).toContain("pod/test-gpt4 created");
    expect(result.stderr).toContain("admission-guard/security-context");

    const stored = (await cluster.admin.get(`/api/v1/namespaces/${NS}/pods/test-gpt4`)).body;
    const spec = stored.spec as V1PodSpec;
    expect(spec.securityContext).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(spec.containers[0].securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"] },
    });
    // The label the namespace's policy requires, and the one the Deployment's selector uses, kept.
    expect(stored.metadata?.labels).toMatchObject({
      app: "gpt4",
      "app.kubernetes.io/component": "gpt4",
    });
    expect(stored.metadata?.annotations?.["admission-guard.dev/fixed"]).toContain(
      "security-context/",
    );
  });

  test("the Deployment's pods, made by the ReplicaSet controller, come out fixed and admitted", async () => {
    const result = await kubectl(cluster, ["apply", "-f", "-"], yaml(deployment));
    expect(result.code).toBe(0);
    // The template is not changed (no drift for GitOps), so Pod Security still warns on it; our
    // warning says what its pods will get.
    expect(result.stderr).toContain('would violate PodSecurity "restricted:latest"');
    expect(result.stderr).toMatch(/admission-guard\/security-context: its pods will get /);

    const made = await eventually(async () => {
      const list = await pods("app=gpt4,tier=canary");
      if (list.length < 2) throw new Error(`${list.length} of 2 pods so far`);
      return list;
    }, 30_000);
    for (const p of made) {
      expect(p.metadata?.generateName).toMatch(/^gpt4-canary-[a-z0-9]+-$/);
      expect(p.metadata?.ownerReferences).toEqual([
        expect.objectContaining({ kind: "ReplicaSet", controller: true }),
      ]);
      const spec = p.spec as V1PodSpec;
      expect(spec.securityContext).toMatchObject({ runAsNonRoot: true });
      expect(spec.containers[0].securityContext).toMatchObject({
        allowPrivilegeEscalation: false,
      });
      expect(p.metadata?.labels?.["app.kubernetes.io/component"]).toBe("gpt4");
    }
    const rs = await replicaSetOf("gpt4-canary");
    expect((rs.status as { conditions?: unknown[] }).conditions ?? []).toEqual([]);
  });
});
