// A workload is judged as its pods will be: on a copy of it whose pod template has had every
// policy's fix applied.
import type { ApplicableExemptions } from "../exemptions";
import { podTemplateOf, type KubeObject } from "../pod";
import type { Policy, PodTarget, RuleContext } from "../policy";
import type { Change } from "../verdict";
import type { FixFailure } from "./findings";
import { runFixes } from "./fixes";

export interface Simulation {
  copy: KubeObject;
  target: PodTarget;
  changes: Change[];
  failures: FixFailure[];
}

/** A copy of a workload whose pod template has had every policy's fix applied: its pods as they will run. */
export async function simulateWorkload(
  allPolicies: Policy[],
  workload: KubeObject,
  ctx: RuleContext,
  exemptions: ApplicableExemptions,
): Promise<Simulation | undefined> {
  if (!podTemplateOf(workload)) return undefined;
  const copy = copyWithOwnTemplate(workload);
  const target: PodTarget = { object: copy, template: podTemplateOf(copy)!, isTemplate: true };
  const result = await runFixes(allPolicies, target, ctx, exemptions);
  target.fixed = new Set(result.changes.map(c => `${c.capability}/${c.rule}`));
  return { copy, target, ...result };
}

/**
 * A copy of a workload that shares everything with it but the path down to its pod template, which
 * is its own deep copy: the fixes may change the template, nothing else, and a Deployment's other
 * fields (or an UPDATE's big status) are not worth copying on every request.
 */
function copyWithOwnTemplate(workload: KubeObject): KubeObject {
  const copy: KubeObject = { ...workload, spec: { ...(workload.spec as object) } };
  let holder = copy.spec as Record<string, unknown>;
  if (workload.kind === "CronJob") {
    const jobTemplate = { ...(holder.jobTemplate as object) } as Record<string, unknown>;
    holder.jobTemplate = jobTemplate;
    holder = jobTemplate.spec = { ...(jobTemplate.spec as object) };
  }
  holder.template = structuredClone(holder.template);
  return copy;
}
