// A workload is judged as its pods will be: on a copy of it whose pod templates have had every
// policy's fix applied.
import { kindsInForce } from "../workload-kinds/in-force";
import type { ApplicableExemptions } from "../exemptions";
import type { KubeObject } from "../pod";
import type { Policy, PodTarget, RuleContext } from "../policy";
import type { Change } from "../verdict";
import { workloadKindOf } from "../workload-kinds/roles";
import { workloadTargets } from "../workload-kinds/targets";
import type { FixFailure } from "./findings";
import { runFixes } from "./fixes";

export interface Simulation {
  copy: KubeObject;
  /** Its pod templates, fixed: one for a built-in workload, one per role for the ML kinds. */
  targets: PodTarget[];
  changes: Change[];
  failures: FixFailure[];
}

/** A copy of a workload whose pod templates have had every policy's fix applied: its pods as they will run. */
export async function simulateWorkload(
  allPolicies: Policy[],
  workload: KubeObject,
  ctx: RuleContext,
  exemptions: ApplicableExemptions,
): Promise<Simulation | undefined> {
  const kinds = kindsInForce(ctx.settings.workloads);
  if (!workloadTargets(workload, kinds).length) return undefined;
  const copy = workloadKindOf(workload, kinds)
    ? { ...workload, spec: structuredClone(workload.spec) }
    : copyWithOwnTemplate(workload);
  const targets = workloadTargets(copy, kinds);
  const changes: Change[] = [];
  const failures: FixFailure[] = [];
  const said = new Set<string>();
  for (const target of targets) {
    const result = await runFixes(allPolicies, target, ctx, exemptions);
    target.fixed = new Set(result.changes.map(c => `${c.capability}/${c.rule}`));
    // Roles fixed alike say so once.
    for (const c of result.changes) {
      const key = `${c.capability}/${c.rule}/${c.message}`;
      if (!said.has(key)) changes.push(c);
      said.add(key);
    }
    for (const f of result.failures)
      if (!failures.some(g => g.capability === f.capability && g.reason === f.reason))
        failures.push(f);
  }
  return { copy, targets, changes, failures };
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
