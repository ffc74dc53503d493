// ML workloads at `kubectl apply` on a real API server: minimal CRDs for PyTorchJob, RayCluster,
// JobSet and LeaderWorkerSet (test/cluster/support/crds.ts), a namespace with 48 GPUs of quota
// counted by the real quota controller, and the module built with a platform's own kind in the
// setting workloads.kinds (its rules in the webhook come from that build). No operator runs: what is
// proven is the apply-time verdict, the one that spares a half-started gang.
import { join } from "node:path";
import { stringify } from "yaml";
import type { KubeObject } from "../../lib/objects/pod";
import { REPO_ROOT } from "../support/controller";
import { loadManifests } from "../support/manifests";
import { eventually } from "../support/wait";
import { addNode, applyObjects, connect, kubectl, namespace, useModule } from "./support/cluster";
import { installCrds, ML_CRDS } from "./support/crds";
import { buildVariant } from "./support/variant-build";
import { TRAINING_RUN_KIND } from "../fixtures/ml/training-run-kind";

const NS = "ml-gang";
const SETTING = { ADMISSION_GUARD_WORKLOADS_KINDS: JSON.stringify([TRAINING_RUN_KIND]) };
const cluster = connect();
// With the watcher: the ML kinds in the PolicyReports, watched under the module's own RBAC.
const guard = useModule(cluster, {
  env: { ...SETTING, ADMISSION_GUARD_REPORTS_INTERVAL_SECONDS: "1" },
  watcher: true,
});

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
const GPU_NODE = "ml-gpu-1";
// Eight: the admitted gangs (up to 8 pods of 8 GPUs) must fit the cluster whole (gang-capacity).
const GPU_NODES = Array.from({ length: 8 }, (_, i) => `ml-gpu-${i + 1}`);
afterAll(async () => {
  for (const name of GPU_NODES) await cluster.admin.raw("DELETE", `/api/v1/nodes/${name}`);
});
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
  // As a cluster with no Kyverno or Policy Reporter: the PolicyReport CRD the project ships.
  const crd = await kubectl(cluster, [
    "apply",
    "-f",
    join(REPO_ROOT, "deploy/policyreport-crd.yaml"),
  ]);
  if (crd.code !== 0) throw new Error(crd.stderr);
  // 8-GPU nodes: node fit judges each role against the cluster's nodes (earlier files leave
  // nodes without GPUs, on which no role here would fit).
  for (const name of GPU_NODES)
    await addNode(cluster, {
      metadata: { name, labels: { "kubernetes.io/hostname": name } },
      spec: {},
      status: {
        capacity: { cpu: "64", memory: "512Gi", pods: "110", "nvidia.com/gpu": "8" },
        allocatable: { cpu: "64", memory: "512Gi", pods: "110", "nvidia.com/gpu": "8" },
      },
    });
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
  expect({ code: result.code, stderr: result.stderr }).toMatchObject({ code: 0 });
  expect(result.stderr).toContain(
    "its pods will get spec.pytorchReplicaSpecs.Master.template.spec.securityContext.runAsNonRoot=true (the same in role Worker)",
  );
  expect(result.stderr).toContain("(when PyTorchJob creates them)");
});

test("a Kueue-labelled job over quota is admitted with the quota as a warning", async () => {
  const result = await apply(pytorchJob("queued", 7, { "kueue.x-k8s.io/queue-name": "team-a" }));
  expect({ code: result.code, stderr: result.stderr }).toMatchObject({ code: 0 });
  expect(result.stderr).toContain("exceeds the namespace quota as a whole");
  expect(result.stderr).toContain("Kueue starts it when its ClusterQueue has room");
});

test("a role whose one pod asks more GPUs than any node has is refused, the role and the largest node named", async () => {
  const job = pytorchJob("too-wide", 1);
  for (const role of ["Master", "Worker"])
    (
      job.spec as {
        pytorchReplicaSpecs: Record<
          string,
          {
            template: { spec: { containers: { resources: { limits: Record<string, string> } }[] } };
          }
        >;
      }
    ).pytorchReplicaSpecs[role].template.spec.containers[0].resources.limits["nvidia.com/gpu"] =
      "16";
  const result = await apply(job);
  expect(result.code).not.toBe(0);
  expect(result.stderr).toContain("PyTorchJob ml-gang/too-wide (role Master) fits no node");
  expect(result.stderr).toContain(`node "${GPU_NODE}", has 8 allocatable nvidia.com/gpu`);
});

test("a LeaderWorkerSet with a privileged worker template is refused, the role named", async () => {
  const result = await apply(fixture("leaderworkerset.yaml"));
  expect(result.code).not.toBe(0);
  expect(result.stderr).toMatch(/privileged.*\(role worker\)/);
});

test("a RayCluster and a JobSet within quota are admitted", async () => {
  for (const file of ["raycluster.yaml", "jobset.yaml"]) {
    const result = await apply(fixture(file));
    expect({ file, code: result.code, stderr: result.stderr }).toMatchObject({ file, code: 0 });
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
  expect({ code: admitted.code, stderr: admitted.stderr }).toMatchObject({ code: 0 });
  expect(admitted.stderr).toContain("(when TrainingRun creates them)");
});

test("the watcher reports the admitted PyTorchJob, role by role, in the namespace's PolicyReport", async () => {
  const report = await eventually(async () => {
    const r = await kubectl(cluster, [
      "get",
      "policyreport",
      "admission-guard",
      "-n",
      NS,
      "-o",
      "json",
    ]);
    if (r.code !== 0) throw new Error(r.stderr);
    const parsed = JSON.parse(r.stdout) as {
      results: {
        resources: { kind: string; name: string }[];
        rule: string;
        result: string;
        message?: string;
      }[];
    };
    if (
      !parsed.results.some(
        x => x.resources[0].kind === "PyTorchJob" && x.resources[0].name === "fits",
      )
    )
      throw new Error("the PyTorchJob is not reported yet");
    return parsed;
  }, 60_000);
  const ofJob = report.results.filter(
    r => r.resources[0].kind === "PyTorchJob" && r.resources[0].name === "fits",
  );
  // Its quota is in the namespace's usage once its pods run: a stored object's quota is a skip.
  expect(ofJob.find(r => r.rule === "quota-exceeded")?.result).toBe("skip");
  expect(ofJob.filter(r => r.result === "fail")).toEqual([]);
  // Under the module's own RBAC (package.json pepr.rbac): the built-in kinds listed and watched.
  expect(guard.module!.watcher!.logs()).not.toMatch(/cannot list this workload kind.*pytorchjobs/);
});
