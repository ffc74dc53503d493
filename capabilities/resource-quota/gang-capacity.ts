// Whole-gang capacity: whether the schedulable nodes could hold every pod of a gang at once, from
// necessary conditions only. Pure. Why: docs/adr/0008-gang-capacity-never-a-false-denial.md
import type { V1Node, V1PodSpec, V1Toleration } from "@kubernetes/client-node";
import { describeObject, isPod, type KubeObject, type PodTemplateRef } from "../../lib/objects/pod";
import type { PodTarget, RuleContext, RuleFindings, RuleViolation } from "../../lib/engine/policy";
import { noFindings } from "../../lib/engine/policy";
import { formatQuantity } from "../../lib/objects/quantity";
import { isRecord } from "../../lib/objects/record";
import { formatNote } from "../../lib/objects/verdict";
import { groupOf } from "../../lib/workload-kinds/kind-spec";
import { show } from "./explain";
import {
  list,
  namesOf,
  nodeClasses,
  nodeIdentityMatters,
  singleNodeClasses,
  type NodeClass,
} from "./node-classes";
import { allocatableOf, isScheduledResource, REPORTED_BY_EVERY_NODE } from "./node-resources";
import { CAPABILITY } from "./quota";
import {
  limitRangeDefaults,
  podResources,
  type LimitRangeDefaults,
  type PodResources,
} from "./resources";
import { exclusion, type Exclusion } from "./scheduler-filters";

export const RULE = "gang-capacity";

/** One role's share of the gang as the user wrote it: what a message names and a fix lowers. */
export interface GangPart {
  name: string;
  /** Pods of it the gang holds at most at once. */
  pods: number;
  /** Pods of it the gang needs at least (Volcano's task minAvailable); `pods` for a full gang. */
  min: number;
  /** The field that sets `pods` ("spec.pytorchReplicaSpecs.Worker.replicas"); "" when none. */
  field: string;
  /** The field's value is pods + offset (a LeaderWorkerSet's size counts its leader too). */
  offset?: number;
  /** The template's path: what an UPDATE compares with. */
  path: string;
}

/** Roles alike (the same template) are one role with several parts. */
export interface CapacityRole {
  spec: V1PodSpec;
  pod: PodResources;
  parts: GangPart[];
}

export interface CapacityDemand {
  /** "PyTorchJob ml/llama". */
  subject: string;
  roles: CapacityRole[];
  /** Pods that must run at once: all of them for a full gang, Volcano's spec.minAvailable. */
  needs: number;
  /** The field that sets `needs` when it is not the roles' sum ("spec.minAvailable"). */
  needsField?: string;
  /** Why these pods run at once, for the message ("its pods start together"). */
  why: string;
  /** Set when the finding is a warning only, and why. */
  warnOnly?: string;
}

/** Distinct roles judged together at most; more, and the gang is not checked (said). */
export const MAX_ROLES = 64;
/** Roles × node classes at most (a pass over them per test; nodes judged one by one are a class each, ~10 µs a cell). */
export const MAX_CELLS = 5_000;
/** Sets of roles up to this many roles are each tested (2^6 − 1 sets); beyond, each and all. */
const ALL_SETS_UP_TO = 6;
/** Every set of roles is tested only while sets × classes stay within this (nodes one by one are many classes). */
const ALL_SETS_CELLS = 50_000;
const SHOWN = 3;

interface RoleFacts {
  role: CapacityRole;
  asks: Map<string, bigint>;
  min: bigint;
  max: bigint;
  /** Per class: its pods a node of the class holds at most (undefined: unbounded), or null: not a candidate. */
  k: (bigint | undefined | null)[];
  /** Per class: the resource that bounds k ("pods" for the pod count). */
  by: (string | undefined)[];
}

interface Constraint {
  members: number[];
  /** "pods" (a pod count), or the resource totalled. */
  dim: string;
  /** Per role: what one pod adds to the left side (0 for roles not in it). */
  coef: bigint[];
  cap: bigint;
  nodes: number;
  /** Per class that takes some: nodes, what one holds. */
  classes: { cls: NodeClass; count: number; per: bigint; by?: string }[];
}

