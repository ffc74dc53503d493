// The conditions that decide a resource-quota verdict, one case each side of the line: which quota
// applies, exact fits against one over, what an UPDATE adds, what a workload of no pods asks, the
// fixes offered, node fit boundaries, a gang's roles, and cluster data that is missing. Cases
// mutation testing (npm run test:mutation) found no test for.
import type { V1ResourceQuota } from "@kubernetes/client-node";
import { resourceQuotaPolicy } from "../../../capabilities/resource-quota";
import { SnapshotCluster, type ClusterView } from "../../../lib/cluster/view";
import { contextFor, review } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import { podTemplateOf } from "../../../lib/workload-kinds/built-in";
import type { Operation, RuleFindings } from "../../../lib/engine/policy";
import { defaultSettings, parseSettings, type SettingsInput } from "../../../lib/settings";
import { formatViolation } from "../../../lib/objects/verdict";
import { kindsInForce } from "../../../lib/workload-kinds/in-force";
import { workloadTargets } from "../../../lib/engine/targets";
import { container, node, resourceQuota, type Res } from "./support";

const NS = "ml";
const pod = (resources: Res, spec: Record<string, unknown> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p", namespace: NS },
  spec: { containers: [container("main", resources)], ...spec },
});
const deployment = (
  resources: Res,
  replicas: number,
  templateSpec: Record<string, unknown> = {},
  kind = "Deployment",
): KubeObject => ({
  apiVersion: "apps/v1",
  kind,
  metadata: { name: "train", namespace: NS },
  spec: {
    replicas,
    selector: { matchLabels: { app: "train" } },
    template: {
      metadata: { labels: { app: "train" } },
      spec: { containers: [container("train", resources)], ...templateSpec },
    },
  },
});
const quota = (
  name: string,
  hard: Record<string, string>,
  used?: Record<string, string>,
  spec: Record<string, unknown> = {},
) => resourceQuota(NS, name, hard, used, spec);
/** A quota of another namespace: the quotas are known, and this namespace has none. */
const elsewhere: V1ResourceQuota = {
  ...quota("q", { pods: "0" }),
  metadata: { name: "q", namespace: "other" },
};
const bigNode = node("big", { cpu: "64", memory: "256Gi", "ephemeral-storage": "500Gi" });

interface RunOptions {
  settings?: SettingsInput;
  operation?: Operation;
  oldObject?: KubeObject;
  cluster?: ClusterView;
}

async function run(obj: KubeObject, objects: unknown[], opts: RunOptions = {}) {
  const r = await review([resourceQuotaPolicy], obj, {
    settings: opts.settings ? parseSettings(opts.settings) : defaultSettings(),
    cluster: opts.cluster ?? new SnapshotCluster(objects as KubeObject[]),
    operation: opts.operation,
    oldObject: opts.oldObject,
  });
  return { ...r, text: r.violations.map(formatViolation).join("\n") };
}

/** The policy's own findings, without the engine (which drops what the stored object already had). */
function check(
  obj: KubeObject,
  objects: unknown[],
  opts: { operation?: Operation; oldObject?: KubeObject; scan?: boolean } = {},
) {
  const ctx = contextFor(obj, {
    settings: defaultSettings(),
    cluster: new SnapshotCluster(objects as KubeObject[]),
    operation: opts.operation,
    oldObject: opts.oldObject,
    scan: opts.scan,
  });
  const template = podTemplateOf(obj)!;
  // The resource-quota checks are synchronous (the cluster view answers from its caches).
  return resourceQuotaPolicy.check!(
    obj,
    { object: obj, template, isTemplate: !!template.path },
    ctx,
  ) as RuleFindings;
}

/** A snapshot that says it is the webhook's live cache. */
const live = (objects: unknown[]): ClusterView =>
  Object.assign(Object.create(new SnapshotCluster(objects as KubeObject[])), {
    source: "live",
  }) as ClusterView;

