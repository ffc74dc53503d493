// Whole-gang capacity through the real built controller and through `check`'s engine on a snapshot
// of the same cluster (40 eight-GPU nodes, 5 of them tainted for another team): the same verdict,
// message and warnings for each kind of gang, and for an UPDATE that grows one.
import type { KubeObject } from "../../lib/objects/pod";
import { useEnvironment } from "../support/environment";
import { checkParity } from "../support/parity";

const NS = "gang-capacity";
const GPU = "nvidia.com/gpu";
const nodes: KubeObject[] = Array.from({ length: 45 }, (_, i) => {
  const name = `gpu-${String(i + 1).padStart(2, "0")}`;
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name, labels: { "kubernetes.io/hostname": name } },
    // The last five are another team's: tainted, not counted.
    spec: i >= 40 ? { taints: [{ key: "team", value: "b", effect: "NoSchedule" }] } : {},
    status: { allocatable: { cpu: "96", memory: "1Ti", pods: "110", [GPU]: "8" } },
  };
});

const env = useEnvironment({
  objects: [
    { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "workload", namespace: NS } },
    ...nodes,
  ],
});

const podSpec = (extra: object = {}) => ({
  serviceAccountName: "workload",
  containers: [
    {
      name: "train",
      image: "ghcr.io/ml-platform/train:1.0",
      resources: { limits: { [GPU]: "8", cpu: "16", memory: "128Gi" } },
    },
  ],
  ...extra,
});
const pytorchJob = (workers: number, labels: Record<string, string> = {}): KubeObject => ({
  apiVersion: "kubeflow.org/v1",
  kind: "PyTorchJob",
  metadata: { name: "llama", namespace: NS, labels },
  spec: { pytorchReplicaSpecs: { Worker: { replicas: workers, template: { spec: podSpec() } } } },
});
const job = (n: number, indexed: boolean): KubeObject => ({
  apiVersion: "batch/v1",
  kind: "Job",
  metadata: { name: "ranks", namespace: NS },
  spec: {
    parallelism: n,
    completions: n,
    ...(indexed ? { completionMode: "Indexed" } : {}),
    template: {
      spec: podSpec({ restartPolicy: "Never", ...(indexed ? { subdomain: "ranks" } : {}) }),
    },
  },
});
const volcano = (minAvailable: number): KubeObject => ({
  apiVersion: "batch.volcano.sh/v1alpha1",
  kind: "Job",
  metadata: { name: "vc", namespace: NS },
  spec: {
    minAvailable,
    tasks: [
      { name: "worker", replicas: 64, template: { spec: podSpec({ restartPolicy: "Never" }) } },
    ],
  },
});
const kueuePod: KubeObject = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: {
    name: "rank-0",
    namespace: NS,
    labels: { "kueue.x-k8s.io/pod-group-name": "ranks", "kueue.x-k8s.io/queue-name": "q" },
    annotations: { "kueue.x-k8s.io/pod-group-total-count": "64" },
  },
  spec: podSpec(),
};

const cases: [string, KubeObject, boolean, string][] = [
  ["PyTorchJob of 64 workers × 8 GPUs", pytorchJob(64), false, "at most 40 fit at once"],
  ["PyTorchJob of 40 workers", pytorchJob(40), true, ""],
  [
    "PyTorchJob of 64 workers queued by Kueue",
    pytorchJob(64, { "kueue.x-k8s.io/queue-name": "team" }),
    true,
    "Kueue may provision nodes for it before it starts",
  ],
  ["Indexed Job of 41 ranks that reach each other", job(41, true), false, "it needs 41 pods"],
  ["Job of 41 pods that may run in waves", job(41, false), true, "its pods run in waves"],
  [
    "Volcano Job, minAvailable 41 of 64",
    volcano(41),
    false,
    "lower spec.minAvailable from 41 to at most 40",
  ],
  ["Volcano Job, minAvailable 40 of 64", volcano(40), true, ""],
  [
    "Pod of a Kueue pod group of 64",
    kueuePod,
    true,
    "Kueue pod group ranks starts its 64 pods together",
  ],
];

describe("whole-gang capacity: the controller and check agree", () => {
  it.each(cases)("%s", async (_name, manifest, allowed, said) => {
    const report = await checkParity(env.controller, manifest, { objects: env.api.objects() });
    expect(report.differences).toEqual([]);
    expect(report.e2e.allowed).toBe(allowed);
    const text = [report.e2e.message ?? "", ...(report.e2e.warnings ?? [])].join("\n");
    if (said) expect(text).toContain(said);
    else expect(text).not.toContain("cannot be placed whole");
  });

  it("the denial names the tainted nodes left out", async () => {
    const report = await checkParity(env.controller, pytorchJob(64), {
      objects: env.api.objects(),
    });
    expect(report.e2e.message).toContain("(40 of 45 nodes are candidates; excluded: 5 by taints)");
    expect(report.e2e.message).toContain(
      "lower spec.pytorchReplicaSpecs.Worker.replicas from 64 to at most 40",
    );
  });

  it("on UPDATE: growing to 64 denied alike; an update that does not grow the gang allowed alike", async () => {
    const objects = env.api.objects();
    const up = await checkParity(env.controller, pytorchJob(64), {
      objects,
      operation: "UPDATE",
      oldObject: pytorchJob(30),
    });
    const relabel = pytorchJob(64);
    (relabel.spec as { runPolicy?: object }).runPolicy = { backoffLimit: 3 };
    const same = await checkParity(env.controller, relabel, {
      objects,
      operation: "UPDATE",
      oldObject: pytorchJob(64),
    });
    expect([up.differences, same.differences]).toEqual([[], []]);
    expect(up.e2e.allowed).toBe(false);
    expect(same.e2e.allowed).toBe(true);
  });
});
