// ML workloads at `kubectl apply` on a real API server: minimal CRDs for PyTorchJob, RayCluster,
// JobSet and LeaderWorkerSet (test/cluster/support/crds.ts), a namespace with 48 GPUs of quota
// counted by the real quota controller, and the module built with a platform's own kind in the
// setting workloads.kinds (its rules in the webhook come from that build). No operator runs: what is
// proven is the apply-time verdict, the one that spares a half-started gang.
import { join } from "node:path";
import { stringify } from "yaml";
import type { KubeObject } from "../../lib/pod";
import { REPO_ROOT } from "../support/controller";
import { loadManifests } from "../support/manifests";
import { eventually } from "../support/wait";
import { applyObjects, connect, kubectl, namespace, useModule } from "./support/cluster";
import { installCrds, ML_CRDS } from "./support/crds";
import { buildVariant } from "./support/variant-build";
import { TRAINING_RUN_KIND } from "../fixtures/ml/training-run-kind";

const NS = "ml-gang";
const SETTING = { ADMISSION_GUARD_WORKLOADS_KINDS: JSON.stringify([TRAINING_RUN_KIND]) };
const cluster = connect();
const guard = useModule(cluster, { env: SETTING });

const fixture = (file: string): KubeObject =>
  loadManifests(join(REPO_ROOT, "test/fixtures/ml", file))[0].object;
const pytorchJob = (name: string, workers: number, labels: Record<string, string> = {}) => {
  const job = fixture("pytorchjob.yaml");
  job.metadata = { ...job.metadata, name, labels: { ...job.metadata?.labels, ...labels } };
  (
    job.spec as { pytorchReplicaSpecs: { Worker: { replicas: number } } }
  ).pytorchReplicaSpecs.Worker.replicas = workers;
  return job;
};
const apply = (obj: KubeObject) => kubectl(cluster, ["apply", "-f", "-"], stringify(obj));

beforeAll(async () => {
  const dist = await buildVariant("workloads-kinds", SETTING);
  await installCrds(cluster, [
    ...ML_CRDS,
    { group: "training.example.com", kind: "TrainingRun", plural: "trainingruns", version: "v1" },
  ]);
  await applyObjects(cluster, [
    namespace(NS),
    {
      apiVersion: "v1",
      kind: "ResourceQuota",
      metadata: { name: "gpus", namespace: NS },
      spec: { hard: { "requests.nvidia.com/gpu": "48" } },
    },
  ]);
  await guard.install({ dist });
  // The quota controller has counted the namespace (status.used), as the module reads it.
  await eventually(async () => {
    const q = await cluster.admin.get(`/api/v1/namespaces/${NS}/resourcequotas/gpus`);
    expect((q.body.status as { used?: object } | undefined)?.used).toBeDefined();
  }, 30_000);
}, 300_000);

test("the build's webhook rules name the ML kinds and the platform's own", () => {
  const config = guard.module!.manifest.webhookConfigurations.find(
    c => c.kind === "ValidatingWebhookConfiguration",
  )!;
  const rules = (config.webhooks as { rules: { apiGroups: string[]; resources: string[] }[] }[])[0]
    .rules;
  const named = rules.map(r => `${r.resources.join()}.${r.apiGroups.join()}`);
  expect(named).toEqual(
    expect.arrayContaining([
      "pytorchjobs.kubeflow.org",
      "rayclusters.ray.io",
      "jobsets.jobset.x-k8s.io",
      "leaderworkersets.leaderworkerset.x-k8s.io",
      "trainingruns.training.example.com",
    ]),
  );
});

test("a PyTorchJob of 1 master + 7 workers × 8 GPUs under 48 GPUs of quota is refused at apply, with the per-role totals", async () => {
  const result = await eventually(async () => {
    const r = await apply(pytorchJob("too-big", 7));
    expect(r.stderr).toContain("admission-guard/resource-quota");
    return r;
  }, 20_000);
  expect(result.code).not.toBe(0);
  expect(result.stderr).toContain("(Master: 1 × 8, Worker: 7 × 8)");
  expect(result.stderr).toContain("quota gpus has 48 of 48 left");
  expect(result.stderr).toContain(
    "lower spec.pytorchReplicaSpecs.Worker.replicas from 7 to at most 5",
  );
  expect(
    (await cluster.admin.get(`/apis/kubeflow.org/v1/namespaces/${NS}/pytorchjobs/too-big`)).status,
  ).toBe(404);
});

test("the same job with 5 workers is admitted, and says what its pods will get", async () => {
  const result = await apply(pytorchJob("fits", 5));
  expect(result.code).toBe(0);
  expect(result.stderr).toContain(
    "its pods will get spec.pytorchReplicaSpecs.Master.template.spec.securityContext.runAsNonRoot=true (the same in role Worker)",
  );
  expect(result.stderr).toContain("(when PyTorchJob creates them)");
});

test("a Kueue-labelled job over quota is admitted with the quota as a warning", async () => {
  const result = await apply(pytorchJob("queued", 7, { "kueue.x-k8s.io/queue-name": "team-a" }));
  expect(result.code).toBe(0);
  expect(result.stderr).toContain("exceeds the namespace quota as a whole");
  expect(result.stderr).toContain("Kueue starts it when its ClusterQueue has room");
});

test("a LeaderWorkerSet with a privileged worker template is refused, the role named", async () => {
  const result = await apply(fixture("leaderworkerset.yaml"));
  expect(result.code).not.toBe(0);
  expect(result.stderr).toMatch(/privileged.*\(role worker\)/);
});

test("a RayCluster and a JobSet within quota are admitted", async () => {
  for (const file of ["raycluster.yaml", "jobset.yaml"]) {
    const result = await apply(fixture(file));
    expect([file, result.code, result.stderr]).toEqual([file, 0, expect.any(String)]);
  }
});

test("the platform's own kind from workloads.kinds: judged at apply, gang quota included", async () => {
  const run = (count: number): KubeObject => ({
    apiVersion: "training.example.com/v1",
    kind: "TrainingRun",
    metadata: { name: `run-${count}`, namespace: NS },
    spec: {
      roles: [
        {
          name: "trainer",
          count,
          podTemplate: {
            spec: {
              containers: [
                {
                  name: "t",
                  image: "ghcr.io/ml-platform/train:1",
                  resources: { limits: { "nvidia.com/gpu": "8" } },
                },
              ],
            },
          },
        },
      ],
    },
  });
  // The quota is partly used by now (the admitted jobs have no pods: no operator runs).
  const denied = await apply(run(7));
  expect(denied.code).not.toBe(0);
  expect(denied.stderr).toContain(
    "TrainingRun ml-gang/run-7 exceeds the namespace quota as a whole",
  );
  expect(denied.stderr).toContain("(trainer: 7 × 8)");
  const admitted = await apply(run(2));
  expect(admitted.code).toBe(0);
  expect(admitted.stderr).toContain("(when TrainingRun creates them)");
});
