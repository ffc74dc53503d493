// Whether a pod's requests fit any node at all (the scheduler's filters, then NodeResourcesFit,
// against allocatable), per node class; the judgement and its messages. Pure.
// Why: docs/adr/0005-node-fit-against-allocatable.md, docs/adr/0007-node-classes.md
import type { V1Node, V1PodSpec, V1Toleration } from "@kubernetes/client-node";
import { formatNote } from "../../lib/objects/verdict";
import { formatQuantity, type Quantity } from "../../lib/objects/quantity";
import type { RuleViolation } from "../../lib/engine/policy";
import { contributions, requestIsLimit, roundDown, show } from "./explain";
import {
  list,
  nodesToJudge,
  schedulingTaints,
  type NodeClass,
  type NodeClasses,
} from "./node-classes";
import { largest, REPORTED_BY_EVERY_NODE, isScheduledResource, shortOn } from "./node-resources";
import type { PodResources, ResourceList } from "./resources";
import { CAPABILITY } from "./quota";
import {
  DAEMONSET_TOLERATIONS,
  describeTaint,
  exclusion,
  NETWORK_UNAVAILABLE,
  tolerates,
  unnamedExclusion,
  type Exclusion,
} from "./scheduler-filters";

export interface NodeFitInput {
  subject: string;
  spec: V1PodSpec;
  pod: PodResources;
  daemonSet: boolean;
}

const quote = (name: string) => `node "${name}"`;
const SHOWN = 5;
/** The first names of `total` (the rest counted): `a, b, c, d, e and 7 more`. */
const listNames = (first: string[], total: number) =>
  total <= SHOWN
    ? first.join(", ")
    : `${first.slice(0, SHOWN).join(", ")} and ${total - SHOWN} more`;
const countOf = (classes: NodeClass[]) => classes.reduce((sum, c) => sum + c.names.length, 0);
/** The name the messages give a class: its first node in list order. */
const nameOf = (c: NodeClass) => c.node.name;

/** `judgeBy` picks the classes; tests pass singleNodeClasses to compare with the per-node verdict. */
export function checkNodeFit(
  nodes: V1Node[],
  input: NodeFitInput,
  judgeBy: (nodes: V1Node[], spec: V1PodSpec) => NodeClasses = nodesToJudge,
): { violations: RuleViolation[]; warnings: string[] } {
  const warnings: string[] = [];
  const note = (text: string) => warnings.push(formatNote(CAPABILITY, `${input.subject}: ${text}`));

  // What is asked: non-zero requests of resources the scheduler checks.
  const asks: ResourceList = new Map();
  for (const [r, q] of input.pod.requests)
    if (q.milli > 0n && isScheduledResource(r)) asks.set(r, q);
  if (!asks.size) return { violations: [], warnings };
  const { classes, total, unnamed } = judgeBy(nodes, input.spec);
  for (const r of [...asks.keys()]) {
    if (REPORTED_BY_EVERY_NODE.includes(r)) continue;
    if (
      unnamed
        ? unnamed.offered.has(r)
        : classes.some(c => (c.node.allocatable.get(r)?.milli ?? 0n) > 0n)
    )
      continue;
    asks.delete(r);
    note(
      `no node offers ${r} (the pod asks ${show(input.pod.requests.get(r))}); not checked, as a cluster autoscaler may add such a node`,
    );
  }
  if (!asks.size) return { violations: [], warnings };

  const tolerations = [...list<V1Toleration>(input.spec.tolerations)];
  if (input.daemonSet) {
    tolerations.push(...DAEMONSET_TOLERATIONS);
    if (input.spec.hostNetwork === true) tolerations.push(NETWORK_UNAVAILABLE);
  }
  const judged = classes.map(c => ({
    cls: c,
    first: c.positions[0],
    count: c.names.length,
    why: exclusion(input.spec, c.node.node, tolerations),
  }));
  const candidates = judged.filter(j => !j.why).map(j => j.cls);
  // Reasons are listed as the per-node pass meets them: in list order of their first nodes.
  const excluded = new Map<Exclusion, number>();
  const notNamed = (unnamed?.groups ?? []).map(g => ({
    first: g.first,
    count: g.count,
    why: unnamedExclusion(input.spec, g.cordoned, tolerations),
  }));
  for (const { why, count } of [...judged, ...notNamed].sort((a, b) => a.first - b.first))
    if (why) excluded.set(why, (excluded.get(why) ?? 0) + count);
  const scope = `${countOf(candidates)} of ${total} nodes are candidates${
    excluded.size
      ? `; excluded: ${[...excluded].map(([why, n]) => `${n} by ${why === "selector" ? "nodeSelector/affinity" : why}`).join(", ")}`
      : ""
  }`;
  if (!candidates.length) {
    note(
      `no node is a candidate for its pods (${scope}); node fit not checked, as a cluster autoscaler may add one`,
    );
    return { violations: [], warnings };
  }

  const violations = input.daemonSet
    ? daemonSetFit(candidates, asks, input, scope)
    : podFit(candidates, asks, input, scope);
  const tolerate = violations.length ? taintedOffer(judged, asks, tolerations) : undefined;
  if (tolerate) violations[0].fix = `${tolerate}; or ${violations[0].fix}`;
  if (!violations.length) limitWarnings(candidates, input, note);
  return { violations, warnings };
}