const podsAllocatable = (cls: NodeClass): bigint | undefined => {
  const q = cls.node.allocatable.get("pods");
  return q ? q.milli / 1000n : undefined;
};
const minOf = (a: bigint | undefined, b: bigint | undefined) =>
  a === undefined ? b : b === undefined ? a : a < b ? a : b;
const sum = (xs: number[]) => xs.reduce((s, x) => s + x, 0);

export interface CapacityResult {
  violations: RuleViolation[];
  warnings: string[];
}

/** Judges the gang against the nodes: a violation when no placement can hold `needs` pods at once. */
export function checkGangCapacity(nodes: V1Node[], demand: CapacityDemand): CapacityResult {
  const result: CapacityResult = { violations: [], warnings: [] };
  const roles = demand.roles.filter(r => sum(r.parts.map(p => p.pods)) > 0);
  if (!roles.length || demand.needs <= 1) return result;
  if (roles.length > MAX_ROLES) {
    result.warnings.push(
      formatNote(
        CAPABILITY,
        `${demand.subject}: whole-gang capacity not checked: ${roles.length} distinct roles (at most ${MAX_ROLES} are judged together)`,
      ),
    );
    return result;
  }
  // One partition for all roles: by class, unless a role tells nodes apart by name.
  const byName = roles.some(r => namesOf(r.spec) || nodeIdentityMatters(r.spec));
  const { classes, total } = byName ? singleNodeClasses(nodes) : nodeClasses(nodes);
  if (roles.length * classes.length > MAX_CELLS) {
    result.warnings.push(
      formatNote(
        CAPABILITY,
        `${demand.subject}: whole-gang capacity not checked: ${roles.length} role${roles.length === 1 ? "" : "s"} × ${classes.length} node classes is more than ${MAX_CELLS} to judge per request`,
      ),
    );
    return result;
  }
  const offered = new Set<string>();
  for (const c of classes)
    for (const [r, q] of c.node.allocatable) if (q.milli > 0n) offered.add(r);

  const facts: RoleFacts[] = [];
  for (const role of roles) {
    // By name: messages must not depend on the order a manifest (or the API server) gives.
    const asks = new Map<string, bigint>();
    for (const [r, q] of [...role.pod.requests].sort(([a], [b]) => (a < b ? -1 : 1)))
      if (q.milli > 0n && isScheduledResource(r)) asks.set(r, q.milli);
    // A resource no node offers: node fit warns (an autoscaler may add such nodes), so do we not judge.
    for (const r of asks.keys())
      if (!REPORTED_BY_EVERY_NODE.includes(r) && !offered.has(r)) return result;
    const tolerations = list<V1Toleration>(role.spec.tolerations);
    const k: RoleFacts["k"] = [];
    const by: RoleFacts["by"] = [];
    for (const c of classes) {
      if (exclusion(role.spec, c.node.node, tolerations)) {
        k.push(null);
        by.push(undefined);
        continue;
      }
      let most = podsAllocatable(c);
      let limit = most === undefined ? undefined : "pods";
      for (const [r, req] of asks) {
        const have = allocatableOf(c.node, r);
        if (have === undefined) continue;
        const n = have / req;
        if (most === undefined || n < most) [most, limit] = [n, r];
      }
      k.push(most);
      by.push(limit);
    }
    // No candidate (node fit warns) or none its pod fits (node fit denies): nothing more to say.
    if (!k.some(n => n !== null && n !== 0n)) return result;
    const max = sum(role.parts.map(p => p.pods));
    const min = Math.min(max, sum(role.parts.map(p => p.min)));
    facts.push({ role, asks, min: BigInt(min), max: BigInt(max), k, by });
  }

  const constraints = constraintsOf(facts, classes);
  const needs = BigInt(demand.needs);
  const failing = firstFailing(constraints, facts, needs);
  if (!failing) return result;
  result.violations.push(violationOf(demand, facts, constraints, failing, classes, total));
  return result;
}

