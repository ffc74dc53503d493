// The validating step: plan, checks, answer. The answer is the findings decided in the namespace's
// mode, Exemptions applied, the warnings a user reads, and the decisions to count.
import { applyExemptions, expiredWarning, exemptionPath, waivedWarning } from "../exemptions";
import type { Policy, Validator } from "./policy";
import { isBeingDeleted } from "../objects/pod";
import { isIgnoredNamespace } from "../settings";
import type { Mode } from "../settings";
import {
  formatPendingChange,
  formatViolation,
  type Change,
  type Findings,
  type Skip,
  type Violation,
} from "../objects/verdict";
import { contextOf, planOf, type Plan } from "./plan";
import { internalError, reasonOf } from "./findings";
import { fixedNotes, recordedFixes } from "../objects/fix-trace";
import { checksOf, type Validation } from "./checks";
import type { AdmissionInput, Answer, DecisionEvent, EngineDeps } from "./types";
import { workloadTargets } from "./targets";

export interface Decision {
  allowed: boolean;
  /** Formatted violations that deny (enforce mode only). */
  denials: string[];
  /** Admission warnings: violations in warn mode, warn-severity violations, notes, pending fixes. */
  warnings: string[];
}

/** Turns findings into an admission decision according to the namespace mode. */
export function decide(findings: Findings, mode: Mode): Decision {
  const denials: string[] = [];
  const warnings: string[] = [];
  if (mode === "off") return { allowed: true, denials, warnings };
  for (const v of findings.violations) {
    const line = formatViolation(v);
    if (mode === "enforce" && v.severity !== "warn") denials.push(line);
    else if (mode !== "audit") warnings.push(line);
  }
  if (mode !== "audit") {
    warnings.push(...findings.warnings);
  }
  return { allowed: denials.length === 0, denials, warnings };
}

/** Warning lines for a workload's pending fixes: one line per capability. */
export function pendingWarnings(changes: Change[], kind: string): string[] {
  const byCapability = new Map<string, Change[]>();
  for (const c of changes)
    byCapability.set(c.capability, [...(byCapability.get(c.capability) ?? []), c]);
  return [...byCapability.entries()].map(([capability, list]) =>
    formatPendingChange({
      capability,
      rule: "pending",
      message: `${list.map(c => c.message).join("; ")} (when ${kind} creates them)`,
    }),
  );
}

/**
 * The validating step, in its three stages: the plan (who acts, in which mode, with which
 * Exemptions: plan.ts), the checks (checks.ts), then the answer formed here — the decision in the
 * namespace's mode, the warnings (what the mutating webhook fixed, from the trace it left; what a
 * workload's pods will get), and the events to count.
 */
export async function answer(
  request: AdmissionInput,
  deps: EngineDeps,
  acting: Policy[],
): Promise<Answer> {
  const plan = planOf(request, deps, acting, "validate");
  if (!plan.active.length) return unhandled(plan.mode);
  return answerOf(plan, await checksOf(plan));
}

const unhandled = (mode: Mode): Answer => ({
  handled: false,
  judgedBy: [],
  skipped: [],
  mode,
  allowed: true,
  denials: [],
  warnings: [],
  violations: [],
  waived: [],
  pending: [],
  events: [],
});

/** Stage 3: the answer from the plan and the checks' findings. */
function answerOf(plan: Plan, { findings, simulation }: Validation): Answer {
  const { object: obj, deps, ctx, mode, active, exemptions } = plan;
  if (plan.modeWarning && plan.speaker === active[0]) findings.warnings.unshift(plan.modeWarning);
  // Exemptions waive what would otherwise stand (and, waiving a whole capability, its fixes in a
  // workload's simulation); an expired one that matches says so, and counts no more.
  const waivable = (v: Violation) =>
    !deps.policies.find(p => p.name === v.capability)?.notWaivable?.[v.rule];
  const { standing, waived } = applyExemptions(findings.violations, exemptions, waivable);
  findings.violations = standing;
  if (mode !== "audit") {
    findings.warnings.push(...waived.map(waivedWarning));
    findings.warnings.push(...exemptions.expired.map(expiredWarning));
  }
  const decision = decide(findings, mode);
  // A denial an Exemption could waive says how to ask for one.
  const exemptionHint = decision.allowed
    ? undefined
    : exemptionPath(standing, deps.settings, waivable);
  if (exemptionHint) decision.denials.push(exemptionHint);
  const warnings = [...decision.warnings];
  const pending = plan.shape === "workload" ? findings.changes : [];
  if (mode !== "audit") {
    if (plan.shape === "pod" && ctx.operation === "CREATE")
      warnings.push(...fixedNotes(recordedFixes(obj), active));
    if (plan.templateFixed) {
      const notes = workloadTargets(obj, plan.kinds).flatMap(t =>
        fixedNotes(recordedFixes({ metadata: t.template.metadata }), active),
      );
      warnings.push(...new Set(notes));
    }
    warnings.push(...pendingWarnings(pending, String(obj.kind)));
  }
  const outcome = decision.allowed ? `allowed-${mode}` : "denied";
  const events: DecisionEvent[] = [
    ...(findings.violations.length
      ? findings.violations.map(v => ({ capability: v.capability, outcome, rule: v.rule }))
      : active.map(p => ({ capability: p.name, outcome: "allowed" }))),
    ...waived.map(w => ({
      capability: w.violation.capability,
      outcome: "exempted",
      rule: w.violation.rule,
      exemption: w.exemption.id,
    })),
  ];
  // A capability switched off judged nothing here: each of its rules is a skip, never a pass.
  const switchedOff = plan.judging.filter(p => plan.applies.get(p) === "disabled");
  const skipped: Skip[] = [
    ...findings.skipped,
    ...switchedOff.flatMap(p =>
      p.rules.map(rule => ({
        capability: p.name,
        rule,
        reason: `${p.name} is switched off (settings ${p.switchedBy}.enabled: false)`,
      })),
    ),
  ];
  return {
    handled: true,
    judgedBy: active,
    skipped,
    mode,
    allowed: decision.allowed,
    denials: decision.denials,
    warnings,
    violations: findings.violations,
    waived: waived.map(w => ({ violation: w.violation, exemption: w.exemption.id })),
    pending,
    predicted: simulation?.copy,
    events,
  };
}

/**
 * A validator's answer on one of the module's own objects (an Exemption): in enforce whatever the
 * namespace's mode, never waived; not in an ignored namespace, and an object being deleted (its
 * finalizers removed) is never refused. Its own path, not the policies' plan.
 */
export function validatorAnswer(
  request: AdmissionInput,
  deps: EngineDeps,
  validator: Validator,
): Answer {
  const obj = request.object;
  const ctx = contextOf(request, deps);
  if (isIgnoredNamespace(ctx.namespaceName, deps.settings)) return unhandled("enforce");
  let violations: Violation[] = [];
  if (!(ctx.stored && isBeingDeleted(obj)))
    try {
      violations = validator.validate(obj, ctx).map(v => ({ ...v, capability: validator.name }));
    } catch (e) {
      violations = [internalError(validator.name, "check", reasonOf(e))];
    }
  const { allowed, denials, warnings } = decide(
    { changes: [], violations, warnings: [], skipped: [] },
    "enforce",
  );
  return {
    ...unhandled("enforce"),
    handled: true,
    allowed,
    denials,
    warnings,
    violations,
    events: violations.length
      ? violations.map(v => ({ capability: v.capability, outcome: "denied", rule: v.rule }))
      : [{ capability: validator.name, outcome: "allowed" }],
  };
}
