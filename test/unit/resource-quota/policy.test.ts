// The resource-quota capability through the engine (what `check` and the webhook both run): quota
// and node fit for pods and workloads, the messages with their numbers, and no data ≠ violation.
import fc from "fast-check";
import { join } from "node:path";
import type { V1Node, V1ResourceQuota } from "@kubernetes/client-node";
import { resourceQuotaPolicy } from "../../../capabilities/resource-quota";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { review, type ContextInput } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import type { Operation } from "../../../lib/engine/policy";
import { defaultSettings, parseSettings, type SettingsInput } from "../../../lib/settings";
import { formatViolation } from "../../../lib/objects/verdict";
import { loadManifests } from "../../support/manifests";
import { container, node, resourceQuota, type Res } from "./support";

const NS = "mlflow-prod";
const pod = (
  resources: Res,
  spec: Record<string, unknown> = {},
  name = "mlflow-train",
): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: NS },
  spec: { containers: [container(name, resources)], ...spec },
});
const workload = (
  kind: string,
  resources: Res,
  spec: Record<string, unknown> = {},
  templateSpec: Record<string, unknown> = {},
): KubeObject => {
  const template = {
    metadata: { labels: { app: "train" } },
    spec: { containers: [container("train", resources)], ...templateSpec },
  };
  const body =
    kind === "CronJob"
      ? { schedule: "@hourly", jobTemplate: { spec: { template, ...spec } } }
      : { selector: { matchLabels: { app: "train" } }, template, ...spec };
  return { apiVersion: "apps/v1", kind, metadata: { name: "train", namespace: NS }, spec: body };
};
const quota = (
  name: string,
  hard: Record<string, string>,
  used: Record<string, string> | undefined,
  spec: Record<string, unknown> = {},
) => resourceQuota(NS, name, hard, used, spec);
const bigNode = node("big", { cpu: "64", memory: "256Gi", "ephemeral-storage": "500Gi" });

async function run(
  obj: KubeObject,
  objects: unknown[],
  opts: { settings?: SettingsInput; operation?: Operation; oldObject?: KubeObject } = {},
) {
  const input: ContextInput = {
    settings: opts.settings ? parseSettings(opts.settings) : defaultSettings(),
    cluster: new SnapshotCluster(objects as KubeObject[]),
    operation: opts.operation,
    oldObject: opts.oldObject,
  };
  const r = await review([resourceQuotaPolicy], obj, input);
  return {
    ...r,
    denials: r.violations.map(formatViolation),
    text: r.violations.map(formatViolation).join("\n"),
  };
}

const seed001Pod = () =>
  pod({ requests: { cpu: "8", memory: "16Gi" }, limits: { cpu: "8", memory: "16Gi" } });
const computeResources = (used: string) =>
  quota("compute-resources", { "requests.cpu": "100" }, { "requests.cpu": used });