describe("which quota applies", () => {
  it("lists violations in quota name order, whatever order the cluster holds them in", async () => {
    const r = await run(pod({ requests: { cpu: "8", memory: "16Gi" } }), [
      quota("b-memory", { "requests.memory": "20Gi" }, { "requests.memory": "10Gi" }),
      quota("a-cpu", { "requests.cpu": "10" }, { "requests.cpu": "5" }),
      bigNode,
    ]);
    expect(r.violations.map(v => v.message.match(/quota (\S+) has/)?.[1])).toEqual([
      "a-cpu",
      "b-memory",
    ]);
  });

  it("CrossNamespacePodAffinity: only terms naming namespaces or a namespaceSelector reach across", async () => {
    const crossNs = quota(
      "cross",
      { "requests.cpu": "1" },
      { "requests.cpu": "1" },
      { scopes: ["CrossNamespacePodAffinity"] },
    );
    const withTerm = (kind: string, term: Record<string, unknown>) =>
      pod(
        { requests: { cpu: "100m" } },
        { affinity: { [kind]: { requiredDuringSchedulingIgnoredDuringExecution: [term] } } },
      );
    const term = { topologyKey: "zone", labelSelector: { matchLabels: { app: "db" } } };
    const denied = async (obj: KubeObject) => !(await run(obj, [crossNs, bigNode])).allowed;
    expect(await denied(withTerm("podAntiAffinity", { ...term, namespaces: ["other"] }))).toBe(
      true,
    );
    expect(await denied(withTerm("podAffinity", { ...term, namespaceSelector: {} }))).toBe(true);
    expect(await denied(withTerm("podAntiAffinity", { ...term, namespaces: [] }))).toBe(false);
    expect(await denied(withTerm("podAffinity", term))).toBe(false);
    expect(await denied(withTerm("podAffinity", { ...term, namespaceSelector: null }))).toBe(false);
  });

  it("reads spec.hard when status.hard is empty (a quota the controller has not synced)", async () => {
    const q = quota("q", { "requests.cpu": "10" }, { "requests.cpu": "5" });
    q.status!.hard = {};
    const r = await run(pod({ requests: { cpu: "6" } }), [q, bigNode]);
    expect(r.text).toContain("requests.cpu: pod asks 6, quota q has 5 of 10 left (5 used)");
  });
});

describe("exact fits against one over", () => {
  it("with no usage recorded: exactly hard passes with a warning, one millicore more is denied", async () => {
    const fresh = quota("fresh", { "requests.cpu": "8" });
    const exact = await run(pod({ requests: { cpu: "8" } }), [fresh, bigNode]);
    expect(exact.allowed).toBe(true);
    expect(exact.warnings.join("\n")).toContain(
      "ResourceQuota fresh has no usage recorded yet for requests.cpu",
    );
    const both = quota("both", { "requests.cpu": "8", "requests.memory": "8Gi" });
    expect(
      (await run(pod({ requests: { cpu: "1", memory: "1Gi" } }), [both, bigNode])).warnings.join(),
    ).toContain("no usage recorded yet for requests.cpu, requests.memory (");
    const over = await run(pod({ requests: { cpu: "8001m" } }), [fresh, bigNode]);
    expect(over.allowed).toBe(false);
    expect(over.text).toContain(
      "requests.cpu: pod asks 8001m, more than quota fresh allows at all (hard 8; no usage recorded yet)",
    );
    expect(over.text).toContain(
      `raise the quota (to at least these values): kubectl patch resourcequota fresh -n ml --type merge -p '{"spec":{"hard":{"requests.cpu":"8001m"}}}'`,
    );
  });

  it("node fit: a request of exactly a node's allocatable fits, one Mi more does not", async () => {
    const nodes = [node("n", { cpu: "4", memory: "4Gi" }), elsewhere];
    expect((await run(pod({ requests: { memory: "4Gi" } }), nodes)).allowed).toBe(true);
    const over = await run(pod({ requests: { memory: "4097Mi" } }), nodes);
    expect(over.text).toContain(
      'memory request 4097Mi is more than any schedulable node can allocate: the largest candidate, node "n", has 4Gi allocatable memory (1 of 1 nodes are candidates).',
    );
    // asked as a request only: only the request field is to lower
    expect(over.text).toContain(
      "lower resources.requests.memory so the pod asks at most 4Gi memory",
    );
    expect(over.text).not.toContain("resources.limits.memory");
  });

  it("a limit of exactly a node's allocatable gives no warning, one Mi more warns", async () => {
    const nodes = [node("n", { cpu: "4", memory: "4Gi" }), elsewhere];
    const at = await run(pod({ requests: { memory: "1Gi" }, limits: { memory: "4Gi" } }), nodes);
    expect(at.warnings).toEqual([]);
    const above = await run(
      pod({ requests: { memory: "1Gi" }, limits: { memory: "4097Mi" } }),
      nodes,
    );
    expect(above.allowed).toBe(true);
    expect(above.warnings.join("\n")).toContain(
      'memory limit 4097Mi is more than any candidate node can allocate (largest: node "n", 4Gi)',
    );
  });

  it("asks nothing of nodes when every request is zero, so no candidate is needed", async () => {
    const tainted = node(
      "t",
      { cpu: "1", memory: "1Gi" },
      { taints: [{ key: "x", effect: "NoSchedule" }] },
    );
    expect((await run(pod({ requests: { cpu: "0" } }), [tainted, elsewhere])).warnings).toEqual([]);
    expect(
      (await run(pod({ requests: { cpu: "1m" } }), [tainted, elsewhere])).warnings.join("\n"),
    ).toContain("no node is a candidate");
  });
});

