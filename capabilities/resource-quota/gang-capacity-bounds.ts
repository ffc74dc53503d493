// Whole-gang capacity's arithmetic: what a node of each class holds of each role's pods, the tests
// (a set of roles, a resource: at most so much on the nodes they may use), and the placement that
// asks least of each. Necessary conditions only: a failing test proves no placement holds the gang.
// Pure. Why: docs/adr/0008-gang-capacity-never-a-false-denial.md
import type { V1Toleration } from "@kubernetes/client-node";
import { sum, type CapacityRole } from "./gang-capacity-demand";
import { list, type NodeClass } from "./node-classes";
import { allocatableOf, isScheduledResource, REPORTED_BY_EVERY_NODE } from "./node-resources";
import { exclusion } from "./scheduler-filters";

/** Sets of roles up to this many roles are each tested (2^6 − 1 sets); beyond, each and all. */
const ALL_SETS_UP_TO = 6;
/** Every set of roles is tested only while sets × classes stay within this (nodes one by one are many classes). */
const ALL_SETS_CELLS = 50_000;

export interface RoleFacts {
  role: CapacityRole;
  asks: Map<string, bigint>;
  min: bigint;
  max: bigint;
  /** Per class: its pods a node of the class holds at most (undefined: unbounded), or null: not a candidate. */
  k: (bigint | undefined | null)[];
  /** Per class: the resource that bounds k ("pods" for the pod count). */
  by: (string | undefined)[];
}

export interface Constraint {
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

export const podsAllocatable = (cls: NodeClass): bigint | undefined => {
  const q = cls.node.allocatable.get("pods");
  return q ? q.milli / 1000n : undefined;
};
const minOf = (a: bigint | undefined, b: bigint | undefined) =>
  a === undefined ? b : b === undefined ? a : a < b ? a : b;

/**
 * Each role's facts against the node classes; undefined when the gang is not to be judged: a
 * resource no node offers, or a role with no node it fits (node fit speaks of those).
 */
export function factsOf(roles: CapacityRole[], classes: NodeClass[]): RoleFacts[] | undefined {
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
      if (!REPORTED_BY_EVERY_NODE.includes(r) && !offered.has(r)) return undefined;
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
    if (!k.some(n => n !== null && n !== 0n)) return undefined;
    const max = sum(role.parts.map(p => p.pods));
    const min = Math.min(max, sum(role.parts.map(p => p.min)));
    facts.push({ role, asks, min: BigInt(min), max: BigInt(max), k, by });
  }
  return facts;
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

export function constraintsOf(facts: RoleFacts[], classes: NodeClass[]): Constraint[] {
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

export function firstFailing(constraints: Constraint[], facts: RoleFacts[], needs: bigint) {
  for (const c of constraints) {
    const n = leastFor(c, facts, needs);
    const lhs = lhsOf(c, n);
    if (lhs > c.cap) return { c, n, lhs };
  }
  return undefined;
}

/** The largest value in [lo, hi] for which ok holds (ok monotone, holding at lo), or lo − 1. */
export function largest(lo: number, hi: number, ok: (x: number) => boolean): number {
  if (!ok(lo)) return lo - 1;
  while (lo < hi) {
    const mid = lo + Math.ceil((hi - lo) / 2);
    if (ok(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}