describe("quota: pods", () => {
  it("denies the seed 001 pod with every number and both fixes", async () => {
    const r = await run(seed001Pod(), [computeResources("95"), bigNode]);
    expect(r.allowed).toBe(false);
    expect(r.violations.map(v => v.rule)).toEqual(["quota-exceeded"]);
    expect(r.denials[0]).toBe(
      `admission-guard/resource-quota: Pod mlflow-prod/mlflow-train exceeds the namespace quota: requests.cpu: pod asks 8, quota compute-resources has 5 of 100 left (95 used). ` +
        `Fix: lower the pod's requests.cpu to at most 5 (container "mlflow-train" (spec.containers[0]) asks 8, its limit too); ` +
        `or have an admin raise the quota: kubectl patch resourcequota compute-resources -n mlflow-prod --type merge -p '{"spec":{"hard":{"requests.cpu":"103"}}}'`,
    );
  });

  it("allows the same pod when the quota has room", async () => {
    const r = await run(seed001Pod(), [computeResources("92"), bigNode]);
    expect(r.allowed).toBe(true);
    expect(r.warnings).toEqual([]);
  });

  it("allows exactly what is left (used + asked == hard)", async () => {
    expect((await run(seed001Pod(), [computeResources("92"), bigNode])).allowed).toBe(true);
    expect((await run(seed001Pod(), [computeResources("92001m"), bigNode])).allowed).toBe(false);
  });

  it("lists every resource a quota lacks, in one violation, with one patch for all", async () => {
    const q = quota(
      "compute",
      { "requests.cpu": "10", "limits.memory": "20Gi", "requests.memory": "1Ti" },
      { "requests.cpu": "4", "limits.memory": "10Gi", "requests.memory": "0" },
    );
    const r = await run(seed001Pod(), [q, bigNode]);
    expect(r.violations).toHaveLength(1);
    expect(r.text).toContain(
      "limits.memory: pod asks 16Gi, quota compute has 10Gi of 20Gi left (10Gi used)",
    );
    expect(r.text).toContain("requests.cpu: pod asks 8, quota compute has 6 of 10 left (4 used)");
    expect(r.text).toContain("lower the pod's limits.memory to at most 10Gi");
    expect(r.text).toContain(`'{"spec":{"hard":{"limits.memory":"26Gi","requests.cpu":"12"}}}'`);
  });

  it("checks each matching quota and names each one that is exceeded", async () => {
    const r = await run(seed001Pod(), [
      quota("a-cpu", { "requests.cpu": "100" }, { "requests.cpu": "95" }),
      quota("b-memory", { "requests.memory": "100Gi" }, { "requests.memory": "90Gi" }),
      quota("c-roomy", { "requests.cpu": "1k" }, { "requests.cpu": "0" }),
      bigNode,
    ]);
    expect(r.violations.map(v => v.message.match(/quota (\S+) has/)?.[1])).toEqual([
      "a-cpu",
      "b-memory",
    ]);
  });

  it("denies when a quota is already over its hard limit, even for a small pod", async () => {
    const r = await run(pod({ requests: { cpu: "10m" } }), [computeResources("120"), bigNode]);
    expect(r.text).toContain(
      "requests.cpu: pod asks 10m, quota compute-resources has 0 of 100 left (120 used)",
    );
    expect(r.text).not.toContain("lower the pod's"); // nothing fits: lowering cannot help
  });

  it("counts pods and count/pods", async () => {
    const r = await run(pod({ requests: { cpu: "1" } }), [
      quota("pods", { pods: "10", "count/pods": "12" }, { pods: "10", "count/pods": "11" }),
      bigNode,
    ]);
    expect(r.text).toContain("pods: pod asks 1, quota pods has 0 of 10 left (10 used)");
    expect(r.text).not.toContain("count/pods:");
    expect(r.text).toContain("delete pods namespace mlflow-prod no longer needs");
  });

  it("denies a GPU pod asking 2 nvidia.com/gpu with 1 left (requests default from limits)", async () => {
    const gpuPod = pod({ limits: { "nvidia.com/gpu": "2", cpu: "4", memory: "8Gi" } });
    const r = await run(gpuPod, [
      quota("gpu", { "requests.nvidia.com/gpu": "4" }, { "requests.nvidia.com/gpu": "3" }),
      node("gpu-node", { cpu: "32", memory: "128Gi", "nvidia.com/gpu": "8" }),
    ]);
    expect(r.text).toContain(
      "requests.nvidia.com/gpu: pod asks 2, quota gpu has 1 of 4 left (3 used)",
    );
    expect(r.text).toContain("lower the pod's requests.nvidia.com/gpu to at most 1");
    expect(r.text).toContain("asks 2, its limit too");
    expect(r.text).toContain(`"requests.nvidia.com/gpu":"5"`);
  });

  it("keeps memory in its binary form and suggests a value that fits, rounded down to whole Mi", async () => {
    const q = quota("mem", { "requests.memory": "10Gi" }, { "requests.memory": "7000Mi" });
    const r = await run(pod({ requests: { memory: "4Gi" } }), [q, bigNode]);
    expect(r.text).toContain(
      "requests.memory: pod asks 4Gi, quota mem has 3240Mi of 10Gi left (7000Mi used)",
    );
    expect(r.text).toContain("lower the pod's requests.memory to at most 3240Mi");
    expect(r.text).toContain(`"requests.memory":"11096Mi"`);
  });

  it("prefers status.hard (what the plugin reads) over spec.hard, and falls back to spec.hard", async () => {
    const q = quota("q", { "requests.cpu": "200" }, { "requests.cpu": "95" });
    q.status!.hard = { "requests.cpu": "100" };
    expect((await run(seed001Pod(), [q, bigNode])).text).toContain("5 of 100 left");
    const fresh: V1ResourceQuota = { ...q, status: { used: { "requests.cpu": "95" } } };
    expect((await run(seed001Pod(), [fresh, bigNode])).allowed).toBe(true);
  });

  it("with no usage recorded yet: denies only what exceeds hard alone, warns otherwise", async () => {
    const noUsage = quota("new", { "requests.cpu": "6" }, undefined);
    const r = await run(seed001Pod(), [noUsage, bigNode]);
    expect(r.text).toContain(
      "requests.cpu: pod asks 8, more than quota new allows at all (hard 6; no usage recorded yet)",
    );
    expect(r.text).toContain("to at least these values");
    const ok = await run(pod({ requests: { cpu: "1" } }), [noUsage, bigNode]);
    expect(ok.allowed).toBe(true);
    expect(ok.warnings.join("\n")).toContain(
      "ResourceQuota new has no usage recorded yet for requests.cpu",
    );
  });

  it("ignores quotas that track nothing a pod uses, and quotas of other namespaces", async () => {
    const services = quota(
      "objects",
      { services: "0", "count/deployments.apps": "0" },
      { services: "5" },
    );
    const other = { ...computeResources("100"), metadata: { name: "x", namespace: "other" } };
    const r = await run(seed001Pod(), [services, other, bigNode]);
    expect(r.allowed).toBe(true);
    expect(r.warnings).toEqual([]);
  });

  it("reports a request that is not a quantity instead of guessing", async () => {
    const r = await run(pod({ requests: { cpu: "eight" } }), [computeResources("0"), bigNode]);
    expect(r.violations.map(v => v.rule)).toEqual(["invalid-quantity"]);
    expect(r.text).toContain(
      'spec.containers[0].resources.requests.cpu: "eight" is not a Kubernetes quantity',
    );
  });

  it("does not check Pod UPDATEs (resizing is not admission's business)", async () => {
    const r = await run(seed001Pod(), [computeResources("100"), bigNode], {
      operation: "UPDATE",
      oldObject: seed001Pod(),
    });
    expect(r.violations).toEqual([]);
  });
});