/** The sets of roles tested: every set of a few roles; for more, each role and all of them. */
function roleSets(n: number, classes: number): number[][] {
  const sets: number[][] = [];
  if (n <= ALL_SETS_UP_TO && ((1 << n) - 1) * classes <= ALL_SETS_CELLS) {
    for (let mask = 1; mask < 1 << n; mask++)
      sets.push([...Array(n).keys()].filter(i => mask & (1 << i)));
    // Smallest first: a message about one role is the clearest.
    return sets.sort((a, b) => a.length - b.length);
  }
  for (let i = 0; i < n; i++) sets.push([i]);
  sets.push([...Array(n).keys()]);
  return sets;
}

function constraintsOf(facts: RoleFacts[], classes: NodeClass[]): Constraint[] {
  const out: Constraint[] = [];
  for (const members of roleSets(facts.length, classes.length)) {
    const resources = new Set<string>(["pods"]);
    if (members.length > 1)
      for (const i of members) for (const r of facts[i].asks.keys()) resources.add(r);
    for (const dim of resources) {
      const c = constraintFor(facts, classes, members, dim);
      if (c) out.push(c);
    }
  }
  return out;
}

/** One test: at most `cap` of `dim` for the roles' pods on the nodes they may use; undefined when unbounded. */
function constraintFor(
  facts: RoleFacts[],
  classes: NodeClass[],
  members: number[],
  dim: string,
): Constraint | undefined {
  const coef = facts.map((f, i) =>
    !members.includes(i) ? 0n : dim === "pods" ? 1n : (f.asks.get(dim) ?? 0n),
  );
  if (!coef.some(c => c > 0n)) return undefined;
  let cap = 0n;
  let nodes = 0;
  const taking: Constraint["classes"] = [];
  for (const [ci, cls] of classes.entries()) {
    const here = members.filter(i => facts[i].k[ci] !== null && facts[i].k[ci] !== 0n);
    if (!here.length) continue;
    const count = cls.names.length;
    nodes += count;
    let per: bigint | undefined;
    let by: string | undefined;
    if (here.length === 1) {
      const f = facts[here[0]];
      const k = f.k[ci] as bigint | undefined;
      per = coef[here[0]] === 0n ? 0n : k === undefined ? undefined : k * coef[here[0]];
      by = f.by[ci];
    } else {
      // Pods of several roles on one node: no more than the smallest request of a resource they
      // all ask allows, nor than each role's own most together.
      let pods = podsAllocatable(cls);
      by = pods === undefined ? undefined : "pods";
      let each: bigint | undefined = 0n;
      for (const i of here) {
        const k = facts[i].k[ci] as bigint | undefined;
        each = each === undefined || k === undefined ? undefined : each + k;
      }
      for (const [r] of facts[here[0]].asks) {
        const reqs = here.map(i => facts[i].asks.get(r));
        if (reqs.some(q => q === undefined)) continue;
        const have = allocatableOf(cls.node, r);
        if (have === undefined) continue;
        const smallest = reqs.reduce((m, q) => (q! < m! ? q : m))!;
        const n = have / smallest;
        if (pods === undefined || n < pods) [pods, by] = [n, r];
      }
      pods = minOf(pods, each);
      if (dim === "pods") per = pods;
      else {
        const askers = here.filter(i => coef[i] > 0n);
        if (!askers.length) per = 0n;
        else {
          const most = askers.reduce((m, i) => (coef[i] > m ? coef[i] : m), 0n);
          let own: bigint | undefined = 0n;
          for (const i of askers) {
            const k = facts[i].k[ci] as bigint | undefined;
            own = own === undefined || k === undefined ? undefined : own + k * coef[i];
          }
          per = minOf(
            minOf(allocatableOf(cls.node, dim), pods === undefined ? undefined : pods * most),
            own,
          );
          by = dim;
        }
      }
    }
    if (per === undefined) return undefined; // a node with no bound: nothing can be proven
    cap += per * BigInt(count);
    if (per > 0n) taking.push({ cls, count, per, by });
  }
  return { members, dim, coef, cap, nodes, classes: taking };
}

