// Whole-gang capacity (capabilities/resource-quota/gang-capacity.ts): which objects are gangs, the
// denial with its numbers and fixes, the nodes that do not count, roles that share nodes, updates,
// settings and missing node data; and, against a brute-force packer, that no gang some placement
// can hold is ever denied.
import type { V1Node, V1PodSpec } from "@kubernetes/client-node";
import fc from "fast-check";
import {
  checkGangCapacity,
  type CapacityRole,
} from "../../../capabilities/resource-quota/gang-capacity";
import { resourceQuotaPolicy } from "../../../capabilities/resource-quota";
import { limitRangeDefaults, podResources } from "../../../capabilities/resource-quota/resources";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { review } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import type { Operation } from "../../../lib/engine/policy";
import { defaultSettings, parseSettings, type SettingsInput } from "../../../lib/settings";
import { formatViolation } from "../../../lib/objects/verdict";
import { container, node } from "./support";

const NS = "ml";
const GPU = "nvidia.com/gpu";
const pad = (i: number) => String(i).padStart(2, "0");
/** `n` nodes of 8 GPUs, named `<prefix>-01`...; their spec and labels as given. */
const gpuNodes = (
  n: number,
  prefix = "gpu",
  spec: Record<string, unknown> = {},
  labels: Record<string, string> = {},
  gpus = "8",
): V1Node[] =>
  Array.from({ length: n }, (_, i) =>
    node(
      `${prefix}-${pad(i + 1)}`,
      { cpu: "96", memory: "1Ti", pods: "110", [GPU]: gpus },
      spec,
      labels,
    ),
  );
const template = (gpus: string, spec: Partial<V1PodSpec> = {}) => ({
  spec: {
    containers: [container("train", { limits: { [GPU]: gpus, cpu: "8", memory: "64Gi" } })],
    ...spec,
  },
});
const pytorchJob = (
  workers: number,
  opts: {
    masterGpus?: string;
    workerGpus?: string;
    spec?: Partial<V1PodSpec>;
    labels?: Record<string, string>;
  } = {},
): KubeObject => ({
  apiVersion: "kubeflow.org/v1",
  kind: "PyTorchJob",
  metadata: { name: "llama", namespace: NS, ...(opts.labels ? { labels: opts.labels } : {}) },
  spec: {
    pytorchReplicaSpecs: {
      Master: { replicas: 1, template: template(opts.masterGpus ?? "8", opts.spec) },
      Worker: { replicas: workers, template: template(opts.workerGpus ?? "8", opts.spec) },
    },
  },
});