/**
 * When a resource the pod asks is offered only by nodes its tolerations keep it from (the
 * accelerators fix adds a GPU's own; this is what it could not): the first such node's taints.
 */
function taintedOffer(
  judged: { cls: NodeClass; why?: Exclusion }[],
  asks: ResourceList,
  tolerations: V1Toleration[],
): string | undefined {
  for (const r of asks.keys()) {
    if (REPORTED_BY_EVERY_NODE.includes(r)) continue;
    const offers = (c: NodeClass) => (c.node.allocatable.get(r)?.milli ?? 0n) > 0n;
    if (judged.some(j => !j.why && offers(j.cls))) continue;
    const tainted = judged.find(j => j.why === "taints" && offers(j.cls));
    if (!tainted) continue;
    const taints = schedulingTaints(tainted.cls.node.node)
      .filter(t => !tolerates(tolerations, t))
      .map(describeTaint);
    return `tolerate the taints of ${quote(nameOf(tainted.cls))}, which offers ${r}: ${taints.join(", ")} (spec.tolerations)`;
  }
  return undefined;
}

/** Whether every container asking for the resource asks its limit: then both must go down. */
function asksLimits(input: NodeFitInput, resource: string): boolean {
  const askers = input.pod.containers.filter(c => (c.requests.get(resource)?.milli ?? 0n) > 0n);
  return askers.length > 0 && askers.every(c => requestIsLimit(c, resource));
}

/** `memory request and limit 8Gi` / `cpu request 8`. */
const describeAsk = (input: NodeFitInput, resource: string, q: Quantity) =>
  `${resource} request${asksLimits(input, resource) ? " and limit" : ""} ${show(q)}`;

function lowerFix(
  input: NodeFitInput,
  resource: string,
  fitMilli: bigint,
  q: Quantity,
): string | undefined {
  const fit = roundDown(fitMilli, resource, q.format);
  if (!fit) return undefined;
  const fields = asksLimits(input, resource)
    ? `resources.requests.${resource} and resources.limits.${resource}`
    : `resources.requests.${resource}`;
  const who = contributions(input.pod, "requests", resource);
  return `lower ${fields} so the pod asks at most ${show(fit)} ${resource}${who ? ` (${who})` : ""}`;
}