/**
 * Each role's pods in the placement that asks least of a test: every role at its least, then the
 * rest of `needs` from the roles that add least to it.
 */
function leastFor(c: Constraint, facts: RoleFacts[], needs: bigint): bigint[] {
  const n = facts.map(f => f.min);
  let rest = needs - n.reduce((s, x) => s + x, 0n);
  const order = [...facts.keys()].sort((a, b) =>
    c.coef[a] < c.coef[b] ? -1 : c.coef[a] > c.coef[b] ? 1 : 0,
  );
  for (const i of order) {
    if (rest <= 0n) break;
    const more = facts[i].max - n[i] < rest ? facts[i].max - n[i] : rest;
    n[i] += more;
    rest -= more;
  }
  return n;
}

const lhsOf = (c: Constraint, n: bigint[]) => n.reduce((s, x, i) => s + x * c.coef[i], 0n);

function firstFailing(constraints: Constraint[], facts: RoleFacts[], needs: bigint) {
  for (const c of constraints) {
    const n = leastFor(c, facts, needs);
    const lhs = lhsOf(c, n);
    if (lhs > c.cap) return { c, n, lhs };
  }
  return undefined;
}

const names = (facts: RoleFacts[], members: number[]) =>
  members.flatMap(i => facts[i].role.parts.map(p => p.name));
const listed = (xs: string[]) =>
  xs.length > 4 ? `${xs.slice(0, 3).join(", ")} and ${xs.length - 3} more` : xs.join(", ");

/** "cpu 4, memory 16Gi, nvidia.com/gpu 8": by name, as the API server orders a map it stores. */
function asksOf(f: RoleFacts): string {
  const parts = [...f.role.pod.requests]
    .filter(([r, q]) => f.asks.has(r) && q.milli > 0n)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([r, q]) => `${r} ${show(q)}`);
  return parts.length ? parts.join(", ") : "no resources";
}

/** The parts' pods in a placement (role n split over its parts, least first when not whole). */
function breakdown(
  f: RoleFacts,
  pods: bigint,
  withAsk?: bigint,
  format?: Parameters<typeof formatQuantity>[1],
): string {
  const each = withAsk === undefined ? "" : ` × ${formatQuantity(withAsk, format)}`;
  // Every pod of the role, part by part; else (fewer: Volcano's minAvailable) the role's count.
  if (pods === f.max) return f.role.parts.map(p => `${p.name}: ${p.pods}${each}`).join(", ");
  return `${f.role.parts.map(p => p.name).join(" + ")}: ${pods}${each}`;
}

function formatOf(facts: RoleFacts[], dim: string) {
  for (const f of facts) {
    const q = f.role.pod.requests.get(dim);
    if (q) return q.format;
  }
  return "DecimalSI" as const;
}

function classLine(
  c: Constraint["classes"][number],
  dim: string,
  format: Parameters<typeof formatQuantity>[1],
): string {
  const have =
    c.by === undefined
      ? ""
      : c.by === "pods"
        ? `, ${podsAllocatable(c.cls)} allocatable pods`
        : `, ${formatQuantity(allocatableOf(c.cls.node, c.by) ?? 0n, formatOfNode(c.cls, c.by))} allocatable ${c.by}`;
  const what =
    dim === "pods"
      ? `${c.per} pod${c.per === 1n ? "" : "s"}`
      : `${formatQuantity(c.per, format)} ${dim}`;
  const nodesLike =
    c.count === 1 ? `node "${c.cls.node.name}"` : `${c.count} nodes like node "${c.cls.node.name}"`;
  return `${nodesLike}: ${what} each${have}`;
}

const formatOfNode = (cls: NodeClass, r: string) =>
  cls.node.allocatable.get(r)?.format ?? "DecimalSI";