describe("quota: a quota that changes", () => {
  it("is read anew when the cluster view replaces it (a watch event), the same object read once", async () => {
    const full = computeResources("95");
    expect((await run(seed001Pod(), [full, bigNode])).allowed).toBe(false);
    expect((await run(seed001Pod(), [full, bigNode])).allowed).toBe(false);
    // The quota controller counted pods that ended: a new object, with room.
    const freed = computeResources("80");
    expect((await run(seed001Pod(), [freed, bigNode])).allowed).toBe(true);
    const raised = quota("compute-resources", { "requests.cpu": "110" }, { "requests.cpu": "95" });
    expect((await run(seed001Pod(), [raised, bigNode])).allowed).toBe(true);
  });
});

describe("quota: scopes", () => {
  const full = computeResources("100");
  const scoped = (scopes: string[] | undefined, selector?: Record<string, unknown>[]) =>
    quota(
      "scoped",
      { "requests.cpu": "1", pods: "1" },
      { "requests.cpu": "1", pods: "1" },
      {
        ...(scopes ? { scopes } : {}),
        ...(selector ? { scopeSelector: { matchExpressions: selector } } : {}),
      },
    );
  const matches = async (obj: KubeObject, q: V1ResourceQuota) =>
    !(await run(obj, [q, bigNode])).allowed;
  const burstable = pod({ requests: { cpu: "100m" } });
  const bestEffort = pod({});

  it("BestEffort / NotBestEffort", async () => {
    expect(await matches(bestEffort, scoped(["BestEffort"]))).toBe(true);
    expect(await matches(burstable, scoped(["BestEffort"]))).toBe(false);
    expect(await matches(burstable, scoped(["NotBestEffort"]))).toBe(true);
    expect(await matches(bestEffort, scoped(["NotBestEffort"]))).toBe(false);
  });

  it("Terminating / NotTerminating by activeDeadlineSeconds", async () => {
    const terminating = pod({ requests: { cpu: "100m" } }, { activeDeadlineSeconds: 3600 });
    expect(await matches(terminating, scoped(["Terminating"]))).toBe(true);
    expect(await matches(burstable, scoped(["Terminating"]))).toBe(false);
    expect(await matches(burstable, scoped(["NotTerminating"]))).toBe(true);
    expect(await matches(terminating, scoped(["NotTerminating"]))).toBe(false);
  });

  it("PriorityClass through scopeSelector: In, NotIn, Exists, and DoesNotExist as the plugin evaluates it", async () => {
    const high = pod({ requests: { cpu: "100m" } }, { priorityClassName: "high" });
    const sel = (operator: string, values?: string[]) =>
      scoped(undefined, [{ scopeName: "PriorityClass", operator, values }]);
    expect(await matches(high, sel("In", ["high", "critical"]))).toBe(true);
    expect(await matches(burstable, sel("In", ["high"]))).toBe(false);
    expect(await matches(high, sel("NotIn", ["high"]))).toBe(false);
    expect(await matches(burstable, sel("NotIn", ["high"]))).toBe(true);
    expect(await matches(high, sel("Exists"))).toBe(true);
    expect(await matches(burstable, sel("Exists"))).toBe(false);
    expect(await matches(high, scoped(["PriorityClass"]))).toBe(true);
    // The plugin's label set always has the PriorityClass key, so DoesNotExist never matches.
    expect(await matches(burstable, sel("DoesNotExist"))).toBe(false);
  });

  it("CrossNamespacePodAffinity, combined scopes (all must match), unknown scopes", async () => {
    const crossNs = pod(
      { requests: { cpu: "100m" } },
      {
        affinity: {
          podAffinity: {
            preferredDuringSchedulingIgnoredDuringExecution: [
              { weight: 1, podAffinityTerm: { topologyKey: "zone", namespaceSelector: {} } },
            ],
          },
        },
      },
    );
    expect(await matches(crossNs, scoped(["CrossNamespacePodAffinity"]))).toBe(true);
    expect(await matches(burstable, scoped(["CrossNamespacePodAffinity"]))).toBe(false);
    expect(await matches(burstable, scoped(["NotBestEffort", "NotTerminating"]))).toBe(true);
    expect(await matches(burstable, scoped(["NotBestEffort", "Terminating"]))).toBe(false);
    expect(await matches(burstable, scoped(["VolumeAttributesClass"]))).toBe(false);
    expect(await matches(burstable, full)).toBe(true);
  });
});