interface RunOptions {
  settings?: SettingsInput;
  operation?: Operation;
  oldObject?: KubeObject;
}
async function run(obj: KubeObject, objects: unknown[], opts: RunOptions = {}) {
  const r = await review([resourceQuotaPolicy], obj, {
    settings: opts.settings ? parseSettings(opts.settings) : defaultSettings(),
    cluster: new SnapshotCluster([
      { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
      ...(objects as KubeObject[]),
    ]),
    operation: opts.operation,
    oldObject: opts.oldObject,
  });
  const capacity = r.violations.filter(v => v.rule === "gang-capacity");
  return { ...r, capacity, text: capacity.map(formatViolation).join("\n") };
}

describe("64 workers × 8 GPUs on 40 eight-GPU nodes", () => {
  it("is denied with the numbers, the field to lower and the nodes to add", async () => {
    const r = await run(pytorchJob(63), gpuNodes(40));
    expect(r.allowed).toBe(false);
    expect(r.capacity).toHaveLength(1);
    expect(r.text).toContain(
      'PyTorchJob ml/llama cannot be placed whole (its pods start together): it needs 64 pods asking cpu 8, memory 64Gi, nvidia.com/gpu 8 each at once (Master: 1, Worker: 63), and at most 40 fit at once even on empty nodes (40 nodes like node "gpu-01": 1 pod each, 8 allocatable nvidia.com/gpu) (40 of 40 nodes are candidates)',
    );
    expect(r.text).toContain(
      "lower spec.pytorchReplicaSpecs.Worker.replicas from 63 to at most 39",
    );
    expect(r.text).toContain('have an admin add at least 24 more nodes like node "gpu-01"');
    // Every pod fits a node, and no quota: node fit and quota have nothing to say.
    expect(r.violations.map(v => v.rule)).toEqual(["gang-capacity"]);
  });

  it("the message does not depend on the order the manifest lists resources in (the API server sorts them)", async () => {
    const reordered = pytorchJob(63);
    for (const role of ["Master", "Worker"])
      (
        reordered.spec as {
          pytorchReplicaSpecs: Record<string, { template: { spec: V1PodSpec } }>;
        }
      ).pytorchReplicaSpecs[role].template.spec.containers[0].resources = {
        limits: { memory: "64Gi", cpu: "8", [GPU]: "8" },
      };
    expect((await run(reordered, gpuNodes(40))).text).toBe(
      (await run(pytorchJob(63), gpuNodes(40))).text,
    );
  });

  it("40 (1 + 39) is admitted, 41 is not: the line is exact", async () => {
    expect((await run(pytorchJob(39), gpuNodes(40))).allowed).toBe(true);
    const over = await run(pytorchJob(40), gpuNodes(40));
    expect(over.text).toContain("it needs 41 pods");
    expect(over.text).toContain("at most 40 fit");
  });

  it("a pod count bounds too: 4 pods of 1 GPU on a node that allows 2 pods", async () => {
    const small = [node("tiny", { cpu: "96", memory: "1Ti", pods: "2", [GPU]: "8" })];
    const r = await run(pytorchJob(3, { masterGpus: "1", workerGpus: "1" }), small);
    expect(r.text).toContain('node "tiny": 2 pods each, 2 allocatable pods');
    expect((await run(pytorchJob(1, { masterGpus: "1", workerGpus: "1" }), small)).allowed).toBe(
      true,
    );
  });
});

describe("only the nodes the pods may use count", () => {
  const cluster = [
    ...gpuNodes(40),
    ...gpuNodes(10, "tainted", { taints: [{ key: "team", value: "b", effect: "NoSchedule" }] }),
    ...gpuNodes(5, "cordoned", { unschedulable: true }),
    ...gpuNodes(5, "other-pool", {}, { pool: "other" }),
  ];
  // Every node but the last five carries the pool label the pods select.
  for (const n of cluster.slice(0, 55)) n.metadata!.labels!.pool = "train";
  const selecting = { nodeSelector: { pool: "train" } };

  it("tainted, cordoned and unselected nodes are not counted, and the message says why", async () => {
    const r = await run(pytorchJob(40, { spec: selecting }), cluster);
    expect(r.allowed).toBe(false);
    expect(r.text).toContain("at most 40 fit at once");
    expect(r.text).toContain(
      "(40 of 60 nodes are candidates; excluded: 10 by taints, 5 by unschedulable, 5 by nodeSelector/affinity)",
    );
  });

  it("a toleration of the taint brings its nodes in: 41 then fit", async () => {
    const tolerating = {
      ...selecting,
      tolerations: [{ key: "team", operator: "Equal", value: "b", effect: "NoSchedule" }],
    };
    expect((await run(pytorchJob(40, { spec: tolerating }), cluster)).allowed).toBe(true);
  });

  it("required node affinity excludes as the nodeSelector does", async () => {
    const affinity = {
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [
              { matchExpressions: [{ key: "pool", operator: "In", values: ["other"] }] },
            ],
          },
        },
      },
    };
    const r = await run(pytorchJob(5, { spec: affinity }), cluster);
    expect(r.text).toContain("at most 5 fit at once");
  });
});

