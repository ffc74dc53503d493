// Whole-gang capacity's wording: the denial (the test that fails, with the nodes and numbers behind
// it, the nodes that do not count) and its fixes (the field to lower and to what, the nodes to add).
// Pure. Why: docs/adr/0008-gang-capacity-never-a-false-denial.md
import type { V1Toleration } from "@kubernetes/client-node";
import type { RuleViolation } from "../../lib/engine/policy";
import { formatQuantity } from "../../lib/objects/quantity";
import { show } from "./explain";
import {
  firstFailing,
  largest,
  podsAllocatable,
  type Constraint,
  type RoleFacts,
} from "./gang-capacity-bounds";
import type { CapacityDemand, GangPart } from "./gang-capacity-demand";
import { list, type NodeClass } from "./node-classes";
import { allocatableOf } from "./node-resources";
import { exclusion, type Exclusion } from "./scheduler-filters";

export const RULE = "gang-capacity";
const SHOWN = 3;

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

export function violationOf(
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
