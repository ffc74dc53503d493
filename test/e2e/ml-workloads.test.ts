// The ML kinds through the real built controller (its bindings for PyTorchJob, RayCluster, JobSet,
// LeaderWorkerSet, ...), over HTTPS, and through `check`'s engine on a snapshot of the same cluster:
// the same verdict, message and warnings for every fixture and its variants.
import { join } from "node:path";
import type { KubeObject } from "../../lib/objects/pod";
import { REPO_ROOT } from "../support/controller";
import { useEnvironment } from "../support/environment";
import { loadManifests } from "../support/manifests";
import { checkParity } from "../support/parity";
import { eventually } from "../support/wait";

const NS = "ml-gang";
const fixture = (file: string): KubeObject =>
  loadManifests(join(REPO_ROOT, "test/fixtures/ml", file))[0].object;

const env = useEnvironment({
  objects: [
    { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
    {
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: { name: "workload", namespace: NS },
    },
    {
      apiVersion: "v1",
      kind: "ResourceQuota",
      metadata: { name: "gpus", namespace: NS },
      spec: { hard: { "requests.nvidia.com/gpu": "48" } },
      status: {
        hard: { "requests.nvidia.com/gpu": "48" },
        used: { "requests.nvidia.com/gpu": "0" },
      },
    },
  ],
});

const withWorkers = (n: number, labels: Record<string, string> = {}): KubeObject => {
  const job = fixture("pytorchjob.yaml");
  (
    job.spec as { pytorchReplicaSpecs: { Worker: { replicas: number } } }
  ).pytorchReplicaSpecs.Worker.replicas = n;
  job.metadata = { ...job.metadata, labels: { ...job.metadata?.labels, ...labels } };
  return job;
};

const cases: [string, KubeObject, boolean][] = [
  ["PyTorchJob 1 + 7 workers × 8 GPUs over a 48-GPU quota", withWorkers(7), false],
  ["PyTorchJob 1 + 5 workers (48 GPUs)", withWorkers(5), true],
  [
    "PyTorchJob over quota, queued by Kueue",
    withWorkers(7, { "kueue.x-k8s.io/queue-name": "team" }),
    true,
  ],
  ["RayCluster (2 GPU workers, up to 10)", fixture("raycluster.yaml"), true],
  ["JobSet (a driver, 4 × 2 workers)", fixture("jobset.yaml"), true],
  ["LeaderWorkerSet (privileged workers, 64 GPUs)", fixture("leaderworkerset.yaml"), false],
];

describe("ML workloads: the controller and check agree", () => {
  it.each(cases)("%s", async (_name, manifest, allowed) => {
    const report = await checkParity(env.controller, manifest, { objects: env.api.objects() });
    expect(report.differences).toEqual([]);
    expect(report.e2e.allowed).toBe(allowed);
  });

  it("the over-quota job's denial, as kubectl prints it: the per-role totals and both fixes", async () => {
    const report = await checkParity(env.controller, withWorkers(7), {
      objects: env.api.objects(),
    });
    expect(report.e2e.message).toContain(
      "admission-guard/resource-quota: PyTorchJob ml-gang/llama-finetune exceeds the namespace quota as a whole (its pods start together): requests.nvidia.com/gpu: its pods ask 64 at once (Master: 1 × 8, Worker: 7 × 8), quota gpus has 48 of 48 left",
    );
    expect(report.e2e.message).toContain(
      "lower spec.pytorchReplicaSpecs.Worker.replicas from 7 to at most 5",
    );
    expect(report.e2e.message).toContain("kubectl patch resourcequota gpus -n ml-gang");
  });

  it("on UPDATE: two more workers over a full quota denied alike; a scale-down allowed alike", async () => {
    const stored = withWorkers(5);
    // The stored 5-worker job uses the whole quota now (the last test: the quota stays full).
    const quota = env.api.get("ResourceQuota", "gpus", NS)!;
    env.api.put({
      ...quota,
      status: { ...(quota.status as object), used: { "requests.nvidia.com/gpu": "48" } },
    });
    const objects = env.api.objects();
    // Once the controller's watch has the full quota, the two agree.
    const up = await eventually(async () => {
      const r = await checkParity(env.controller, withWorkers(7), {
        objects,
        operation: "UPDATE",
        oldObject: stored,
      });
      expect(r.differences).toEqual([]);
      return r;
    }, 10_000);
    const down = await checkParity(env.controller, withWorkers(3), {
      objects,
      operation: "UPDATE",
      oldObject: stored,
    });
    expect([up.differences, down.differences]).toEqual([[], []]);
    expect(up.e2e.allowed).toBe(false);
    expect(up.e2e.message).toContain("the update adds 16");
    expect(down.e2e.allowed).toBe(true);
  });
});
