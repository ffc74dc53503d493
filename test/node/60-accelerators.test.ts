// GPU pods on a tainted GPU node, on a real node (issue 44): the node advertises a fake
// nvidia.com/gpu (an extended resource patched into its status, as the Kubernetes docs advertise
// one; no device plugin: the kubelet treats it as an opaque count) and carries the taint GPU nodes
// carry. A Deployment asking for a GPU, with the module, gets the toleration from the node view
// and reaches Running; the same Deployment where the module is off stays Pending, Unschedulable.
import type { KubeObject } from "../../lib/objects/pod";
import { eventually } from "../support/wait";
import { applyObjects, connect, kubectl, namespace, useModule } from "../cluster/support/cluster";
import { NODE_NAME } from "./support/node";
import { nodeModuleEnv, removeNamespaces, serverContainer } from "./support/workloads";

const cluster = connect();
const registry = cluster.node!.registry!;
const guard = useModule(cluster, { env: nodeModuleEnv(registry) });
const WITH = "node-gpu";
const WITHOUT = "node-gpu-off";
const GPU = "nvidia.com/gpu";
const TAINT = `${GPU}=present:NoSchedule`;
const STATUS = `/api/v1/nodes/${NODE_NAME}/status`;

const gpuDeployment = (ns: string): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "serve-gpu", namespace: ns },
  spec: {
    replicas: 1,
    selector: { matchLabels: { app: "serve-gpu" } },
    template: {
      metadata: { labels: { app: "serve-gpu" } },
      spec: {
        containers: [
          serverContainer(registry, {
            resources: {
              requests: { cpu: "100m", memory: "64Mi" },
              limits: { cpu: "100m", memory: "64Mi", [GPU]: "1" },
            },
          }),
        ],
      },
    },
  },
});

async function podOf(ns: string): Promise<KubeObject> {
  const res = await cluster.admin.get(
    `/api/v1/namespaces/${ns}/pods?labelSelector=app%3Dserve-gpu`,
  );
  const [pod] = (res.body.items as KubeObject[] | undefined) ?? [];
  if (!pod) throw new Error(`no pod in ${ns} yet`);
  return pod;
}

type Condition = { type: string; status: string; reason?: string };
const conditions = (pod: KubeObject) =>
  (pod.status as { conditions?: Condition[] } | undefined)?.conditions ?? [];

beforeAll(async () => {
  // The fake GPU: capacity through the status subresource; the kubelet keeps an extended resource
  // it does not manage and reports it as allocatable on its next status update.
  const advertised = await cluster.admin.mergePatch(STATUS, {
    status: { capacity: { [GPU]: "2" } },
  });
  if (advertised.status >= 300) throw new Error(`advertising ${GPU}: ${advertised.text}`);
  await eventually(async () => {
    const node = await cluster.admin.get(`/api/v1/nodes/${NODE_NAME}`);
    const allocatable = (node.body.status as { allocatable?: Record<string, string> }).allocatable;
    if (allocatable?.[GPU] !== "2") throw new Error(`allocatable ${GPU}: ${allocatable?.[GPU]}`);
  }, 60_000);
  const tainted = await kubectl(cluster, ["taint", "node", NODE_NAME, TAINT, "--overwrite"]);
  if (tainted.code !== 0) throw new Error(`kubectl taint: ${tainted.stderr}`);
  await applyObjects(cluster, [
    namespace(WITH, { "pod-security.kubernetes.io/enforce": "restricted" }),
    // The same namespace, with the module off: what the cluster does without it.
    namespace(WITHOUT, {
      "pod-security.kubernetes.io/enforce": "baseline",
      "admission-guard.dev/mode": "off",
    }),
  ]);
  await guard.install();
}, 120_000);

afterAll(async () => {
  await removeNamespaces(cluster, [WITH, WITHOUT]);
  await kubectl(cluster, ["taint", "node", NODE_NAME, `${GPU}-`]);
  // A JSON merge patch with null removes the key from capacity (the kubelet then drops it).
  await cluster.admin.mergePatch(STATUS, { status: { capacity: { [GPU]: null } } });
}, 120_000);

test("a GPU Deployment on the tainted GPU node: the module adds the node's toleration and its pod reaches Running", async () => {
  await applyObjects(cluster, [gpuDeployment(WITH)]);
  const pod = await eventually(async () => {
    const p = await podOf(WITH);
    if ((p.status as { phase?: string }).phase !== "Running") throw new Error("not Running yet");
    return p;
  }, 90_000);
  const tolerations = (pod.spec as { tolerations?: Record<string, unknown>[] }).tolerations ?? [];
  // The node's taint, and the ExtendedResourceToleration convention; nothing else but the API
  // server's own not-ready/unreachable ones.
  expect(tolerations.filter(t => t.key === GPU)).toEqual(
    expect.arrayContaining([
      expect.objectContaining({ key: GPU, value: "present", effect: "NoSchedule" }),
      expect.objectContaining({ key: GPU, operator: "Exists", effect: "NoSchedule" }),
    ]),
  );
  expect(
    tolerations.every(t => t.key === GPU || String(t.key).startsWith("node.kubernetes.io/")),
  ).toBe(true);
  expect(pod.metadata?.annotations?.["admission-guard.dev/fixed"]).toContain(
    "accelerators/tolerations",
  );
});

test("the same Deployment where the module is off stays Pending: the scheduler finds no node it tolerates", async () => {
  await applyObjects(cluster, [gpuDeployment(WITHOUT)]);
  const pod = await eventually(async () => {
    const p = await podOf(WITHOUT);
    const scheduled = conditions(p).find(c => c.type === "PodScheduled");
    if (scheduled?.status !== "False") throw new Error("not judged by the scheduler yet");
    return p;
  }, 60_000);
  expect((pod.status as { phase?: string }).phase).toBe("Pending");
  expect(conditions(pod).find(c => c.type === "PodScheduled")?.reason).toBe("Unschedulable");
});