describe("roles that share nodes", () => {
  it("two roles of 4 GPUs, 40 pods each, on 40 eight-GPU nodes: fits (one of each a node), not denied", async () => {
    const job = pytorchJob(40, { masterGpus: "4", workerGpus: "4" });
    (
      job.spec as { pytorchReplicaSpecs: { Master: { replicas: number } } }
    ).pytorchReplicaSpecs.Master.replicas = 40;
    // The two templates differ (the Master's gets a label): two roles, not one.
    (
      job.spec as { pytorchReplicaSpecs: { Master: { template: { metadata?: object } } } }
    ).pytorchReplicaSpecs.Master.template.metadata = { labels: { role: "master" } };
    expect((await run(job, gpuNodes(40))).allowed).toBe(true);
  });

  it("a master of 8 GPUs and 40 workers of 6: each role alone fits 40 nodes, together not", async () => {
    const r = await run(pytorchJob(40, { workerGpus: "6" }), gpuNodes(40));
    expect(r.allowed).toBe(false);
    expect(r.text).toContain(
      "its roles Master, Worker need 41 pods at once (Master: 1, Worker: 40), and at most 40 of them fit at once even on empty nodes",
    );
    expect(r.text).toContain(
      "lower spec.pytorchReplicaSpecs.Worker.replicas from 40 to at most 39",
    );
  });

  it("roles that use different nodes are judged apart: 40 + 40 on two pools of 40", async () => {
    const a = gpuNodes(40, "a", {}, { pool: "a" });
    const b = gpuNodes(40, "b", {}, { pool: "b" });
    const job = pytorchJob(40, { workerGpus: "8", spec: {} });
    const specs = (
      job.spec as {
        pytorchReplicaSpecs: Record<string, { replicas: number; template: { spec: V1PodSpec } }>;
      }
    ).pytorchReplicaSpecs;
    specs.Master.replicas = 40;
    specs.Master.template.spec.nodeSelector = { pool: "a" };
    specs.Worker.template.spec.nodeSelector = { pool: "b" };
    expect((await run(job, [...a, ...b])).allowed).toBe(true);
    specs.Worker.replicas = 41;
    const r = await run(job, [...a, ...b]);
    // The workers' pool alone is short: said of them.
    expect(r.text).toContain("it needs 41 pods");
    expect(r.text).toContain("(Worker: 41)");
    expect(r.text).toContain(
      "(40 of 80 nodes are candidates; excluded: 40 by nodeSelector/affinity)",
    );
    expect(r.allowed).toBe(false);
  });
});

/** Whether the pods (request vectors, allowed nodes) can be placed, by trying every assignment. */
function packs(
  pods: { req: number[]; allowed: boolean[] }[],
  nodes: { have: number[]; pods: number }[],
): boolean {
  const left = nodes.map(n => ({ have: [...n.have], pods: n.pods }));
  const place = (i: number): boolean => {
    if (i === pods.length) return true;
    for (const [j, n] of left.entries()) {
      const p = pods[i];
      if (!p.allowed[j] || n.pods < 1 || p.req.some((r, d) => r > n.have[d])) continue;
      n.pods--;
      p.req.forEach((r, d) => (n.have[d] -= r));
      if (place(i + 1)) return true;
      n.pods++;
      p.req.forEach((r, d) => (n.have[d] += r));
    }
    return false;
  };
  return place(0);
}