/** Why nodes are not candidates for a role's pods, as node fit says it. */
function scopeOf(f: RoleFacts, classes: NodeClass[], total: number): string {
  let candidates = 0;
  const excluded = new Map<Exclusion, number>();
  const tolerations = list<V1Toleration>(f.role.spec.tolerations);
  for (const [ci, cls] of classes.entries()) {
    if (f.k[ci] !== null) candidates += cls.names.length;
    else {
      const why = exclusion(f.role.spec, cls.node.node, tolerations)!;
      excluded.set(why, (excluded.get(why) ?? 0) + cls.names.length);
    }
  }
  return `${candidates} of ${total} nodes are candidates${
    excluded.size
      ? `; excluded: ${[...excluded].map(([why, n]) => `${n} by ${why === "selector" ? "nodeSelector/affinity" : why}`).join(", ")}`
      : ""
  }`;
}

function violationOf(
  demand: CapacityDemand,
  facts: RoleFacts[],
  constraints: Constraint[],
  failing: { c: Constraint; n: bigint[]; lhs: bigint },
  classes: NodeClass[],
  total: number,
): RuleViolation {
  const { c, n, lhs } = failing;
  const format = formatOf(facts, c.dim);
  const shownClasses = [...c.classes].sort((a, b) =>
    a.per * BigInt(a.count) > b.per * BigInt(b.count) ? -1 : 1,
  );
  const detail = shownClasses.slice(0, SHOWN).map(x => classLine(x, c.dim, format));
  if (shownClasses.length > SHOWN) detail.push(`${shownClasses.length - SHOWN} more kinds of node`);
  const capShown = c.dim === "pods" ? `${c.cap}` : formatQuantity(c.cap, format);
  let problem: string;
  if (c.members.length === 1) {
    const f = facts[c.members[0]];
    const who =
      f.role.parts.length > 1 || facts.length > 1 ? ` (${breakdown(f, n[c.members[0]])})` : "";
    problem = `it needs ${lhs} pods asking ${asksOf(f)} each at once${who}, and at most ${capShown} fit at once even on empty nodes (${detail.join("; ")}) (${scopeOf(f, classes, total)})`;
  } else {
    const who = c.members
      .map(i => breakdown(facts[i], n[i], c.dim === "pods" ? undefined : c.coef[i], format))
      .join(", ");
    problem =
      c.dim === "pods"
        ? `its roles ${listed(names(facts, c.members))} need ${lhs} pods at once (${who}), and at most ${capShown} of them fit at once even on empty nodes (${detail.join("; ")})`
        : `its roles ${listed(names(facts, c.members))} need ${formatQuantity(lhs, format)} ${c.dim} at once (${who}), and the ${c.nodes} nodes they may use can give them at most ${capShown} (${detail.join("; ")})`;
  }
  const fixes: string[] = [];
  const lower = lowering(demand, facts, constraints);
  if (lower) fixes.push(lower);
  const best = c.classes.reduce<Constraint["classes"][number] | undefined>(
    (m, x) => (!m || x.per > m.per ? x : m),
    undefined,
  );
  if (best && best.per > 0n) {
    const more = (lhs - c.cap + best.per - 1n) / best.per;
    fixes.push(
      `have an admin add at least ${more} more node${more === 1n ? "" : "s"} like node "${best.cls.node.name}" (or larger), which its pods may use`,
    );
  } else fixes.push("have an admin add nodes its pods may use");
  return {
    rule: RULE,
    message: `${demand.subject} cannot be placed whole (${demand.why}): ${problem}${demand.warnOnly ? `; ${demand.warnOnly}` : ""}`,
    fix: fixes.join("; or "),
    ...(demand.warnOnly ? { severity: "warn" as const } : {}),
  };
}