describe("quota: must specify", () => {
  const tracksLimits = quota(
    "compute",
    { "requests.cpu": "100", "limits.memory": "100Gi", "requests.nvidia.com/gpu": "4" },
    { "requests.cpu": "0", "limits.memory": "0", "requests.nvidia.com/gpu": "0" },
  );

  it("denies a container that does not set a cpu/memory resource the quota tracks, pointing to a LimitRange", async () => {
    const p = pod({ requests: { cpu: "1" } }, { initContainers: [container("setup", {})] });
    const r = await run(p, [tracksLimits, bigNode]);
    expect(r.violations.map(v => v.rule)).toEqual(["quota-must-specify"]);
    expect(r.text).toContain(
      'init container "setup" (spec.initContainers[0]), container "mlflow-train" (spec.containers[0]) set no resources.limits.memory',
    );
    expect(r.text).toContain(
      'init container "setup" (spec.initContainers[0]) sets no resources.requests.cpu',
    );
    expect(r.text).toContain('"must specify limits.memory, requests.cpu"');
    expect(r.text).toContain("kubectl apply -n mlflow-prod -f - <<< '");
    const limitRange = JSON.parse(r.text.split("<<< '")[1].split("'")[0]);
    expect(limitRange.spec.limits[0]).toEqual({
      type: "Container",
      defaultRequest: { cpu: "100m" },
      default: { memory: "256Mi" },
    });
  });

  it("asks once for a field that two tracked names share (cpu and requests.cpu)", async () => {
    const both = quota(
      "both",
      { cpu: "10", "requests.cpu": "10" },
      { cpu: "0", "requests.cpu": "0" },
    );
    const r = await run(pod({ requests: { memory: "1Gi" } }), [both, bigNode]);
    expect(r.text).toContain(
      'container "mlflow-train" (spec.containers[0]) sets no resources.requests.cpu, which',
    );
    expect(r.text).toContain('"must specify cpu, requests.cpu"');
    expect(r.text).toContain("Fix: set resources.requests.cpu on those containers");
  });

  it("is satisfied by the namespace's LimitRange defaults (applied to templates and manifests)", async () => {
    const lr = {
      kind: "LimitRange",
      metadata: { name: "defaults", namespace: NS },
      spec: {
        limits: [
          { type: "Container", default: { memory: "1Gi" }, defaultRequest: { cpu: "100m" } },
        ],
      },
    };
    const r = await run(workload("Deployment", {}, { replicas: 2 }), [tracksLimits, lr, bigNode]);
    expect(r.allowed).toBe(true);
  });

  it("does not require extended resources or ephemeral storage in every container", async () => {
    const q = quota(
      "x",
      { "requests.nvidia.com/gpu": "4", "requests.ephemeral-storage": "1Ti" },
      { "requests.nvidia.com/gpu": "0", "requests.ephemeral-storage": "0" },
    );
    expect((await run(pod({}), [q, bigNode])).allowed).toBe(true);
  });
});

