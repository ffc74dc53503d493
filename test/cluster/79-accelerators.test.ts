// accelerators on a real API server: a GPU Deployment on tainted GPU nodes. Its pods, made by the
// real ReplicaSet controller and defaulted by the real admission chain (DefaultTolerationSeconds
// before the webhook), get the tolerations those nodes ask for and nothing else; a bare GPU pod and
// a trainer whose memory request is below its limit get their warnings with the fix.
// Written for the control plane tier (issue 44); not run where no Kubernetes binaries exist.
import { stringify } from "yaml";
import type { KubeObject } from "../../lib/objects/pod";
import { defaultTolerations } from "../support/admission";
import { eventually } from "../support/wait";
import { addNode, applyObjects, connect, kubectl, namespace, useModule } from "./support/cluster";

const NS = "ml-accelerators";
const cluster = connect();
const guard = useModule(cluster);
const GPU_NODES = ["acc-gpu-1", "acc-gpu-2"];
const GPU_TAINTS = [
  { key: "nvidia.com/gpu", value: "present", effect: "NoSchedule" },
  { key: "sku", value: "gpu", effect: "NoSchedule" },
];
const apply = (obj: KubeObject) => kubectl(cluster, ["apply", "-f", "-"], stringify(obj));

beforeAll(async () => {
  await applyObjects(cluster, [namespace(NS)]);
  for (const name of GPU_NODES)
    await addNode(cluster, {
      metadata: { name, labels: { "kubernetes.io/hostname": name } },
      spec: { taints: GPU_TAINTS },
      status: {
        capacity: { cpu: "64", memory: "512Gi", pods: "110", "nvidia.com/gpu": "8" },
        allocatable: { cpu: "64", memory: "512Gi", pods: "110", "nvidia.com/gpu": "8" },
      },
    });
  await guard.install();
}, 300_000);
afterAll(async () => {
  for (const name of GPU_NODES) await cluster.admin.raw("DELETE", `/api/v1/nodes/${name}`);
});

const trainer = (requests: Record<string, string>, limits: Record<string, string>) => ({
  name: "trainer",
  image: "registry.k8s.io/pause:3.10",
  resources: { requests, limits },
});
const GPU = { "nvidia.com/gpu": "1", cpu: "2", memory: "8Gi" };

test("a GPU Deployment on tainted nodes: its pods carry the GPU nodes' tolerations and nothing else", async () => {
  const deployment: KubeObject = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "gpu-serve", namespace: NS },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: "gpu-serve" } },
      template: {
        metadata: { labels: { app: "gpu-serve" } },
        spec: { containers: [trainer(GPU, GPU)] },
      },
    },
  };
  const result = await eventually(async () => {
    const r = await apply(deployment);
    expect(r.stderr).toContain("admission-guard/accelerators: its pods will get");
    return r;
  }, 20_000);
  expect(result.code).toBe(0);
  const pod = await eventually(async () => {
    const list = await cluster.admin.get(
      `/api/v1/namespaces/${NS}/pods?labelSelector=app%3Dgpu-serve`,
    );
    const items = (list.body as { items?: KubeObject[] }).items ?? [];
    if (!items.length) throw new Error("no pod yet");
    return items[0];
  }, 30_000);
  const tolerations = (pod.spec as { tolerations?: Record<string, unknown>[] }).tolerations ?? [];
  expect(tolerations).toEqual([
    // DefaultTolerationSeconds, before the webhook: kept as they were.
    ...defaultTolerations(),
    { key: "nvidia.com/gpu", operator: "Equal", value: "present", effect: "NoSchedule" },
    { key: "sku", operator: "Equal", value: "gpu", effect: "NoSchedule" },
    { key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" },
  ]);
  expect(pod.metadata?.annotations?.["admission-guard.dev/fixed"]).toContain(
    "accelerators/tolerations",
  );
});

test("a bare GPU pod and a trainer whose memory request is below its limit: admitted with the warnings and their fixes", async () => {
  const bare: KubeObject = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "bare-trainer", namespace: NS },
    spec: { containers: [trainer({ ...GPU, memory: "2Gi" }, GPU)] },
  };
  const result = await apply(bare);
  expect(result.code).toBe(0);
  expect(result.stderr).toContain(
    `Pod ${NS}/bare-trainer asks for 1 nvidia.com/gpu and no controller owns it`,
  );
  expect(result.stderr).toContain("Fix: run it as a Job");
  expect(result.stderr).toContain(
    'container "trainer" (spec.containers[0]) asks memory 2Gi below its limit 8Gi',
  );
  expect(result.stderr).toContain(
    "Fix: set resources.requests.memory equal to resources.limits.memory in spec.containers[0]",
  );
});
