// Stage 2 of the mutating step: the acting policies' fixes on a Pod, or on a workload's own
// template. Which policies act was decided by the plan (plan.ts).
import { wholeCapabilitiesWaived, type ApplicableExemptions } from "../exemptions";
import { podTemplateOf } from "../workload-kinds/built-in";
import type { Policy, PodTarget, RuleContext } from "./policy";
import type { Change, FixFailure } from "../objects/verdict";
import { planOf } from "./plan";
import { fixFailureViolation, reasonOf, stamped } from "./findings";
import { recordFixes, recordFixFailures } from "../objects/fix-trace";
import type { AdmissionInput, EngineDeps, MutateResult } from "./types";
import { workloadTargets } from "./targets";

/**
 * Runs the fixes of policies that act here (the plan's) on a pod spec in place. A fix that throws is
 * recorded, never rethrown. A capability an Exemption waives whole is not fixed either: the object
 * stays as its author wrote it.
 */
export async function runFixes(
  policies: Policy[],
  target: PodTarget,
  ctx: RuleContext,
  exemptions: ApplicableExemptions,
): Promise<{ changes: Change[]; failures: FixFailure[] }> {
  const changes: Change[] = [];
  const failures: FixFailure[] = [];
  const waivedWhole = wholeCapabilitiesWaived(exemptions);
  for (const policy of policies) {
    if (!policy.fix || waivedWhole.has(policy.name)) continue;
    try {
      changes.push(...stamped(policy, await policy.fix(target, ctx)));
    } catch (e) {
      failures.push({ capability: policy.name, reason: reasonOf(e) });
    }
  }
  return { changes, failures };
}

/**
 * The mutating webhook's step, on the request's object in place:
 *  - a Pod on CREATE gets the acting policies' fixes; what changed is recorded in its trace
 *    annotation, and a fix that threw in another (the validating webhook, and `check`, deny with it);
 *  - a workload's own template, with workloads.mutate, gets the same fixes, recorded on the
 *    template (its pods inherit the trace). Nothing is created in the cluster for a template (its
 *    first pod ensures its ServiceAccount). A workload a controller made (a Deployment's ReplicaSet,
 *    a CronJob's Job) is left alone: its template is its owner's, and a ReplicaSet whose template
 *    differs from its Deployment's makes the Deployment controller create another, and another.
 */
export async function mutate(
  request: AdmissionInput,
  deps: EngineDeps,
  acting: Policy[],
): Promise<MutateResult> {
  const plan = planOf(request, deps, acting, "mutate");
  const { object: obj, ctx, active, exemptions } = plan;
  let result = { changes: [] as Change[], failures: [] as FixFailure[] };
  const template = plan.shape === "pod" && active.length ? podTemplateOf(obj) : undefined;
  if (template && request.operation === "CREATE") {
    const target = { object: obj, template, isTemplate: false };
    result = await runFixes(active, target, ctx, exemptions);
    recordFixes(obj, result.changes);
    recordFixFailures(obj, result.failures);
  } else if (active.length && plan.templateFixed && request.operation !== "DELETE") {
    // Every pod template of the workload (one, or one per role of an ML kind), each with its trace.
    const targets = workloadTargets(obj, plan.kinds, { applied: true });
    for (const target of targets) {
      const fixed = await runFixes(active, target, ctx, exemptions);
      recordFixes({ metadata: target.template.metadata }, fixed.changes);
      result.changes.push(...fixed.changes);
      result.failures.push(...fixed.failures);
    }
  }
  const events = result.changes.map(c => ({
    capability: c.capability,
    outcome: "fixed",
    rule: c.rule,
  }));
  return { changes: result.changes, errors: result.failures.map(fixFailureViolation), events };
}