describe("quota: workloads", () => {
  const tenLeft = quota("compute", { "requests.cpu": "100" }, { "requests.cpu": "90" });

  it("denies a Deployment of 3 replicas × 4 cpu with 10 left, at apply time, with the replicas that fit", async () => {
    const r = await run(workload("Deployment", { requests: { cpu: "4" } }, { replicas: 3 }), [
      tenLeft,
      bigNode,
    ]);
    expect(r.allowed).toBe(false);
    expect(r.text).toContain(
      "requests.cpu: Deployment asks 12 (3 replicas × 4), quota compute has 10 of 100 left (90 used)",
    );
    expect(r.text).toContain("lower each pod's requests.cpu to at most 3333m");
    expect(r.text).toContain("lower spec.replicas from 3 to at most 2");
    expect(r.text).toContain(`"requests.cpu":"102"`);
  });

  it.each([
    ["StatefulSet", { replicas: 3 }, false],
    ["ReplicaSet", { replicas: 2 }, true],
    ["ReplicationController", { replicas: 3 }, false],
    ["Deployment", {}, true], // replicas default 1
    ["Deployment", { replicas: 0 }, true],
    ["Job", { parallelism: 3 }, false],
    ["Job", { parallelism: 3, completions: 2 }, true],
    ["Job", { parallelism: 3, suspend: true }, true],
    ["CronJob", { parallelism: 3 }, false],
  ])("%s %j → allowed: %p", async (kind, spec, allowed) => {
    const r = await run(workload(kind, { requests: { cpu: "4" } }, spec), [tenLeft, bigNode]);
    expect(r.allowed).toBe(allowed);
  });

  it("names the Job's parallelism field as the thing to lower", async () => {
    const r = await run(workload("CronJob", { requests: { cpu: "4" } }, { parallelism: 3 }), [
      tenLeft,
      bigNode,
    ]);
    expect(r.text).toContain("lower spec.jobTemplate.spec.parallelism from 3 to at most 2");
  });

  it("denies a GPU Job asking 2 nvidia.com/gpu with 1 left", async () => {
    const q = quota("gpu", { "requests.nvidia.com/gpu": "4" }, { "requests.nvidia.com/gpu": "3" });
    const job = workload("Job", { limits: { "nvidia.com/gpu": "2" } }, { backoffLimit: 0 });
    const r = await run(job, [q, node("g", { cpu: "8", memory: "32Gi", "nvidia.com/gpu": "4" })]);
    expect(r.text).toContain(
      "requests.nvidia.com/gpu: Job asks 2 (1 parallelism × 2), quota gpu has 1 of 4 left (3 used)",
    );
  });

  it("on UPDATE checks only the increase over the stored object", async () => {
    const old = workload("Deployment", { requests: { cpu: "4" } }, { replicas: 3 });
    const fourLeft = quota("compute", { "requests.cpu": "100" }, { "requests.cpu": "96" });
    const up = (replicas: number, cpu = "4") =>
      run(workload("Deployment", { requests: { cpu } }, { replicas }), [fourLeft, bigNode], {
        operation: "UPDATE",
        oldObject: old,
      });
    expect((await up(4)).allowed).toBe(true); // adds 4, 4 left
    const five = await up(5);
    expect(five.allowed).toBe(false);
    expect(five.text).toContain(
      "requests.cpu: the update adds 8 (5 replicas × 4, was 3 × 4), quota compute has 4 of 100 left (96 used)",
    );
    expect(five.text).toContain("lower spec.replicas from 5 to at most 4");
    expect((await up(2)).allowed).toBe(true); // scaling down
    expect((await up(3, "5")).allowed).toBe(true); // adds 3
    expect((await up(3, "6")).allowed).toBe(false); // adds 6
  });

  it("on UPDATE leaves alone a change that creates no new pods, even over quota or must-specify", async () => {
    const noRequests = workload("Deployment", {}, { replicas: 3 });
    const relabelled = {
      ...noRequests,
      metadata: { ...noRequests.metadata, labels: { team: "ml" } },
    };
    const r = await run(relabelled, [computeResources("200"), bigNode], {
      operation: "UPDATE",
      oldObject: noRequests,
    });
    expect(r.violations).toEqual([]);
  });

  it("a DaemonSet is checked for node fit only", async () => {
    const ds = workload("DaemonSet", { requests: { cpu: "4" } });
    const r = await run(ds, [computeResources("100"), bigNode]);
    expect(r.allowed).toBe(true);
  });

  it("a quota decision is exactly used + pods × per-pod <= hard (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 5 }),
        fc.array(fc.integer({ min: 0, max: 5000 }), { minLength: 1, maxLength: 4 }),
        fc.integer({ min: 0, max: 50_000 }),
        fc.integer({ min: 0, max: 50_000 }),
        async (replicas, millis, hard, used) => {
          const template = {
            containers: millis.map((m, i) => container(`c${i}`, { requests: { cpu: `${m}m` } })),
          };
          const d: KubeObject = {
            kind: "Deployment",
            metadata: { name: "d", namespace: NS },
            spec: { replicas, template: { spec: template } },
          };
          const q = quota("q", { "requests.cpu": `${hard}m` }, { "requests.cpu": `${used}m` });
          const r = await run(d, [q]);
          const asked = replicas * millis.reduce((a, b) => a + b, 0);
          expect(r.allowed).toBe(replicas === 0 || used + asked <= hard);
        },
      ),
      { numRuns: 150 },
    );
  });
});

