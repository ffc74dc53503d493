// Stage 2 of the validating step: the findings of the policies the plan says act (plan.ts), on
// what the update gate lets through, and an UPDATE judged on what it changes.
import type { KubeObject } from "../objects/pod";
import { podTemplateOf } from "../workload-kinds/built-in";
import type { PodTarget, Policy, RuleFindings } from "./policy";
import { emptyFindings, formatNote, mergeFindings, type Findings } from "../objects/verdict";
import type { Plan } from "./plan";
import { fixFailureViolation, internalError, malformed, newFindings, reasonOf } from "./findings";
import { recordedFixFailures } from "../objects/fix-trace";
import { simulateWorkload, whichRoles, type Simulation } from "./workload-simulation";

/**
 * One policy's validation of an object as it will be stored. For a workload, the checks see the
 * template with every policy's fix applied (the simulation), and the policy's own pending fixes
 * come back as changes.
 */
async function validate(
  policy: Policy,
  obj: KubeObject,
  plan: Plan,
  judged: JudgedAs,
): Promise<Findings> {
  const findings = emptyFindings();
  const { ctx } = plan;
  const speaks = plan.speaker === policy;
  const { pod, simulation } = judged;
  try {
    if (pod) {
      const failed = pod.fixFailures.get(policy.name);
      if (failed !== undefined && ctx.operation === "CREATE")
        findings.violations.push(internalError(policy.name, "fix", failed));
      if (!pod.target) {
        if (speaks) findings.violations.push(malformed(policy, obj, "has no spec"));
      } else if (policy.check) {
        const found = await policy.check(obj, pod.target, ctx);
        mergeFindings(findings, stampFindings(policy, found));
      }
    } else if (plan.shape === "workload") {
      if (!simulation) {
        if (speaks) findings.violations.push(malformed(policy, obj, "has no pod template"));
      } else {
        findings.changes.push(...simulation.changes.filter(c => c.capability === policy.name));
        for (const f of simulation.failures)
          if (f.capability === policy.name) findings.violations.push(fixFailureViolation(f));
        if (policy.check) {
          const judged = emptyFindings();
          for (const target of simulation.targets) {
            if (target.sameAs) continue; // judged through the one it is alike
            const found = stampFindings(policy, await policy.check(simulation.copy, target, ctx));
            found.violations = found.violations.map(v => ({
              ...v,
              message: v.message + whichRoles(target, v.message),
            }));
            mergeFindings(judged, found);
          }
          // A gang: what its roles ask together.
          if (policy.checkGang && simulation.targets[0]?.role) {
            const found = await policy.checkGang(simulation.copy, simulation.targets, ctx);
            mergeFindings(judged, stampFindings(policy, found));
          }
          mergeFindings(findings, withoutRepeats(judged));
        }
        if (simulation.notes.length && speaks)
          findings.warnings.push(...simulation.notes.map(n => formatNote("workloads", n)));
        if (simulation.rename) renameFields(findings, simulation.rename);
      }
    } else if (policy.check) {
      // One of its extra kinds (the plan lets no other object through).
      mergeFindings(findings, stampFindings(policy, await policy.check(obj, undefined, ctx)));
    }
  } catch (e) {
    findings.violations.push(internalError(policy.name, "check", reasonOf(e)));
  }
  return findings;
}

// The engine, not each rule, says which capability a finding is from: stamped in place (a rule
// returns new objects on every call), here beside the checks it runs for every finding.
function stampFindings(policy: Policy, found: RuleFindings): Findings {
  const capability = policy.name;
  for (const list of [found.changes, found.violations, found.skipped ?? []])
    for (const item of list) (item as { capability?: string }).capability = capability;
  const { changes, violations, warnings, skipped } = found as Findings;
  return { changes, violations, warnings, skipped: skipped ?? [] };
}

/** Every message of the findings with the fields of a built pod spec named as the object has them. */
function renameFields(findings: Findings, rename: (text: string) => string): void {
  findings.violations = findings.violations.map(v => ({
    ...v,
    message: rename(v.message),
    fix: rename(v.fix),
  }));
  findings.changes = findings.changes.map(c => ({ ...c, message: rename(c.message) }));
  findings.warnings = findings.warnings.map(rename);
  findings.skipped = findings.skipped.map(s => ({ ...s, reason: rename(s.reason) }));
}

/** Findings of several roles judged alike, each said once (two roles with the same image, say). */
function withoutRepeats(findings: Findings): Findings {
  const seen = new Set<string>();
  const once = <T>(list: T[]) =>
    list.filter(x => {
      const key = JSON.stringify(x);
      return seen.has(key) ? false : (seen.add(key), true);
    });
  return {
    changes: once(findings.changes),
    violations: once(findings.violations),
    warnings: once(findings.warnings),
    skipped: once(findings.skipped),
  };
}

/**
 * The acting policies' validation of an object, in order, merged.
 *
 * An UPDATE that needsJudging (a changed image, an added ephemeral container, a workload's new
 * template or more replicas) is judged on what it changes: every policy judges the object as it
 * will be stored and as it is stored, and only what the stored one did not already have counts —
 * an object admitted earlier (under another mode or older rules) is never refused an update for
 * something it had since its creation, and a scale-down is never refused. The stored one is
 * judged in the same context, as an update to itself: what would be raised even if nothing changed.
 */
export async function checksOf(plan: Plan): Promise<Validation> {
  if (!plan.judged) return { findings: emptyFindings() };
  const old = plan.ctx.stored?.object;
  if (!old || plan.shape === "other") return validateEach(plan.object, plan);
  const [now, before] = await Promise.all([
    validateEach(plan.object, plan),
    validateEach(old, plan),
  ]);
  // A workload's pending fixes are what its pods will get, whatever the stored one had.
  return {
    findings: { ...newFindings(now.findings, before.findings), changes: now.findings.changes },
    simulation: now.simulation,
  };
}

/** The findings, and for a workload the simulation they were judged on. */
export interface Validation {
  findings: Findings;
  simulation?: Simulation;
}

/**
 * What every policy judges, worked out once for all of them: a Pod's spec and the fixes that threw
 * on it, or a workload's simulation.
 */
interface JudgedAs {
  pod?: { target?: PodTarget; fixFailures: ReadonlyMap<string, string> };
  simulation?: Simulation;
}

async function validateEach(obj: KubeObject, plan: Plan): Promise<Validation> {
  const judged: JudgedAs = {};
  if (plan.shape === "pod") {
    const template = podTemplateOf(obj);
    judged.pod = {
      target: template && { object: obj, template, isTemplate: false },
      fixFailures: recordedFixFailures(obj),
    };
  } else if (plan.shape === "workload")
    // A workload's template is fixed once, with every policy that acts, for all the acting ones.
    judged.simulation = await simulateWorkload(plan.allActive, obj, plan.ctx, plan.exemptions);
  const findings = emptyFindings();
  for (const p of plan.active) mergeFindings(findings, await validate(p, obj, plan, judged));
  return { findings, simulation: judged.simulation };
}
