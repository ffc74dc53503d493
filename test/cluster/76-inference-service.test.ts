// KServe's InferenceService at `kubectl apply` on a real API server: minimal CRDs for
// InferenceService and ServingRuntime (test/cluster/support/crds.ts; ClusterServingRuntime left
// out, as a cluster may lack one of KServe's CRDs: the module copes), a namespace with 8 GPUs of
// quota counted by the real quota controller, and a ServingRuntime whose kserve-container the
// model is merged over. No KServe runs: what is proven is the apply-time verdict, before any
// Knative revision or Deployment would show the quota failure in its events.
import { join } from "node:path";
import { stringify } from "yaml";
import type { KubeObject } from "../../lib/objects/pod";
import { REPO_ROOT } from "../support/controller";
import { loadManifests } from "../support/manifests";
import { eventually } from "../support/wait";
import { addNode, applyObjects, connect, kubectl, namespace, useModule } from "./support/cluster";
import { installCrds } from "./support/crds";

const NS = "ml-serving";
const cluster = connect();
const guard = useModule(cluster);

const fixture = (file: string): KubeObject => {
  const obj = loadManifests(join(REPO_ROOT, "test/fixtures/ml", file))[0].object;
  obj.metadata = { ...obj.metadata, namespace: NS };
  return obj;
};
const inferenceService = (name: string, minReplicas: number): KubeObject => {
  const obj = fixture("inferenceservice.yaml");
  obj.metadata = { ...obj.metadata, name };
  const predictor = (obj.spec as { predictor: Record<string, unknown> }).predictor;
  predictor.minReplicas = minReplicas;
  // The namespace's default ServiceAccount: the fixture's own is not created here.
  delete predictor.serviceAccountName;
  delete (obj.spec as { transformer?: Record<string, unknown> }).transformer?.serviceAccountName;
  return obj;
};
const apply = (obj: KubeObject) => kubectl(cluster, ["apply", "-f", "-"], stringify(obj));
const GPU_NODE = "serving-gpu-1";
afterAll(() => cluster.admin.raw("DELETE", `/api/v1/nodes/${GPU_NODE}`));

beforeAll(async () => {
  await installCrds(cluster, [
    {
      group: "serving.kserve.io",
      kind: "InferenceService",
      plural: "inferenceservices",
      version: "v1beta1",
    },
    {
      group: "serving.kserve.io",
      kind: "ServingRuntime",
      plural: "servingruntimes",
      version: "v1alpha1",
    },
  ]);
  await applyObjects(cluster, [
    namespace(NS),
    {
      apiVersion: "v1",
      kind: "ResourceQuota",
      metadata: { name: "gpus", namespace: NS },
      spec: { hard: { "requests.nvidia.com/gpu": "8" } },
    },
    fixture("servingruntime.yaml"),
  ]);
  // An 8-GPU node: node fit judges each role against the cluster's nodes.
  await addNode(cluster, {
    metadata: { name: GPU_NODE, labels: { "kubernetes.io/hostname": GPU_NODE } },
    spec: {},
    status: {
      capacity: { cpu: "64", memory: "512Gi", pods: "110", "nvidia.com/gpu": "8" },
      allocatable: { cpu: "64", memory: "512Gi", pods: "110", "nvidia.com/gpu": "8" },
    },
  });
  // Installed once the CRDs are served: its runtime cache probes them at start.
  await guard.install();
  await eventually(async () => {
    const q = await cluster.admin.get(`/api/v1/namespaces/${NS}/resourcequotas/gpus`);
    expect((q.body.status as { used?: object } | undefined)?.used).toBeDefined();
  }, 30_000);
}, 300_000);

test("the build's webhook rules name inferenceservices", () => {
  const config = guard.module!.manifest.webhookConfigurations.find(
    c => c.kind === "ValidatingWebhookConfiguration",
  )!;
  const rules = (config.webhooks as { rules: { apiGroups: string[]; resources: string[] }[] }[])[0]
    .rules;
  expect(rules.map(r => `${r.resources.join()}.${r.apiGroups.join()}`)).toContain(
    "inferenceservices.serving.kserve.io",
  );
});

test("an InferenceService of 2 × 8 GPUs over an 8-GPU quota is refused at kubectl apply, with the numbers", async () => {
  const result = await eventually(async () => {
    const r = await apply(inferenceService("too-big", 2));
    expect(r.stderr).toContain("admission-guard/resource-quota");
    return r;
  }, 20_000);
  expect(result.code).not.toBe(0);
  expect(result.stderr).toContain(
    "InferenceService ml-serving/too-big exceeds the namespace quota",
  );
  expect(result.stderr).toContain("its pods ask 16 at once (predictor: 2 × 8)");
  expect(result.stderr).toContain("quota gpus has 8 of 8 left");
  expect(result.stderr).toContain("lower spec.predictor.minReplicas from 2 to at most 1");
  expect(
    (
      await cluster.admin.get(
        `/apis/serving.kserve.io/v1beta1/namespaces/${NS}/inferenceservices/too-big`,
      )
    ).status,
  ).toBe(404);
});

test("the same at minReplicas 1 is admitted: its runtime's container judged (not said unjudged), the growth to maxReplicas warned", async () => {
  // The runtime cache has listed the namespace's ServingRuntime: the model's container is judged.
  const result = await eventually(async () => {
    const r = await apply(inferenceService("fits", 1));
    expect(r.stderr).not.toContain("the model's container");
    return r;
  }, 30_000);
  expect({ code: result.code, stderr: result.stderr }).toMatchObject({ code: 0 });
  expect(result.stderr).toContain("can outgrow quota gpus when it scales");
  expect(result.stderr).toContain(
    "spec.predictor.model.securityContext.allowPrivilegeEscalation=false",
  );
  expect(result.stderr).toContain("(when InferenceService creates them)");
  // ClusterServingRuntime's CRD is not installed: probed quietly, no watch error logged.
  expect(guard.module!.controller.logs()).not.toMatch(
    /clusterservingruntimes.*(watch error|cannot list)/,
  );
  expect(guard.module!.controller.logs()).toContain("KServe's runtimes are served: cached");
});