describe("node fit", () => {
  const capacity = () =>
    loadManifests(join(__dirname, "../../../examples/cluster/capacity.yaml")).map(m => m.object);
  /** Seed 000's trainer pod as written (the e2e fixture). */
  const seed000Pod = () =>
    structuredClone(
      loadManifests(join(__dirname, "../../fixtures/e2e/llamaindex-trainer.yaml"))[0].object,
    );

  it("denies the seed 000 pod (limits 8Gi) on nodes of 4Gi allocatable, naming the node", async () => {
    const r = await run(seed000Pod(), capacity());
    const fit = r.violations.find(v => v.rule === "node-fit");
    expect(formatViolation(fit!)).toBe(
      `admission-guard/resource-quota: Pod llama-index/llamaindex-trainer fits no node and would stay Pending: ` +
        `memory request and limit 8Gi is more than any schedulable node can allocate: ` +
        `the largest candidate, node "gpu-node-1", has 4Gi allocatable memory (2 of 4 nodes are candidates; excluded: 2 by taints). ` +
        `Fix: lower resources.requests.memory and resources.limits.memory so the pod asks at most 4Gi memory ` +
        `(container "trainer" (spec.containers[0]) asks 8Gi, its limit too); ` +
        `or add a node with more allocatable resources (or let the pod's nodeSelector/tolerations reach a larger one)`,
    );
    // and the seed's quota error, with its numbers
    expect(r.text).toContain("cpu: pod asks 4, quota llama-quota has 2 of 8 left (6 used)");
  });

  it("the seed 000 'after' manifest passes both", async () => {
    const after = seed000Pod();
    (after.spec as { containers: unknown[] }).containers = [
      container("trainer", {
        limits: { cpu: "4", memory: "6Gi" },
        requests: { cpu: "2", memory: "4Gi" },
      }),
    ];
    const r = await run(after, capacity());
    expect(r.allowed).toBe(true);
    // its 6Gi limit is above every node: a warning, not a denial
    expect(r.warnings.join("\n")).toContain(
      'memory limit 6Gi is more than any candidate node can allocate (largest: node "gpu-node-1", 4Gi)',
    );
  });

  it("skips cordoned nodes unless the pod tolerates it", async () => {
    const nodes = [
      node("small", { cpu: "4", memory: "4Gi" }),
      node("cordoned", { cpu: "64", memory: "64Gi" }, { unschedulable: true }),
    ];
    const p = pod({ requests: { memory: "8Gi" } });
    const r = await run(p, nodes);
    expect(r.text).toContain(
      'node "small", has 4Gi allocatable memory (1 of 2 nodes are candidates; excluded: 1 by unschedulable)',
    );
    const tolerant = pod(
      { requests: { memory: "8Gi" } },
      {
        tolerations: [
          { key: "node.kubernetes.io/unschedulable", operator: "Exists", effect: "NoSchedule" },
        ],
      },
    );
    expect((await run(tolerant, nodes)).allowed).toBe(true);
  });

  it("respects nodeSelector and required node affinity", async () => {
    const nodes = [
      node("a100", { cpu: "64", memory: "512Gi" }, {}, { gpu: "a100", generation: "4" }),
      node("t4", { cpu: "8", memory: "16Gi" }, {}, { gpu: "t4", generation: "2" }),
    ];
    const p = (spec: Record<string, unknown>) => pod({ requests: { memory: "64Gi" } }, spec);
    expect((await run(p({ nodeSelector: { gpu: "t4" } }), nodes)).text).toContain(
      'node "t4", has 16Gi',
    );
    expect((await run(p({ nodeSelector: { gpu: "a100" } }), nodes)).allowed).toBe(true);
    const affinity = (expressions: unknown[], fields: unknown[] = []) => ({
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [{ matchExpressions: expressions, matchFields: fields }],
          },
        },
      },
    });
    expect(
      (await run(p(affinity([{ key: "gpu", operator: "NotIn", values: ["a100"] }])), nodes))
        .allowed,
    ).toBe(false);
    expect(
      (await run(p(affinity([{ key: "generation", operator: "Gt", values: ["3"] }])), nodes))
        .allowed,
    ).toBe(true);
    expect(
      (await run(p(affinity([{ key: "generation", operator: "Lt", values: ["3"] }])), nodes))
        .allowed,
    ).toBe(false);
    expect((await run(p(affinity([{ key: "gpu", operator: "Exists" }])), nodes)).allowed).toBe(
      true,
    );
    expect(
      (await run(p(affinity([{ key: "gpu", operator: "DoesNotExist" }])), nodes)).allowed,
    ).toBe(true); // no candidate: warns
    expect(
      (
        await run(
          p(affinity([], [{ key: "metadata.name", operator: "In", values: ["t4"] }])),
          nodes,
        )
      ).allowed,
    ).toBe(false);
  });

  it("reads only a node's own labels: a selector on a key such as constructor selects no node without it", async () => {
    const nodes = [
      node("big", { cpu: "64", memory: "512Gi" }),
      node("small", { cpu: "4", memory: "4Gi" }),
    ];
    const p = (spec: Record<string, unknown>) => pod({ requests: { memory: "64Gi" } }, spec);
    const exists = {
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [{ matchExpressions: [{ key: "constructor", operator: "Exists" }] }],
          },
        },
      },
    };
    // No node carries the label: no candidate at all, so a warning, not a verdict on "big".
    const byAffinity = await run(p(exists), nodes);
    expect(byAffinity.allowed).toBe(true);
    expect(byAffinity.warnings.join("\n")).toContain("no node is a candidate");
    const bySelector = await run(p({ nodeSelector: { toString: "x" } }), nodes);
    expect(bySelector.warnings.join("\n")).toContain("no node is a candidate");
  });

  it("respects NoSchedule and NoExecute taints against tolerations; PreferNoSchedule does not exclude", async () => {
    const taint = (effect: string) =>
      node(
        "tainted",
        { cpu: "64", memory: "512Gi" },
        { taints: [{ key: "dedicated", value: "ml", effect }] },
      );
    const small = node("small", { cpu: "4", memory: "4Gi" });
    const p = (tolerations?: unknown[]) =>
      pod({ requests: { memory: "64Gi" } }, tolerations ? { tolerations } : {});
    expect((await run(p(), [taint("NoSchedule"), small])).allowed).toBe(false);
    expect((await run(p(), [taint("NoExecute"), small])).allowed).toBe(false);
    expect((await run(p(), [taint("PreferNoSchedule"), small])).allowed).toBe(true);
    const ok = [
      [{ key: "dedicated", operator: "Equal", value: "ml", effect: "NoSchedule" }],
      [{ key: "dedicated", value: "ml" }],
      [{ key: "dedicated", operator: "Exists" }],
      [{ operator: "Exists" }],
    ];
    for (const t of ok) expect((await run(p(t), [taint("NoSchedule"), small])).allowed).toBe(true);
    const wrong = [
      [{ key: "dedicated", value: "web" }],
      [{ key: "dedicated", operator: "Exists", effect: "NoExecute" }],
      [{ key: "other", operator: "Exists" }],
    ];
    for (const t of wrong)
      expect((await run(p(t), [taint("NoSchedule"), small])).allowed).toBe(false);
  });

  it("a pod bound by spec.nodeName is judged on that node only, taints and cordon aside", async () => {
    const nodes = [
      node("big", { cpu: "64", memory: "64Gi" }),
      node("small", { cpu: "4", memory: "4Gi" }, { unschedulable: true }),
    ];
    const bound = await run(pod({ requests: { memory: "8Gi" } }, { nodeName: "small" }), nodes);
    expect(bound.text).toContain(
      'node "small", has 4Gi allocatable memory (1 of 2 nodes are candidates; excluded: 1 by nodeName)',
    );
    expect(
      (await run(pod({ requests: { memory: "8Gi" } }, { nodeName: "big" }), nodes)).allowed,
    ).toBe(true);
  });

  it("warns, never denies, for a resource no node offers (an autoscaler may add one)", async () => {
    const r = await run(pod({ limits: { "nvidia.com/gpu": "1" } }), [
      node("cpu-only", { cpu: "8", memory: "16Gi" }),
    ]);
    expect(r.allowed).toBe(true);
    expect(r.warnings.join("\n")).toContain("no node offers nvidia.com/gpu");
    const offered = [
      node("cpu-only", { cpu: "8", memory: "16Gi" }),
      node("gpu", { cpu: "8", memory: "16Gi", "nvidia.com/gpu": "1" }),
    ];
    const two = await run(pod({ limits: { "nvidia.com/gpu": "2" } }), offered);
    expect(two.text).toContain(
      'nvidia.com/gpu request and limit 2 is more than any schedulable node can allocate: the largest candidate, node "gpu", has 1 allocatable nvidia.com/gpu',
    );
  });

  it("finds a node that has each resource but not all at once", async () => {
    const nodes = [
      node("cpu-heavy", { cpu: "64", memory: "8Gi" }),
      node("mem-heavy", { cpu: "4", memory: "256Gi" }),
    ];
    const r = await run(pod({ requests: { cpu: "16", memory: "32Gi" } }), nodes);
    expect(r.text).toContain(
      'no schedulable node has cpu 16, memory 32Gi at once; the closest, node "cpu-heavy", has only 8Gi memory allocatable',
    );
  });

  it("warns when no node is a candidate at all, and does not judge nodes that report no allocatable", async () => {
    const tainted = node(
      "t",
      { cpu: "1", memory: "1Gi" },
      { taints: [{ key: "x", effect: "NoSchedule" }] },
    );
    const r = await run(pod({ requests: { memory: "8Gi" } }), [tainted]);
    expect(r.allowed).toBe(true);
    expect(r.warnings.join("\n")).toContain(
      "no node is a candidate for its pods (0 of 1 nodes are candidates; excluded: 1 by taints)",
    );
    const unknown: V1Node = { kind: "Node", metadata: { name: "u" }, status: {} };
    expect((await run(pod({ requests: { memory: "8Gi" } }), [unknown])).allowed).toBe(true);
  });

  it("checks a workload's template; for a DaemonSet, every eligible node with its own tolerations", async () => {
    const nodes = [
      node("big", { cpu: "64", memory: "64Gi" }),
      node("small", { cpu: "2", memory: "2Gi" }),
      node("cordoned-small", { cpu: "1", memory: "1Gi" }, { unschedulable: true }),
    ];
    const deploy = await run(
      workload("Deployment", { requests: { memory: "4Gi" } }, { replicas: 3 }),
      nodes,
    );
    expect(deploy.allowed).toBe(true); // fits "big"
    const ds = await run(workload("DaemonSet", { requests: { memory: "1536Mi" } }), nodes);
    expect(ds.allowed).toBe(false);
    expect(ds.text).toContain(
      'DaemonSet mlflow-prod/train: its pod would stay Pending on 1 of 3 eligible nodes, which cannot allocate its requests: node "cordoned-small" (memory: asks 1536Mi, 1Gi allocatable)',
    );
    expect(ds.text).toContain(
      "keep the DaemonSet off those nodes with a nodeSelector or node affinity",
    );
    expect(ds.text).toContain("so the pod asks at most 1Gi memory");
  });

  it("settings: nodeFit=false turns node fit off", async () => {
    const r = await run(
      pod({ requests: { memory: "8Gi" } }),
      [node("small", { cpu: "4", memory: "4Gi" })],
      {
        settings: { resourceQuota: { nodeFit: false } },
      },
    );
    expect(r.allowed).toBe(true);
    expect(r.warnings.join("\n")).not.toContain("node fit");
  });
});