describe("never a false denial", () => {
  it("whenever every pod can be placed (brute force), checkGangCapacity finds nothing", () => {
    const DIMS = ["cpu", GPU];
    const arbitraryNode = fc.record({
      have: fc.tuple(fc.integer({ min: 1, max: 8 }), fc.integer({ min: 0, max: 8 })),
      pods: fc.integer({ min: 1, max: 4 }),
      label: fc.constantFrom("a", "b"),
    });
    const arbitraryRole = fc.record({
      req: fc.tuple(fc.integer({ min: 0, max: 6 }), fc.integer({ min: 0, max: 6 })),
      pods: fc.integer({ min: 0, max: 3 }),
      pool: fc.constantFrom("a", "b", undefined),
    });
    fc.assert(
      fc.property(
        fc.array(arbitraryNode, { minLength: 1, maxLength: 4 }),
        fc.array(arbitraryRole, { minLength: 1, maxLength: 3 }),
        (nodeSpecs, roleSpecs) => {
          const nodes = nodeSpecs.map((n, i) =>
            node(
              `n${i}`,
              { cpu: String(n.have[0]), [GPU]: String(n.have[1]), pods: String(n.pods) },
              {},
              { pool: n.label },
            ),
          );
          const roles: CapacityRole[] = roleSpecs.map((r, i) => {
            const spec = {
              containers: [
                container("c", {
                  requests: Object.fromEntries(
                    DIMS.map((d, j) => [d, String(r.req[j])]).filter(([, v]) => v !== "0"),
                  ),
                }),
              ],
              ...(r.pool ? { nodeSelector: { pool: r.pool } } : {}),
            } as V1PodSpec;
            const pod = podResources(
              { metadata: {}, spec, path: `r${i}` },
              limitRangeDefaults(undefined),
            );
            return {
              spec,
              pod,
              parts: [{ name: `r${i}`, pods: r.pods, min: r.pods, field: `r${i}`, path: `r${i}` }],
            };
          });
          const pods = roleSpecs.flatMap(r =>
            Array.from({ length: r.pods }, () => ({
              req: [...r.req],
              allowed: nodeSpecs.map(n => !r.pool || n.label === r.pool),
            })),
          );
          const placeable = packs(
            pods,
            nodeSpecs.map(n => ({ have: [...n.have], pods: n.pods })),
          );
          const needs = pods.length;
          const found = checkGangCapacity(nodes, { subject: "x", roles, needs, why: "w" });
          if (placeable) expect(found.violations).toEqual([]);
        },
      ),
      { numRuns: 3000, seed: 29 },
    );
  });

  it("nor when only some of the pods must run (Volcano's minAvailable): any choice that places is enough", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({ gpus: fc.integer({ min: 1, max: 8 }), pods: fc.integer({ min: 1, max: 3 }) }),
          { minLength: 1, maxLength: 3 },
        ),
        fc.array(
          fc.record({
            gpus: fc.integer({ min: 1, max: 6 }),
            pods: fc.integer({ min: 0, max: 3 }),
            min: fc.integer({ min: 0, max: 3 }),
          }),
          { minLength: 1, maxLength: 3 },
        ),
        fc.integer({ min: 0, max: 9 }),
        (nodeSpecs, roleSpecs, extra) => {
          const nodes = nodeSpecs.map((n, i) =>
            node(`n${i}`, { [GPU]: String(n.gpus), pods: String(n.pods) }),
          );
          const mins = roleSpecs.map(r => Math.min(r.min, r.pods));
          const least = mins.reduce((a, b) => a + b, 0);
          const most = roleSpecs.reduce((a, r) => a + r.pods, 0);
          const needs = Math.min(most, least + extra);
          const roles: CapacityRole[] = roleSpecs.map((r, i) => {
            const spec = {
              containers: [container("c", { requests: { [GPU]: String(r.gpus) } })],
            } as V1PodSpec;
            const pod = podResources(
              { metadata: {}, spec, path: `r${i}` },
              limitRangeDefaults(undefined),
            );
            return {
              spec,
              pod,
              parts: [{ name: `r${i}`, pods: r.pods, min: mins[i], field: "", path: `r${i}` }],
            };
          });
          // Every choice of pods per role within [min, pods] that makes `needs`, packed.
          const choose = (i: number, left: number, chosen: number[]): boolean => {
            if (i === roleSpecs.length)
              return (
                left === 0 &&
                packs(
                  chosen.flatMap((n, j) =>
                    Array.from({ length: n }, () => ({
                      req: [roleSpecs[j].gpus],
                      allowed: nodeSpecs.map(() => true),
                    })),
                  ),
                  nodeSpecs.map(n => ({ have: [n.gpus], pods: n.pods })),
                )
              );
            for (let n = mins[i]; n <= roleSpecs[i].pods && n <= left; n++)
              if (choose(i + 1, left - n, [...chosen, n])) return true;
            return false;
          };
          const found = checkGangCapacity(nodes, {
            subject: "x",
            roles,
            needs,
            needsField: "spec.minAvailable",
            why: "w",
          });
          if (choose(0, needs, [])) expect(found.violations).toEqual([]);
        },
      ),
      { numRuns: 2000, seed: 77 },
    );
  });

  it("and it does deny some unplaceable gangs of the same space (the test is not vacuous)", () => {
    const nodes = [node("n0", { cpu: "8", [GPU]: "8", pods: "4" })];
    const spec = { containers: [container("c", { requests: { [GPU]: "3" } })] } as V1PodSpec;
    const pod = podResources({ metadata: {}, spec, path: "r" }, limitRangeDefaults(undefined));
    const roles = [{ spec, pod, parts: [{ name: "r", pods: 3, min: 3, field: "f", path: "r" }] }];
    expect(
      checkGangCapacity(nodes, { subject: "x", roles, needs: 3, why: "w" }).violations,
    ).toHaveLength(1);
  });
});