describe("node fit: what is asked and of which nodes", () => {
  it("no limit warning for a pod already denied; memory of nodes that report none is not judged", async () => {
    const nodes = [node("n", { cpu: "4", memory: "4Gi" }), elsewhere];
    const denied = await run(
      pod({ requests: { memory: "5Gi" }, limits: { memory: "6Gi" } }),
      nodes,
    );
    expect(denied.violations.map(v => v.rule)).toEqual(["node-fit"]);
    expect(denied.warnings).toEqual([]);
    const cpuOnly = await run(pod({ requests: { memory: "8Gi" } }), [
      node("c", { cpu: "4" }),
      elsewhere,
    ]);
    expect(cpuOnly.violations).toEqual([]);
    expect(cpuOnly.warnings).toEqual([]);
  });

  it("says 'request and limit' only when every container asking it asks its limit", async () => {
    const nodes = [node("n", { cpu: "4", memory: "4Gi" }), elsewhere];
    const both = (second: Res) =>
      pod(
        {},
        {
          containers: [
            container("a", { requests: { memory: "3Gi" }, limits: { memory: "3Gi" } }),
            container("b", second),
          ],
        },
      );
    const mixed = await run(both({ requests: { memory: "3Gi" } }), nodes);
    expect(mixed.text).toContain("memory request 6Gi is more than any schedulable node");
    expect(mixed.text).toContain("lower resources.requests.memory so the pod asks at most 4Gi");
    const limited = await run(both({ limits: { memory: "3Gi" } }), nodes);
    expect(limited.text).toContain("memory request and limit 6Gi is more than");
    expect(limited.text).toContain(
      "lower resources.requests.memory and resources.limits.memory so the pod asks at most 4Gi",
    );
  });

  it("'request and limit' counts only the containers that ask; pod-level requests have no container limit", async () => {
    const nodes = [node("n", { cpu: "4", memory: "4Gi" }), elsewhere];
    const oneAsks = pod(
      {},
      {
        containers: [
          container("a", { requests: { memory: "6Gi" }, limits: { memory: "6Gi" } }),
          container("b", { requests: { cpu: "100m" } }),
        ],
      },
    );
    expect((await run(oneAsks, nodes)).text).toContain("memory request and limit 6Gi is more than");
    const podLevel = pod({}, { resources: { requests: { memory: "6Gi" } } });
    const r = await run(podLevel, nodes);
    expect(r.text).toContain("memory request 6Gi is more than any schedulable node");
    expect(r.text).not.toContain("request and limit");
  });

  it("a request of exactly the largest node's cpu is no cpu problem: the nodes lack it all at once", async () => {
    const nodes = [
      node("cpu-heavy", { cpu: "4", memory: "2Gi" }),
      node("mem-heavy", { cpu: "2", memory: "8Gi" }),
      elsewhere,
    ];
    const r = await run(pod({ requests: { cpu: "4", memory: "4Gi" } }), nodes);
    expect(r.text).toContain(
      'no schedulable node has cpu 4, memory 4Gi at once; the closest, node "cpu-heavy", has only 2Gi memory allocatable',
    );
    expect(r.text).not.toContain("cpu request 4 is more than");
  });

  it("with nodeFit off, a Pod's node fit is skipped, saying so", async () => {
    const r = await run(pod({ requests: { memory: "8Gi" } }), [node("n", { memory: "1Gi" })], {
      settings: { resourceQuota: { nodeFit: false } },
    });
    expect(r.violations).toEqual([]);
    expect(r.skipped).toContainEqual(
      expect.objectContaining({ rule: "node-fit", reason: "resourceQuota.nodeFit is off" }),
    );
  });
});