describe("no data is not a violation", () => {
  it("warns that quota and node fit were not checked when the snapshot has no quotas or nodes", async () => {
    const r = await run(seed001Pod(), []);
    expect(r.allowed).toBe(true);
    expect(r.warnings).toEqual([
      expect.stringMatching(
        /^admission-guard\/resource-quota: quota not checked for Pod mlflow-prod\/mlflow-train: the cluster snapshot holds no ResourceQuotas/,
      ),
      expect.stringMatching(
        /^admission-guard\/resource-quota: node fit not checked for Pod mlflow-prod\/mlflow-train: the cluster snapshot holds no Nodes/,
      ),
    ]);
  });

  it("says nothing when the namespace simply has no quota", async () => {
    const elsewhere = { ...computeResources("100"), metadata: { name: "q", namespace: "other" } };
    const r = await run(seed001Pod(), [elsewhere, bigNode]);
    expect(r.allowed).toBe(true);
    expect(r.warnings).toEqual([]);
  });

  it("onUnavailable=deny makes missing data a denial that says what to do", async () => {
    const r = await run(seed001Pod(), [bigNode], {
      settings: { resourceQuota: { onUnavailable: "deny" } },
    });
    expect(r.allowed).toBe(false);
    expect(r.violations.map(v => v.rule)).toEqual(["cluster-data-unavailable"]);
    expect(r.text).toContain("quota cannot be checked");
    expect(r.text).toContain("may list and watch resourcequotas, limitranges and nodes");
  });

  it("enabled=false turns the capability off", async () => {
    const r = await run(seed001Pod(), [computeResources("100"), bigNode], {
      settings: { resourceQuota: { enabled: false } },
    });
    expect(r.violations).toEqual([]);
    expect(r.warnings).toEqual([]);
  });

  it("never throws on malformed objects and cluster data", async () => {
    const junk: unknown[] = [
      {
        kind: "ResourceQuota",
        metadata: { name: "j", namespace: NS },
        spec: "x",
        status: { used: 5 },
      },
      {
        kind: "ResourceQuota",
        metadata: { name: "k", namespace: NS },
        spec: { hard: { "requests.cpu": "lots" }, scopes: "x" },
      },
      {
        kind: "ResourceQuota",
        metadata: { name: "l", namespace: NS },
        spec: { hard: { pods: "1" }, scopeSelector: { matchExpressions: [null, 3] } },
      },
      {
        kind: "LimitRange",
        metadata: { name: "m", namespace: NS },
        spec: { limits: [null, { type: "Container", default: "x" }] },
      },
      {
        kind: "Node",
        metadata: { name: "n" },
        spec: { taints: "x" },
        status: { allocatable: { cpu: "x" } },
      },
      { kind: "Node" },
    ];
    const objects: KubeObject[] = [
      seed001Pod(),
      pod({}, { containers: "x" }),
      pod({}, { affinity: "x", tolerations: [null], nodeSelector: 5 }),
      {
        kind: "Deployment",
        metadata: { name: "d", namespace: NS },
        spec: { replicas: -1, template: { spec: { containers: [{}] } } },
      },
      { kind: "Job", metadata: { name: "j", namespace: NS }, spec: { template: { spec: null } } },
    ];
    for (const obj of objects) {
      const r = await run(obj, junk);
      expect(r.violations.filter(v => v.rule === "internal-error")).toEqual([]);
    }
  });
});
