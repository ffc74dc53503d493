// Whole-gang capacity: whether the schedulable nodes could hold every pod of a gang at once, from
// necessary conditions only. Pure. Why: docs/adr/0008-gang-capacity-never-a-false-denial.md
// This file is the rule (its bounds on the work, the settings, updates); which objects are gangs is
// in gang-capacity-demand.ts, the arithmetic in gang-capacity-bounds.ts, the denial's words in
// gang-capacity-message.ts.
import type { V1Node } from "@kubernetes/client-node";
import { describeObject, type KubeObject } from "../../lib/objects/pod";
import type { RuleContext, RuleFindings, RuleViolation } from "../../lib/engine/policy";
import { noFindings } from "../../lib/engine/policy";
import { formatNote } from "../../lib/objects/verdict";
import { constraintsOf, factsOf, firstFailing } from "./gang-capacity-bounds";
import { grows, sum, type CapacityDemand } from "./gang-capacity-demand";
import { RULE, violationOf } from "./gang-capacity-message";
import { namesOf, nodeClasses, nodeIdentityMatters, singleNodeClasses } from "./node-classes";
import { CAPABILITY } from "./quota";
import { limitRangeDefaults, type LimitRangeDefaults } from "./resources";

export type { CapacityDemand, CapacityRole, GangPart } from "./gang-capacity-demand";

/** Distinct roles judged together at most; more, and the gang is not checked (said). */
export const MAX_ROLES = 64;
/** Roles × node classes at most (a pass over them per test; nodes judged one by one are a class each, ~10 µs a cell). */
export const MAX_CELLS = 5_000;

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
  const facts = factsOf(roles, classes);
  if (!facts) return result;
  const constraints = constraintsOf(facts, classes);
  const needs = BigInt(demand.needs);
  const failing = firstFailing(constraints, facts, needs);
  if (!failing) return result;
  result.violations.push(violationOf(demand, facts, constraints, failing, classes, total));
  return result;
}

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