/** The largest value in [lo, hi] for which ok holds (ok monotone, holding at lo), or lo − 1. */
function largest(lo: number, hi: number, ok: (x: number) => boolean): number {
  if (!ok(lo)) return lo - 1;
  while (lo < hi) {
    const mid = lo + Math.ceil((hi - lo) / 2);
    if (ok(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** The field to lower and to what: Volcano's minAvailable, else the part with the most pods. */
function lowering(
  demand: CapacityDemand,
  facts: RoleFacts[],
  constraints: Constraint[],
): string | undefined {
  const passes = (fs: RoleFacts[], needs: number) => !firstFailing(constraints, fs, BigInt(needs));
  if (demand.needsField) {
    const least = Number(facts.reduce((s, f) => s + f.min, 0n));
    const fits = largest(Math.max(1, least), demand.needs, x => passes(facts, x));
    return fits >= 1 && fits < demand.needs
      ? `lower ${demand.needsField} from ${demand.needs} to at most ${fits}`
      : undefined;
  }
  let biggest: { i: number; part: GangPart } | undefined;
  for (const [i, f] of facts.entries())
    for (const part of f.role.parts)
      if (!biggest || part.pods > biggest.part.pods) biggest = { i, part };
  if (!biggest || !biggest.part.field) return undefined;
  const { i, part } = biggest;
  const with_ = (x: number) => {
    const delta = BigInt(x - part.pods);
    const fs = facts.map((f, j) =>
      j === i ? { ...f, min: f.min + delta, max: f.max + delta } : f,
    );
    return passes(fs, demand.needs + x - part.pods);
  };
  const fits = largest(1, part.pods, with_);
  if (fits < 1 || fits >= part.pods) return undefined;
  const offset = part.offset ?? 0;
  return `lower ${part.field} from ${part.pods + offset} to at most ${fits + offset}`;
}

// ---- Which objects are gangs, and their roles (what the policy hands to checkGangCapacity) ----

const KUEUE_POD_GROUP = "kueue.x-k8s.io/pod-group-name";
const KUEUE_POD_GROUP_TOTAL = "kueue.x-k8s.io/pod-group-total-count";
/** Kinds whose pods need not start together: the ones Ray's operator runs (a head, and workers that join as placed). */
const NOT_ALL_AT_ONCE: Record<string, string> = {
  "RayCluster.ray.io": "a Ray cluster's workers join it as they are placed",
  "RayJob.ray.io": "a Ray cluster's workers join it as they are placed",
  "RayService.ray.io": "a Ray cluster's workers join it as they are placed",
};
/** Kinds that are no gang at all: a single pod, or serving replicas scaled one by one. */
const NO_GANG = new Set(["Notebook.kubeflow.org", "InferenceService.serving.kserve.io"]);
/** Whether the object's pods start together (a gang), as opposed to roles scaled one by one. */
export const isGangKind = (object: KubeObject): boolean => !NO_GANG.has(kindKey(object));
const KUBEFLOW_TRAINING = new Set(["PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "MPIJob"]);

const kindKey = (o: KubeObject) =>
  `${o.kind}.${typeof o.apiVersion === "string" ? groupOf(o.apiVersion) : ""}`;
const spec = (o: KubeObject): Record<string, unknown> => (isRecord(o.spec) ? o.spec : {});
const count = (v: unknown): number | undefined =>
  typeof v === "number" && Number.isSafeInteger(v) && v >= 0 ? v : undefined;

/** The roles of a multi-role object, alike ones merged; undefined when a role's quantities do not parse. */
function rolesOf(targets: readonly PodTarget[], defaults: LimitRangeDefaults) {
  const byTarget = new Map<PodTarget, CapacityRole>();
  const roles: CapacityRole[] = [];
  for (const t of targets) {
    if (!t.role) continue;
    const part: GangPart = {
      name: t.role.name,
      pods: t.role.pods,
      min: t.role.pods,
      field: t.role.field,
      path: t.template.path,
    };
    const same = t.sameAs && byTarget.get(t.sameAs);
    if (same) {
      same.parts.push(part);
      byTarget.set(t, same);
      continue;
    }
    const pod = podResources(t.template, defaults);
    if (pod.errors.length) return undefined;
    const role = { spec: t.template.spec, pod, parts: [part] };
    byTarget.set(t, role);
    roles.push(role);
  }
  return roles;
}

/** A multi-role workload (a PyTorchJob, a JobSet, ...) as a gang; undefined when it is none. */
export function gangOfRoles(
  object: KubeObject,
  targets: readonly PodTarget[],
  defaults: LimitRangeDefaults,
): Omit<CapacityDemand, "subject"> | undefined {
  const key = kindKey(object);
  if (NO_GANG.has(key)) return undefined;
  const roles = rolesOf(targets, defaults);
  if (!roles) return undefined;
  const all = sum(roles.flatMap(r => r.parts.map(p => p.pods)));
  const s = spec(object);
  if (key === "LeaderWorkerSet.leaderworkerset.x-k8s.io") {
    // Each group (a leader and size − 1 workers) starts whole; groups are placed one by one.
    const groups = count(s.replicas) ?? 1;
    if (!groups) return undefined;
    for (const r of roles)
      for (const p of r.parts) {
        p.pods = p.min = Math.floor(p.pods / groups);
        if (p.name === "worker" || p.name === "leader and worker") {
          p.field = "spec.leaderWorkerTemplate.size";
          p.offset = p.name === "worker" ? 1 : 0;
        } else p.field = "";
      }
    return {
      roles,
      needs: sum(roles.flatMap(r => r.parts.map(p => p.pods))),
      why: "the pods of each of its groups start together",
    };
  }
  if (key === "Job.batch.volcano.sh") {
    // Volcano starts the job once minAvailable of its pods can run (default: all); a task's own
    // minAvailable, when set, of that task (read by the task's index in the template's path).
    const tasks = Array.isArray(s.tasks) ? s.tasks : [];
    const minAvailable = count(s.minAvailable);
    for (const r of roles)
      for (const p of r.parts) {
        const i = Number(/^spec\.tasks\[(\d+)\]/.exec(p.path)?.[1]);
        const own = isRecord(tasks[i]) ? count(tasks[i].minAvailable) : undefined;
        p.min = minAvailable === undefined ? p.pods : Math.min(p.pods, own ?? 0);
      }
    const needs = minAvailable === undefined ? all : Math.min(minAvailable, all);
    return {
      roles,
      needs,
      ...(minAvailable === undefined ? {} : { needsField: "spec.minAvailable" }),
      why:
        minAvailable === undefined
          ? "Volcano starts its pods together"
          : `Volcano starts it once spec.minAvailable (${minAvailable}) of its pods can run together`,
    };
  }
  const loose = NOT_ALL_AT_ONCE[key];
  const elastic =
    KUBEFLOW_TRAINING.has(object.kind ?? "") &&
    key.endsWith(".kubeflow.org") &&
    isRecord(s.elasticPolicy)
      ? "it is elastic (spec.elasticPolicy): it may start with fewer workers"
      : undefined;
  return {
    roles,
    needs: all,
    why: loose ? "its pods are asked for together" : "its pods start together",
    ...(loose || elastic ? { warnOnly: loose ?? elastic } : {}),
  };
}

/**
 * A batch Job whose completions equal its parallelism (> 1) runs all its pods at once. They must
 * be placed together only when they work together: an Indexed Job whose pods reach each other by
 * hostname (spec.template.spec.subdomain), the pattern of distributed training on plain Jobs; any
 * other runs in waves if it must, so it is a warning.
 */
export function gangOfJob(object: KubeObject, template: PodTemplateRef, pod: PodResources) {
  if (object.kind !== "Job" || object.apiVersion !== "batch/v1") return undefined;
  const s = spec(object);
  const parallelism = count(s.parallelism) ?? 1;
  if (s.suspend === true || parallelism <= 1 || count(s.completions) !== parallelism)
    return undefined;
  const together = s.completionMode === "Indexed" && !!template.spec?.subdomain;
  return {
    roles: [
      {
        spec: template.spec,
        pod,
        parts: [
          { name: "pods", pods: parallelism, min: parallelism, field: "", path: template.path },
        ],
      },
    ],
    needs: parallelism,
    why: `its ${parallelism} pods run at once (completions = parallelism)`,
    ...(together
      ? {}
      : {
          warnOnly:
            "unless they must run together (an Indexed Job whose pods reach each other by spec.template.spec.subdomain), its pods run in waves",
        }),
  } satisfies Omit<CapacityDemand, "subject">;
}

/**
 * A Pod of a Kueue pod group (its pod-group-name label and total-count annotation): the group's
 * pods are created one by one and may differ, so what this pod shows is said as a warning, for a
 * group of pods all like it.
 */
export function gangOfKueuePod(object: KubeObject, template: PodTemplateRef, pod: PodResources) {
  if (!isPod(object)) return undefined;
  const group = object.metadata?.labels?.[KUEUE_POD_GROUP];
  const total = Number(object.metadata?.annotations?.[KUEUE_POD_GROUP_TOTAL]);
  if (typeof group !== "string" || !group || !Number.isSafeInteger(total) || total <= 1)
    return undefined;
  return {
    roles: [
      {
        spec: template.spec,
        pod,
        parts: [{ name: "pods", pods: total, min: total, field: "", path: template.path }],
      },
    ],
    needs: total,
    why: `Kueue pod group ${group} starts its ${total} pods together`,
    warnOnly: "judged as if every pod of the group asks what this one asks",
  } satisfies Omit<CapacityDemand, "subject">;
}

/** Whether an UPDATE's gang needs more than the stored one: more pods of a part, or pods that ask or go elsewhere. */
export function grows(
  now: Omit<CapacityDemand, "subject">,
  before: Omit<CapacityDemand, "subject"> | undefined,
): boolean {
  if (!before) return true;
  if (now.needs > before.needs) return true;
  const old = new Map<string, { pods: number; sign: string }>();
  for (const r of before.roles)
    for (const p of r.parts) old.set(p.path, { pods: p.pods, sign: signature(r) });
  return now.roles.some(r =>
    r.parts.some(p => {
      const o = old.get(p.path);
      return !o || p.pods > o.pods || o.sign !== signature(r);
    }),
  );
}

const signature = (r: CapacityRole) =>
  JSON.stringify([
    [...r.pod.requests].map(([k, q]) => `${k}=${q.milli}`).sort(),
    r.spec.nodeSelector ?? null,
    r.spec.affinity ?? null,
    r.spec.tolerations ?? null,
    r.spec.nodeName ?? null,
  ]);

// ---- The rule in the policy: settings, cluster data, updates ----

/** How the policy reports that Nodes are not known (policy.ts's unavailable). */
export type Unavailable = (findings: RuleFindings, subject: string) => void;

export function judgeGangCapacity(
  object: KubeObject,
  now: Omit<CapacityDemand, "subject"> | undefined,
  before: () => Omit<CapacityDemand, "subject"> | undefined,
  ctx: RuleContext,
  unavailable: Unavailable,
  queued?: string,
): RuleFindings {
  const findings = noFindings();
  if (!now) return findings;
  const settings = ctx.settings.resourceQuota;
  const mode = settings.gangCapacity;
  if (!settings.nodeFit || mode === "off") {
    findings.skipped = [
      {
        rule: RULE,
        reason: !settings.nodeFit
          ? "resourceQuota.nodeFit is off"
          : "resourceQuota.gangCapacity is off",
      },
    ];
    return findings;
  }
  if (ctx.stored && !grows(now, before())) return findings;
  const subject = describeObject(object);
  const nodes = ctx.cluster.nodes();
  if (!nodes) {
    unavailable(findings, subject);
    return findings;
  }
  const warnOnly =
    now.warnOnly ??
    (queued ? `${queued}: Kueue may provision nodes for it before it starts` : undefined) ??
    (mode === "warn"
      ? "resourceQuota.gangCapacity is warn (a cluster autoscaler may add nodes)"
      : undefined);
  const result = checkGangCapacity(nodes, { ...now, subject, ...(warnOnly ? { warnOnly } : {}) });
  findings.violations.push(...result.violations);
  findings.warnings.push(...result.warnings);
  return findings;
}

/** The LimitRange defaults of the object's namespace (none when unknown). */
export const defaultsOf = (ctx: RuleContext): LimitRangeDefaults =>
  limitRangeDefaults(ctx.namespaceName ? ctx.cluster.limitRanges(ctx.namespaceName) : undefined);