describe("which objects are gangs", () => {
  const job = (
    parallelism: number,
    completions: number | undefined,
    extra: object = {},
    podSpec: object = {},
  ): KubeObject => ({
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: { name: "ranks", namespace: NS },
    spec: {
      parallelism,
      ...(completions === undefined ? {} : { completions }),
      ...extra,
      template: { spec: { restartPolicy: "Never", ...template("8", podSpec).spec } },
    },
  });

  it("an Indexed Job whose pods reach each other (subdomain), completions = parallelism: denied", async () => {
    const r = await run(
      job(41, 41, { completionMode: "Indexed" }, { subdomain: "ranks" }),
      gpuNodes(40),
    );
    expect(r.allowed).toBe(false);
    expect(r.text).toContain(
      "Job ml/ranks cannot be placed whole (its 41 pods run at once (completions = parallelism)): it needs 41 pods",
    );
    expect(
      (await run(job(40, 40, { completionMode: "Indexed" }, { subdomain: "ranks" }), gpuNodes(40)))
        .allowed,
    ).toBe(true);
  });

  it("any other Job with completions = parallelism may run in waves: a warning; completions ≠ parallelism: nothing", async () => {
    const r = await run(job(41, 41), gpuNodes(40));
    expect(r.allowed).toBe(true);
    expect(r.warnings.join("\n")).toContain("it needs 41 pods");
    expect(r.warnings.join("\n")).toContain("its pods run in waves");
    for (const other of [job(41, 100), job(41, undefined), job(41, 41, { suspend: true })]) {
      const quiet = await run(other, gpuNodes(40));
      expect(quiet.warnings.join("\n")).not.toContain("cannot be placed whole");
    }
  });

  const volcano = (replicas: number, minAvailable?: number, taskMin?: number): KubeObject => ({
    apiVersion: "batch.volcano.sh/v1alpha1",
    kind: "Job",
    metadata: { name: "vc", namespace: NS },
    spec: {
      ...(minAvailable === undefined ? {} : { minAvailable }),
      tasks: [
        {
          name: "worker",
          replicas,
          ...(taskMin === undefined ? {} : { minAvailable: taskMin }),
          template: template("8"),
        },
      ],
    },
  });

  it("a Volcano Job: the gang is spec.minAvailable pods, not every task's replicas", async () => {
    expect((await run(volcano(64, 40), gpuNodes(40))).allowed).toBe(true);
    const over = await run(volcano(64, 41), gpuNodes(40));
    expect(over.allowed).toBe(false);
    expect(over.text).toContain(
      "Volcano starts it once spec.minAvailable (41) of its pods can run together",
    );
    expect(over.text).toContain("lower spec.minAvailable from 41 to at most 40");
    // Without minAvailable Volcano needs every pod.
    const all = await run(volcano(64), gpuNodes(40));
    expect(all.text).toContain("it needs 64 pods");
    expect(all.text).toContain("lower spec.tasks[0].replicas from 64 to at most 40");
  });

  it("a LeaderWorkerSet: each group starts whole, the groups one by one", async () => {
    const lws = (replicas: number, size: number): KubeObject => ({
      apiVersion: "leaderworkerset.x-k8s.io/v1",
      kind: "LeaderWorkerSet",
      metadata: { name: "serve", namespace: NS },
      spec: {
        replicas,
        leaderWorkerTemplate: { size, workerTemplate: template("8") },
      },
    });
    // 3 groups of 4 on 4 nodes: each group fits; they need not all run at once.
    expect((await run(lws(3, 4), gpuNodes(4))).allowed).toBe(true);
    const r = await run(lws(1, 8), gpuNodes(4));
    expect(r.allowed).toBe(false);
    expect(r.text).toContain("the pods of each of its groups start together");
    expect(r.text).toContain("lower spec.leaderWorkerTemplate.size from 8 to at most 4");
  });

  it("a RayCluster's workers join as they are placed: a warning", async () => {
    const rc: KubeObject = {
      apiVersion: "ray.io/v1",
      kind: "RayCluster",
      metadata: { name: "rc", namespace: NS },
      spec: {
        headGroupSpec: { template: template("0") },
        workerGroupSpecs: [{ groupName: "gpu", replicas: 50, template: template("8") }],
      },
    };
    const r = await run(rc, gpuNodes(40));
    expect(r.allowed).toBe(true);
    expect(r.warnings.join("\n")).toContain("a Ray cluster's workers join it as they are placed");
  });

  it("a job Kueue queues: a warning (Kueue may provision nodes first)", async () => {
    const r = await run(
      pytorchJob(63, { labels: { "kueue.x-k8s.io/queue-name": "team" } }),
      gpuNodes(40),
    );
    expect(r.allowed).toBe(true);
    expect(r.warnings.join("\n")).toContain("Kueue may provision nodes for it before it starts");
  });

  it("a Pod of a Kueue pod group: a warning for a group of pods all like it", async () => {
    const member: KubeObject = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: "rank-0",
        namespace: NS,
        labels: { "kueue.x-k8s.io/pod-group-name": "ranks", "kueue.x-k8s.io/queue-name": "q" },
        annotations: { "kueue.x-k8s.io/pod-group-total-count": "64" },
      },
      spec: template("8").spec,
    };
    const r = await run(member, gpuNodes(40));
    expect(r.allowed).toBe(true);
    const w = r.warnings.join("\n");
    expect(w).toContain("Kueue pod group ranks starts its 64 pods together");
    expect(w).toContain("judged as if every pod of the group asks what this one asks");
  });
});