describe("what a workload of no pods, or an UPDATE, adds", () => {
  const overUsed = quota("compute", { "requests.cpu": "100" }, { "requests.cpu": "120" });

  it("a Deployment of 0 replicas asks nothing: no quota, no must-specify, no node fit", async () => {
    const none = deployment({}, 0);
    const huge = deployment({ requests: { cpu: "8", memory: "1Ti" } }, 0);
    const small = node("small", { cpu: "4", memory: "4Gi" });
    for (const d of [none, huge]) {
      const r = await run(d, [overUsed, small]);
      expect(r.violations).toEqual([]);
      expect(r.warnings).toEqual([]);
    }
    // one replica of the same is judged on both
    const one = await run(deployment({ requests: { cpu: "8", memory: "1Ti" } }, 1), [
      overUsed,
      small,
    ]);
    expect(one.violations.map(v => v.rule)).toEqual(["quota-exceeded", "node-fit"]);
  });

  it("an UPDATE that changes the template but not the total asks nothing more, even of an over-used quota", async () => {
    const old = deployment({ requests: { cpu: "2" } }, 4);
    const reshaped = deployment({ requests: { cpu: "4" } }, 2);
    expect(
      (await run(reshaped, [overUsed, bigNode], { operation: "UPDATE", oldObject: old }))
        .violations,
    ).toEqual([]);
    const bigger = await run(deployment({ requests: { cpu: "4" } }, 3), [overUsed, bigNode], {
      operation: "UPDATE",
      oldObject: old,
    });
    expect(bigger.text).toContain(
      "requests.cpu: the update adds 4 (3 replicas × 4, was 4 × 2), quota compute has 0 of 100 left (120 used)",
    );
  });

  it("on UPDATE the fix counts the stored object's own usage as room", async () => {
    const old = deployment({ requests: { cpu: "4" } }, 3);
    const fourLeft = quota("compute", { "requests.cpu": "100" }, { "requests.cpu": "96" });
    const r = await run(deployment({ requests: { cpu: "4" } }, 5), [fourLeft, bigNode], {
      operation: "UPDATE",
      oldObject: old,
    });
    // room: 4 left + 3 × 4 of its own = 16, over 5 replicas
    expect(r.text).toContain("lower each pod's requests.cpu to at most 3200m");
    expect(r.text).toContain("lower spec.replicas from 5 to at most 4");
    expect(r.text).toContain(`'{"spec":{"hard":{"requests.cpu":"104"}}}'`);
  });

  it("an UPDATE with the same template: more replicas are judged, as many or fewer are not", () => {
    const tracks = quota("compute", { "requests.cpu": "100" }, { "requests.cpu": "0" });
    const old = deployment({}, 3);
    const rules = (replicas: number) =>
      check(deployment({}, replicas), [tracks, bigNode], {
        operation: "UPDATE",
        oldObject: old,
      }).violations.map(v => v.rule);
    expect(rules(4)).toEqual(["quota-must-specify"]);
    expect(rules(3)).toEqual([]);
    expect(rules(2)).toEqual([]);
  });

  it.each([
    ["nodeSelector", { nodeSelector: { pool: "a" } }],
    ["affinity", { affinity: { podAntiAffinity: {} } }],
    ["tolerations", { tolerations: [{ key: "gpu", operator: "Exists" }] }],
    ["priorityClassName", { priorityClassName: "high" }],
    ["activeDeadlineSeconds", { activeDeadlineSeconds: 600 }],
  ])("an UPDATE of the template's %s makes new pods, judged again", async (_field, change) => {
    const tracks = quota("compute", { "requests.cpu": "100" }, { "requests.cpu": "0" });
    const old = deployment({}, 3);
    const r = await run(deployment({}, 3, change), [tracks, bigNode], {
      operation: "UPDATE",
      oldObject: old,
    });
    expect(r.violations.map(v => v.rule)).toEqual(["quota-must-specify"]);
    const relabelled = deployment({}, 3);
    (relabelled.spec as { template: { metadata: object } }).template.metadata = {
      labels: { app: "train", team: "ml" },
    };
    const same = await run(relabelled, [tracks, bigNode], { operation: "UPDATE", oldObject: old });
    expect(same.violations).toEqual([]);
  });

  it("an UPDATE of a Pod is not judged; of a stored object of another kind, judged as a creation", () => {
    const full = quota("compute", { "requests.cpu": "100" }, { "requests.cpu": "100" });
    const p = pod({ requests: { cpu: "1" } });
    expect(check(p, [full, bigNode], { operation: "UPDATE", oldObject: p }).violations).toEqual([]);
    const d = deployment({ requests: { cpu: "1" } }, 1);
    const other = deployment({ requests: { cpu: "1" } }, 1, {}, "StatefulSet");
    expect(
      check(d, [full, bigNode], { operation: "UPDATE", oldObject: other }).violations.map(
        v => v.rule,
      ),
    ).toEqual(["quota-exceeded"]);
  });
});

describe("an UPDATE whose stored version lacks something", () => {
  const memQuota = quota("mem", { "requests.memory": "10Gi" }, { "requests.memory": "9Gi" });

  it("a stored Deployment without a template: the update is judged as a creation", () => {
    const stored: KubeObject = { ...deployment({}, 1), spec: { replicas: 1 } };
    const r = check(deployment({ requests: { memory: "2Gi" } }, 1), [memQuota, bigNode], {
      operation: "UPDATE",
      oldObject: stored,
    });
    expect(r.violations.map(v => v.message)).toEqual([
      "Deployment ml/train exceeds the namespace quota: requests.memory: Deployment asks 2Gi (1 replicas × 2Gi), quota mem has 1Gi of 10Gi left (9Gi used)",
    ]);
  });

  it("a stored template that asked none of a resource: the whole new request is added", () => {
    const r = check(deployment({ requests: { cpu: "1", memory: "1Gi" } }, 2), [memQuota, bigNode], {
      operation: "UPDATE",
      oldObject: deployment({ requests: { cpu: "1" } }, 2),
    });
    expect(r.violations.map(v => v.message)).toEqual([
      expect.stringContaining("requests.memory: the update adds 2Gi (2 replicas × 1Gi, was 2 × 0)"),
    ]);
  });

  it("a DaemonSet update (no pod count): a new template is judged for node fit, new labels are not", () => {
    const small = node("small", { cpu: "2", memory: "2Gi" });
    const old = deployment({ requests: { cpu: "1" } }, 1, {}, "DaemonSet");
    const bigger = deployment({ requests: { cpu: "4" } }, 1, {}, "DaemonSet");
    expect(
      check(bigger, [small], { operation: "UPDATE", oldObject: old }).violations.map(v => v.rule),
    ).toEqual(["node-fit"]);
    const tooBig = deployment({ requests: { cpu: "4" } }, 1, {}, "DaemonSet");
    const relabelled = structuredClone(tooBig);
    (relabelled.metadata as { labels?: object }).labels = { team: "ml" };
    expect(check(relabelled, [small], { operation: "UPDATE", oldObject: tooBig })).toEqual({
      changes: [],
      violations: [],
      warnings: [],
    });
  });
});