function podFit(
  candidates: NodeClass[],
  asks: ResourceList,
  input: NodeFitInput,
  scope: string,
): RuleViolation[] {
  const shortfalls = candidates.map(c => ({ cls: c, short: shortOn(c.node, asks) }));
  if (shortfalls.some(s => s.short.size === 0)) return [];

  const problems: string[] = [];
  const fixes: string[] = [];
  for (const [r, q] of asks) {
    const best = largest(candidates, r);
    if (!best || q.milli <= best.have) continue;
    problems.push(
      `${describeAsk(input, r, q)} is more than any schedulable node can allocate: the largest candidate, ${quote(nameOf(best.cls))}, has ${formatQuantity(best.have, q.format)} allocatable ${r}`,
    );
    const lower = lowerFix(input, r, best.have, q);
    if (lower) fixes.push(lower);
  }
  if (!problems.length) {
    // Each resource fits somewhere, but no node has room for all of them at once. The sort is
    // stable: the first class (so the first node) among the fewest shortfalls.
    const closest = [...shortfalls].sort((a, b) => a.short.size - b.short.size)[0];
    const wants = [...asks].map(([r, q]) => `${r} ${show(q)}`).join(", ");
    const has = [...closest.short]
      .map(([r, have]) => `${formatQuantity(have, asks.get(r)!.format)} ${r}`)
      .join(", ");
    problems.push(
      `no schedulable node has ${wants} at once; the closest, ${quote(nameOf(closest.cls))}, has only ${has} allocatable`,
    );
  }
  fixes.push(
    "add a node with more allocatable resources (or let the pod's nodeSelector/tolerations reach a larger one)",
  );
  return [
    {
      rule: "node-fit",
      message: `${input.subject} fits no node and would stay Pending: ${problems.join("; ")} (${scope})`,
      fix: fixes.join("; or "),
    },
  ];
}

function daemonSetFit(
  candidates: NodeClass[],
  asks: ResourceList,
  input: NodeFitInput,
  scope: string,
): RuleViolation[] {
  const failing = candidates
    .map(c => ({ cls: c, short: shortOn(c.node, asks) }))
    .filter(s => s.short.size > 0);
  if (!failing.length) return [];
  const failingCount = countOf(failing.map(f => f.cls));
  // The first nodes in list order: each failing class's first few, merged by position.
  const shown = failing
    .flatMap(({ cls, short }) =>
      cls.positions.slice(0, SHOWN).map((position, i) => ({ position, name: cls.names[i], short })),
    )
    .sort((a, b) => a.position - b.position)
    .slice(0, SHOWN);
  const described = shown.map(
    ({ name, short }) =>
      `${quote(name)} (${[...short]
        .map(
          ([r, have]) =>
            `${r}: asks ${show(asks.get(r))}, ${formatQuantity(have, asks.get(r)!.format)} allocatable`,
        )
        .join(", ")})`,
  );
  const fixes: string[] = [];
  for (const [r, q] of asks) {
    const smallest = failing
      .filter(f => f.short.has(r))
      .reduce<
        bigint | undefined
      >((m, f) => (m === undefined || f.short.get(r)! < m ? f.short.get(r)! : m), undefined);
    if (smallest === undefined) continue;
    const lower = lowerFix(input, r, smallest, q);
    if (lower) fixes.push(lower);
  }
  fixes.push("keep the DaemonSet off those nodes with a nodeSelector or node affinity");
  return [
    {
      rule: "node-fit",
      message: `${input.subject}: its pod would stay Pending on ${failingCount} of ${countOf(candidates)} eligible nodes, which cannot allocate its requests: ${listNames(described, failingCount)} (${scope})`,
      fix: fixes.join("; or "),
    },
  ];
}

/** Warns about limits no candidate node can allocate (the pod runs, but can never use them). */
function limitWarnings(
  candidates: NodeClass[],
  input: NodeFitInput,
  note: (s: string) => void,
): void {
  for (const r of REPORTED_BY_EVERY_NODE) {
    const limit = input.pod.limits.get(r);
    if (!limit || limit.milli <= 0n) continue;
    const best = largest(candidates, r);
    if (best && limit.milli > best.have)
      note(
        `${r} limit ${show(limit)} is more than any candidate node can allocate (largest: ${quote(nameOf(best.cls))}, ${formatQuantity(best.have, limit.format)}); the pod can never use all of it`,
      );
  }
}