describe("updates, settings and missing node data", () => {
  it("an UPDATE is judged only when the gang grows", async () => {
    const stored = pytorchJob(63);
    const image = pytorchJob(63);
    (
      image.spec as { pytorchReplicaSpecs: { Worker: { template: { spec: V1PodSpec } } } }
    ).pytorchReplicaSpecs.Worker.template.spec.containers[0].image = "registry.example/train:2";
    const opts = { operation: "UPDATE" as const, oldObject: stored };
    expect((await run(image, gpuNodes(40), opts)).capacity).toEqual([]);
    expect((await run(pytorchJob(50), gpuNodes(40), opts)).allowed).toBe(true); // scale-down
    const up = await run(pytorchJob(64), gpuNodes(40), opts);
    expect(up.allowed).toBe(false);
    expect(up.text).toContain("it needs 65 pods");
    expect(
      (await run(pytorchJob(45), gpuNodes(40), { ...opts, oldObject: pytorchJob(20) })).allowed,
    ).toBe(false);
  });

  it("gangCapacity warn: said, not denied; off, and nodeFit off: skipped, saying so", async () => {
    const warn = await run(pytorchJob(63), gpuNodes(40), {
      settings: { resourceQuota: { gangCapacity: "warn" } },
    });
    expect(warn.allowed).toBe(true);
    expect(warn.warnings.join("\n")).toContain("resourceQuota.gangCapacity is warn");
    for (const [settings, reason] of [
      [{ resourceQuota: { gangCapacity: "off" } }, "resourceQuota.gangCapacity is off"],
      [{ resourceQuota: { nodeFit: false } }, "resourceQuota.nodeFit is off"],
    ] as const) {
      const r = await run(pytorchJob(63), gpuNodes(40), { settings });
      expect(r.allowed).toBe(true);
      expect(r.skipped).toContainEqual(expect.objectContaining({ rule: "gang-capacity", reason }));
    }
  });

  it("no node data: not checked, a warning (a denial with onUnavailable=deny)", async () => {
    const r = await run(pytorchJob(63), []);
    expect(r.allowed).toBe(true);
    expect(r.warnings.join("\n")).toContain(
      "whole-gang capacity not checked for PyTorchJob ml/llama: the cluster snapshot holds no Nodes",
    );
    const deny = await run(pytorchJob(63), [], {
      settings: { resourceQuota: { onUnavailable: "deny" } },
    });
    expect(deny.violations.map(v => v.message)).toContainEqual(
      expect.stringContaining("PyTorchJob ml/llama: whole-gang capacity cannot be checked"),
    );
  });

  it("what node fit already says is not said again: a resource no node offers, a pod too big for any node", async () => {
    const cpuOnly = [node("cpu", { cpu: "96", memory: "1Ti", pods: "110" })];
    const none = await run(pytorchJob(63), cpuOnly);
    expect(none.capacity).toEqual([]);
    expect(none.warnings.join("\n")).toContain("no node offers nvidia.com/gpu");
    const big = await run(pytorchJob(63, { workerGpus: "16", masterGpus: "16" }), gpuNodes(40));
    expect(big.violations.map(v => v.rule)).toEqual(["node-fit"]);
  });
});