describe("the fixes a quota violation offers", () => {
  it("offers as many replicas as every short resource allows, and lowers each per-pod value", async () => {
    const q = quota(
      "compute",
      { "requests.cpu": "10", "requests.memory": "10Gi" },
      { "requests.cpu": "9", "requests.memory": "8Gi" },
    );
    const r = await run(deployment({ requests: { cpu: "1", memory: "1Gi" } }, 4), [q, bigNode]);
    expect(r.text).toContain("Deployment asks 4 (4 replicas × 1), quota compute has 1 of 10 left");
    expect(r.text).toContain(
      `lower each pod's requests.cpu to at most 250m (container "train" (spec.template.spec.containers[0]) asks 1) and requests.memory to at most 512Mi (`,
    );
    // cpu leaves room for 1 replica, memory for 2: the fewest decide
    expect(r.text).toContain("lower spec.replicas from 4 to at most 1");
  });

  it("offers no replica count when not one replica fits, and no lower value when nothing is left", async () => {
    const threeLeft = quota("compute", { "requests.cpu": "10" }, { "requests.cpu": "7" });
    const r = await run(deployment({ requests: { cpu: "4" } }, 3), [threeLeft, bigNode]);
    expect(r.text).toContain("lower each pod's requests.cpu to at most 1 (");
    expect(r.text).not.toContain("lower spec.replicas");
    const full = quota("compute", { "requests.cpu": "10" }, { "requests.cpu": "12" });
    const none = await run(deployment({ requests: { cpu: "4" } }, 3), [full, bigNode]);
    expect(none.text).not.toContain("lower each pod's");
    expect(none.text).not.toContain("lower spec.replicas");
    expect(none.text).toContain(`'{"spec":{"hard":{"requests.cpu":"24"}}}'`);
  });

  it("a request of 0 against an over-used quota is denied as the plugin does, with no replica count", async () => {
    const overUsed = quota("compute", { "requests.cpu": "100" }, { "requests.cpu": "120" });
    const r = await run(deployment({ requests: { cpu: "0" } }, 2), [overUsed, bigNode]);
    expect(r.violations.map(v => v.rule)).toEqual(["quota-exceeded"]);
    expect(r.text).toContain(
      "requests.cpu: Deployment asks 0 (2 replicas × 0), quota compute has 0 of 100 left (120 used)",
    );
    expect(r.text).not.toContain("lower spec.replicas");
  });

  it("a pod-count quota: the replicas that fit and pods to delete, no per-pod value", async () => {
    const q = quota("pods", { pods: "10" }, { pods: "8" });
    const r = await run(deployment({ requests: { cpu: "1" } }, 3), [q, bigNode]);
    expect(r.text).toContain(
      "pods: Deployment asks 3 (3 replicas × 1), quota pods has 2 of 10 left (8 used)",
    );
    expect(r.text).toContain("lower spec.replicas from 3 to at most 2");
    expect(r.text).toContain("delete pods namespace ml no longer needs");
    expect(r.text).not.toContain("lower each pod's");
  });

  it("must-specify suggests a limits.cpu default of 1 and a requests.memory default of 256Mi", async () => {
    const q = quota(
      "compute",
      { "limits.cpu": "10", "requests.memory": "10Gi" },
      { "limits.cpu": "0", "requests.memory": "0" },
    );
    const r = await run(pod({}), [q, bigNode]);
    expect(r.violations.map(v => v.rule)).toEqual(["quota-must-specify"]);
    const limitRange = JSON.parse(r.text.split("<<< '")[1].split("'")[0]);
    expect(limitRange.spec.limits[0]).toEqual({
      type: "Container",
      defaultRequest: { memory: "256Mi" },
      default: { cpu: "1" },
    });
    expect(r.text).toContain('container "main" (spec.containers[0]) sets no resources.limits.cpu');
  });
});

