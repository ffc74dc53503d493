// workloads.mutate on a real API server: the module built with it (in its pepr.env) receives
// Deployments in its mutating webhook and fixes their pod templates, so Pod Security admission has
// nothing to warn about when the Deployment is applied (compare 10-pod-security, built without).
import type { V1PodSpec } from "@kubernetes/client-node";
import { join } from "node:path";
import { stringify } from "yaml";
import type { KubeObject } from "../../lib/objects/pod";
import { REPO_ROOT } from "../support/controller";
import { loadManifests } from "../support/manifests";
import { eventually } from "../support/wait";
import { applyObjects, connect, kubectl, namespace, useModule } from "./support/cluster";
import { buildVariant } from "./support/variant-build";

const NS = "templates";
const SETTING = { ADMISSION_GUARD_WORKLOADS_MUTATE: "true" };
const cluster = connect();
const guard = useModule(cluster, { env: SETTING });
const deployment = {
  ...loadManifests(join(REPO_ROOT, "examples/gpt4-canary.yaml")).find(
    m => m.object.kind === "Deployment",
  )!.object,
};
deployment.metadata = { ...deployment.metadata, namespace: NS };

type Template = { metadata: KubeObject["metadata"]; spec: V1PodSpec };
const get = (path: string) => cluster.admin.get(path);

beforeAll(async () => {
  const dist = await buildVariant("workloads-mutate", SETTING);
  await applyObjects(cluster, [
    namespace(NS, { "pod-security.kubernetes.io/enforce": "restricted" }),
  ]);
  await guard.install({ dist });
  // The account the new namespace got at once is deleted: the Deployment's pods are moved to it
  // when they are created, so it must be made again for them.
  await eventually(async () =>
    expect((await get(`/api/v1/namespaces/${NS}/serviceaccounts/workload`)).status).toBe(200),
  );
  expect((await kubectl(cluster, ["delete", "sa", "workload", "-n", NS])).code).toBe(0);
}, 240_000);

test("the build with the setting routes workloads to the mutating webhook", () => {
  const config = guard.module!.manifest.webhookConfigurations.find(
    c => c.kind === "MutatingWebhookConfiguration",
  )!;
  const resources = (config.webhooks as { rules: { resources: string[] }[] }[])[0].rules.flatMap(
    r => r.resources,
  );
  expect(resources).toEqual(expect.arrayContaining(["pods", "deployments", "jobs", "cronjobs"]));
});

test("kubectl apply of the Deployment: its template fixed, and Pod Security has nothing to warn about", async () => {
  const result = await eventually(async () => {
    const r = await kubectl(cluster, ["apply", "-f", "-"], stringify(deployment));
    if (r.code !== 0) throw new Error(r.stderr);
    return r;
  }, 20_000);
  expect(result.stderr).not.toContain("would violate PodSecurity");
  expect(result.stderr).toContain("admission-guard/security-context: fixed ");
  const stored = (await get(`/apis/apps/v1/namespaces/${NS}/deployments/gpt4-canary`)).body;
  const template = (stored.spec as { template: Template }).template;
  expect(template.spec.containers[0].securityContext).toMatchObject({
    allowPrivilegeEscalation: false,
    capabilities: { drop: ["ALL"] },
  });
  expect(template.metadata?.annotations?.["admission-guard.dev/fixed"]).toContain(
    "security-context/",
  );
});

test("its pods come up fixed, moved to the dedicated ServiceAccount made again for them, from one ReplicaSet", async () => {
  const pods = await eventually(async () => {
    const list = (await get(`/api/v1/namespaces/${NS}/pods?labelSelector=app%3Dgpt4`)).body
      .items as KubeObject[];
    if (list.length < 2) {
      const sets = (await get(`/apis/apps/v1/namespaces/${NS}/replicasets`)).body
        .items as KubeObject[];
      throw new Error(
        `${list.length} of 2 pods so far (${JSON.stringify(sets.map(r => r.status))})`,
      );
    }
    return list;
  }, 30_000);
  for (const p of pods) expect((p.spec as V1PodSpec).serviceAccountName).toBe("workload");
  expect((await get(`/api/v1/namespaces/${NS}/serviceaccounts/workload`)).status).toBe(200);
  // The ReplicaSet the Deployment controller made is not changed by the webhook (its template is
  // the Deployment's), so the controller made exactly one.
  await new Promise(r => setTimeout(r, 2000));
  const sets = (await get(`/apis/apps/v1/namespaces/${NS}/replicasets`)).body.items as KubeObject[];
  expect(sets).toHaveLength(1);
});