describe("flat in cluster size", () => {
  it("nodes told apart by name are judged one by one, up to 5,000 roles × nodes; beyond, not checked, said", () => {
    const many = Array.from({ length: 6_000 }, (_, i) =>
      node(`n${i}`, { cpu: "96", memory: "1Ti", pods: "110", [GPU]: "8" }),
    );
    const spec = template("8", { nodeSelector: { "kubernetes.io/hostname": "n1" } })
      .spec as V1PodSpec;
    const pod = podResources({ metadata: {}, spec, path: "t" }, limitRangeDefaults(undefined));
    const roles = [{ spec, pod, parts: [{ name: "w", pods: 2, min: 2, field: "f", path: "t" }] }];
    const judged = (nodes: V1Node[]) =>
      checkGangCapacity(nodes, { subject: "x", roles, needs: 2, why: "w" });
    expect(judged(many).warnings.join()).toContain(
      "whole-gang capacity not checked: 1 role × 6000 node classes is more than 5000",
    );
    // On fewer nodes the same gang is judged: one node of 8 GPUs holds one pod of the two.
    expect(judged(many.slice(0, 4_000)).violations[0].message).toContain("at most 1 fit at once");
  });

  it("10,000 nodes in 4 classes are judged by class", () => {
    const many = Array.from({ length: 10_000 }, (_, i) =>
      node(
        `n${i}`,
        { cpu: "96", memory: "1Ti", pods: "110", [GPU]: "8" },
        {},
        { zone: `z${i % 4}` },
      ),
    );
    const spec = template("8").spec as V1PodSpec;
    const pod = podResources({ metadata: {}, spec, path: "t" }, limitRangeDefaults(undefined));
    const roles = [
      { spec, pod, parts: [{ name: "w", pods: 10_001, min: 10_001, field: "f", path: "t" }] },
    ];
    checkGangCapacity(many, { subject: "x", roles, needs: 10_001, why: "w" }); // groups once
    const started = process.hrtime.bigint();
    const { violations } = checkGangCapacity(many, {
      subject: "x",
      roles,
      needs: 10_001,
      why: "w",
    });
    const micros = Number(process.hrtime.bigint() - started) / 1000;
    expect(violations[0].message).toContain("at most 10000 fit at once");
    expect(violations[0].message).toContain('2500 nodes like node "n0"');
    // Generous: a node-by-node pass with its binary search takes tens of milliseconds here.
    expect(micros).toBeLessThan(20_000);
  });
});