describe("node fit: candidates and the nodes named", () => {
  it("counts the excluded nodes by reason, in the order of their first node", async () => {
    const taint = { taints: [{ key: "dedicated", value: "x", effect: "NoSchedule" }] };
    const nodes = [
      node("t1", { cpu: "64", memory: "64Gi" }, taint, { pool: "a" }),
      node("other-pool", { cpu: "64", memory: "64Gi" }, {}, { pool: "b" }),
      node("t2", { cpu: "64", memory: "64Gi" }, taint, { pool: "a" }),
      node("small", { cpu: "4", memory: "4Gi" }, {}, { pool: "a" }),
    ];
    const r = await run(
      pod({ requests: { memory: "8Gi" } }, { nodeSelector: { pool: "a" } }),
      nodes,
    );
    expect(r.text).toContain(
      "(1 of 4 nodes are candidates; excluded: 2 by taints, 1 by nodeSelector/affinity)",
    );
  });

  it("the closest node is the one short of the fewest resources", async () => {
    const nodes = [
      node("tiny", { cpu: "2", memory: "2Gi" }),
      node("mem-heavy", { cpu: "4", memory: "256Gi" }),
      node("cpu-heavy", { cpu: "64", memory: "8Gi" }),
    ];
    const r = await run(pod({ requests: { cpu: "16", memory: "32Gi" } }), nodes);
    expect(r.text).toContain('the closest, node "mem-heavy", has only 4 cpu allocatable');
  });

  it("a request only tainted nodes can hold: no value to lower to; their taints to tolerate, or a larger node", async () => {
    const nodes = [
      node(
        "gpu",
        { cpu: "8", memory: "16Gi", "nvidia.com/gpu": "4" },
        { taints: [{ key: "gpu", effect: "NoSchedule" }] },
      ),
      node("cpu", { cpu: "8", memory: "16Gi" }),
    ];
    const r = await run(pod({ limits: { "nvidia.com/gpu": "1" } }), nodes);
    expect(r.text).toContain('the largest candidate, node "cpu", has 0 allocatable nvidia.com/gpu');
    expect(r.text).toContain(
      'Fix: tolerate the taints of node "gpu", which offers nvidia.com/gpu: gpu:NoSchedule (spec.tolerations); ' +
        "or add a node with more allocatable resources (or let the pod's nodeSelector/tolerations reach a larger one)",
    );
    // a node offering 0 of it offers none: a warning, not a verdict
    const zero = await run(pod({ limits: { "nvidia.com/gpu": "1" } }), [
      node("z", { cpu: "8", "nvidia.com/gpu": "0" }),
    ]);
    expect(zero.allowed).toBe(true);
    expect(zero.warnings.join("\n")).toContain("no node offers nvidia.com/gpu");
  });

  it("a DaemonSet with hostNetwork tolerates network-unavailable nodes; without it, they are excluded", async () => {
    const nodes = [
      node(
        "net",
        { cpu: "1", memory: "1Gi" },
        {
          taints: [{ key: "node.kubernetes.io/network-unavailable", effect: "NoSchedule" }],
        },
      ),
    ];
    const ds = (hostNetwork: boolean) =>
      deployment(
        { requests: { memory: "2Gi" } },
        1,
        hostNetwork ? { hostNetwork } : {},
        "DaemonSet",
      );
    const onHost = await run(ds(true), nodes);
    expect(onHost.text).toContain("its pod would stay Pending on 1 of 1 eligible nodes");
    const off = await run(ds(false), nodes);
    expect(off.allowed).toBe(true);
    expect(off.warnings.join("\n")).toContain("no node is a candidate");
    // a Deployment gets none of the DaemonSet's tolerations
    const cordonTaint = node(
      "c",
      { cpu: "1", memory: "1Gi" },
      {
        taints: [{ key: "node.kubernetes.io/unschedulable", effect: "NoSchedule" }],
      },
    );
    expect(
      (await run(deployment({ requests: { memory: "2Gi" } }, 1), [cordonTaint])).warnings.join(
        "\n",
      ),
    ).toContain("no node is a candidate");
  });

  it("a DaemonSet on many small nodes names the first five, counts the rest, lowers to the smallest", async () => {
    const sizes = ["3Gi", "2Gi", "5Gi", "1Gi", "3Gi", "2Gi", "6Gi"];
    const nodes = sizes.map((m, i) => node(`n${i}`, { cpu: "8", memory: m }));
    const r = await run(deployment({ requests: { memory: "4Gi" } }, 1, {}, "DaemonSet"), [
      ...nodes,
      bigNode,
    ]);
    expect(r.text).toContain(
      'its pod would stay Pending on 5 of 8 eligible nodes, which cannot allocate its requests: node "n0" (memory: asks 4Gi, 3Gi allocatable), node "n1"',
    );
    expect(r.text).not.toContain("and 0 more");
    const r2 = await run(
      deployment({ requests: { cpu: "1", memory: "7Gi" } }, 1, {}, "DaemonSet"),
      [...nodes, bigNode],
    );
    expect(r2.text).toContain("on 7 of 8 eligible nodes");
    expect(r2.text).toContain("and 2 more");
    expect(r2.text).toContain("so the pod asks at most 1Gi memory");
    expect(r2.text).not.toContain("at most 1 cpu"); // cpu fits every node: nothing to lower
  });
});

describe("a gang's roles through the policy", () => {
  const job = (
    workerMemory: string,
    workers: number,
    extra: Record<string, unknown> = {},
  ): KubeObject => ({
    apiVersion: "kubeflow.org/v1",
    kind: "PyTorchJob",
    metadata: { name: "llama", namespace: NS, ...extra },
    spec: {
      pytorchReplicaSpecs: {
        Master: {
          replicas: 1,
          template: {
            spec: { containers: [container("m", { requests: { cpu: "1", memory: "1Gi" } })] },
          },
        },
        Worker: {
          replicas: workers,
          template: {
            spec: {
              containers: [container("w", { requests: { cpu: "1", memory: workerMemory } })],
            },
          },
        },
      },
    },
  });
  const small = node("small", { cpu: "8", memory: "8Gi" });

  it("judges each role's pod for node fit, naming the role; a role of no pods is not judged", async () => {
    const r = await run(job("16Gi", 2), [small]);
    expect(r.violations.map(v => v.rule)).toEqual(["node-fit"]);
    expect(r.text).toContain("PyTorchJob ml/llama (role Worker) fits no node");
    expect((await run(job("16Gi", 0), [small])).violations).toEqual([]);
  });

  it("with nodeFit off the roles are skipped, saying so", async () => {
    const r = await run(job("16Gi", 2), [small], {
      settings: { resourceQuota: { nodeFit: false } },
    });
    expect(r.violations).toEqual([]);
    expect(r.skipped).toContainEqual(
      expect.objectContaining({ rule: "node-fit", reason: "resourceQuota.nodeFit is off" }),
    );
  });

  it("without nodes, onUnavailable=deny denies each role's node fit; without quotas the gang's quota warns", async () => {
    const q = quota("compute", { "requests.cpu": "100" }, { "requests.cpu": "0" });
    const r = await run(job("1Gi", 2), [q], {
      settings: { resourceQuota: { onUnavailable: "deny" } },
    });
    expect(r.violations.map(v => v.message)).toContain(
      "PyTorchJob ml/llama (role Worker): node fit cannot be checked: the cluster snapshot holds no Nodes (give check --cluster the output of kubectl get resourcequota,limitrange -A -o yaml and kubectl get nodes -o yaml)",
    );
    const noQuota = await run(job("1Gi", 2), [small]);
    expect(noQuota.warnings.join("\n")).toContain("quota not checked for PyTorchJob ml/llama");
  });

  it("denies the whole gang over quota, and reports a role's bad quantity instead of guessing", async () => {
    const q = quota("compute", { "requests.memory": "10Gi" }, { "requests.memory": "0" });
    const r = await run(job("8Gi", 2), [q, bigNode]);
    expect(r.violations.map(v => v.rule)).toEqual(["quota-exceeded"]);
    expect(r.text).toContain("PyTorchJob ml/llama exceeds the namespace quota as a whole");
    // the Master alone would exceed this quota: a gang whose roles do not parse is not judged on it
    const tight = quota("compute", { "requests.memory": "1Gi" }, { "requests.memory": "512Mi" });
    const bad = await run(job("lots", 2), [tight, bigNode]);
    expect(bad.violations.map(v => v.rule)).toEqual(["invalid-quantity"]);
    expect(bad.text).toContain(
      "PyTorchJob ml/llama (role Worker) has resource values that are not Kubernetes quantities",
    );
  });
});

describe("a gang's quota: queued, updated, scanned", () => {
  const job = (workers: number, metadata: Record<string, unknown> = {}, spec = {}): KubeObject => ({
    apiVersion: "kubeflow.org/v1",
    kind: "PyTorchJob",
    metadata: { name: "llama", namespace: NS, ...metadata },
    spec: {
      ...spec,
      pytorchReplicaSpecs: {
        Worker: {
          replicas: workers,
          template: { spec: { containers: [container("w", { requests: { memory: "8Gi" } })] } },
        },
      },
    },
  });
  // 24Gi used: the stored job's 3 workers
  const q = quota("compute", { "requests.memory": "32Gi" }, { "requests.memory": "24Gi" });
  const gang = (obj: KubeObject, opts: { oldObject?: KubeObject; scan?: boolean } = {}) => {
    const settings = defaultSettings();
    const ctx = contextFor(obj, {
      settings,
      cluster: new SnapshotCluster([q, bigNode] as KubeObject[]),
      operation: opts.oldObject ? "UPDATE" : "CREATE",
      oldObject: opts.oldObject,
      scan: opts.scan,
    });
    return resourceQuotaPolicy.checkGang!(
      obj,
      workloadTargets(obj, kindsInForce(settings.workloads)),
      ctx,
    ) as RuleFindings;
  };

  it("a gang Kueue holds back (queue label, or suspended) only warns", async () => {
    expect(gang(job(3)).violations.map(v => v.rule)).toEqual(["quota-exceeded"]);
    const queued = gang(job(3, { labels: { "kueue.x-k8s.io/queue-name": "team-a" } }));
    expect(queued.violations).toEqual([
      expect.objectContaining({ rule: "quota-exceeded", severity: "warn" }),
    ]);
    expect(queued.violations[0].message).toContain(
      "it is queued by Kueue (kueue.x-k8s.io/queue-name=team-a)",
    );
    const suspended = gang(job(3, {}, { runPolicy: { suspend: true } }));
    expect(suspended.violations).toEqual([
      expect.objectContaining({ rule: "quota-exceeded", severity: "warn" }),
    ]);
    expect(suspended.violations[0].message).toContain(
      "it is suspended (spec.runPolicy.suspend: true)",
    );
  });

  it("on UPDATE only what the gang adds counts; a scan counts nothing again", () => {
    expect(gang(job(3), { oldObject: job(3) }).violations).toEqual([]);
    expect(gang(job(4), { oldObject: job(3) }).violations).toEqual([]); // adds 8Gi, 8Gi left
    expect(gang(job(5), { oldObject: job(3) }).violations.map(v => v.rule)).toEqual([
      "quota-exceeded",
    ]);
    const scanned = gang(job(3), { scan: true });
    expect(scanned.violations).toEqual([]);
    expect(scanned.skipped?.map(s => s.rule)).toEqual(["quota-exceeded", "quota-must-specify"]);
  });
});

describe("cluster data unavailable, and objects already stored", () => {
  it("onUnavailable=deny: missing nodes deny node fit, saying what to do", async () => {
    const q = quota("compute", { "requests.cpu": "100" }, { "requests.cpu": "0" });
    const r = await run(pod({ requests: { cpu: "1" } }), [q], {
      settings: { resourceQuota: { onUnavailable: "deny" } },
    });
    expect(r.violations).toEqual([
      expect.objectContaining({
        rule: "cluster-data-unavailable",
        message:
          "Pod ml/p: node fit cannot be checked: the cluster snapshot holds no Nodes (give check --cluster the output of kubectl get resourcequota,limitrange -A -o yaml and kubectl get nodes -o yaml)",
        fix: expect.stringContaining("or set resourceQuota.onUnavailable=allow"),
      }),
    ]);
  });

  it("in the webhook, says the cache has not synced", async () => {
    const r = await run(pod({ requests: { cpu: "1" } }), [], { cluster: live([]) });
    expect(r.allowed).toBe(true);
    expect(r.warnings).toEqual([
      "admission-guard/resource-quota: quota not checked for Pod ml/p: the controller's cache of ResourceQuotas has not synced yet (starting up, or the API server is unreachable)",
      "admission-guard/resource-quota: node fit not checked for Pod ml/p: the controller's cache of Nodes has not synced yet (starting up, or the API server is unreachable)",
    ]);
  });

  it("a DaemonSet (no pod count) is still judged for node fit", async () => {
    const r = await run(deployment({ requests: { cpu: "1" } }, 1, {}, "DaemonSet"), []);
    expect(r.warnings.join("\n")).toContain("node fit not checked for DaemonSet ml/train");
    expect(r.warnings.join("\n")).not.toContain("quota not checked");
  });

  it("a report scan counts no quota again and leaves a placed pod's node alone, but judges a workload's", () => {
    const full = quota("compute", { "requests.cpu": "100" }, { "requests.cpu": "200" });
    const small = node("small", { cpu: "1", memory: "1Gi" });
    const placed = check(pod({ requests: { cpu: "8" } }, { nodeName: "small" }), [full, small], {
      scan: true,
    });
    expect(placed.violations).toEqual([]);
    expect(placed.skipped).toEqual([
      {
        rule: "quota-exceeded",
        reason: "a stored object is counted in its namespace's quota usage already",
      },
      {
        rule: "quota-must-specify",
        reason: "a stored object is counted in its namespace's quota usage already",
      },
      { rule: "node-fit", reason: "placed by the scheduler on node small" },
    ]);
    const stored = check(deployment({ requests: { cpu: "8" } }, 2), [full, small], { scan: true });
    expect(stored.violations.map(v => v.rule)).toEqual(["node-fit"]);
    expect(stored.skipped?.map(s => s.rule)).toEqual(["quota-exceeded", "quota-must-specify"]);
    // a DaemonSet has no pods of its own in a quota: nothing to skip, its node fit judged
    const ds = check(deployment({ requests: { cpu: "8" } }, 1, {}, "DaemonSet"), [full, small], {
      scan: true,
    });
    expect(ds.skipped).toBeUndefined();
    expect(ds.violations.map(v => v.rule)).toEqual(["node-fit"]);
    // not a scan: nothing skipped, and a pod with a nodeName is judged on that node
    expect(check(pod({ requests: { cpu: "8" } }), [full, bigNode]).skipped).toBeUndefined();
    expect(
      check(pod({ requests: { cpu: "8" } }, { nodeName: "small" }), [full, small]).violations.map(
        v => v.rule,
      ),
    ).toEqual(["quota-exceeded", "node-fit"]);
  });
});
