// A workload is judged as its pods will be: on a copy of it whose pod templates have had every
// policy's fix applied.
import { kindsInForce } from "../workload-kinds/in-force";
import type { ApplicableExemptions } from "../exemptions";
import type { KubeObject } from "../objects/pod";
import { podTemplateOf } from "../workload-kinds/built-in";
import type { Policy, PodTarget, RuleContext } from "./policy";
import type { Change } from "../objects/verdict";
import { workloadKindOf } from "../workload-kinds/roles";
import { workloadTargets } from "./targets";
import type { FixFailure } from "../objects/verdict";
import { runFixes } from "./fixes";

export interface Simulation {
  copy: KubeObject;
  /** Its pod templates, fixed: one for a built-in workload, one per role for the ML kinds. */
  targets: PodTarget[];
  changes: Change[];
  failures: FixFailure[];
  /** What could not be judged (an InferenceService's model without a known runtime): warnings, said once. */
  notes: string[];
  /** A finding's fields of a built pod spec renamed to the object's own (an InferenceService's components). */
  rename?: (text: string) => string;
}

/** A copy of a workload whose pod templates have had every policy's fix applied: its pods as they will run. */
export async function simulateWorkload(
  allPolicies: Policy[],
  workload: KubeObject,
  ctx: RuleContext,
  exemptions: ApplicableExemptions,
): Promise<Simulation | undefined> {
  const kinds = kindsInForce(ctx.settings.workloads);
  const kind = workloadKindOf(workload, kinds);
  if (!kind && !podTemplateOf(workload)) return undefined;
  // An ML kind's templates are anywhere in its spec: the spec is copied whole (a JSON round trip,
  // the request's own form, is cheaper than structuredClone for a 65-template RayCluster).
  const copy = kind
    ? { ...workload, spec: JSON.parse(JSON.stringify(workload.spec ?? null)) }
    : copyWithOwnTemplate(workload);
  const targets = workloadTargets(copy, kinds, {}, ctx.cluster, ctx.namespaceName);
  if (!targets.length) return undefined;
  groupAlike(targets);
  const changes: Change[] = [];
  const failures: FixFailure[] = [];
  const said = new Set<string>();
  const fixedJson = new Map<PodTarget, string>();
  // Every role's fixes at once: what they wait for (image lookups) then waits once, until the
  // request's deadline, not once per role. Each role's template is its own; results in order.
  const results = await Promise.all(
    targets.map(t => (t.sameAs ? undefined : runFixes(allPolicies, t, ctx, exemptions))),
  );
  for (const [i, target] of targets.entries()) {
    if (target.sameAs) {
      // Fixed as the one it is alike: its template becomes a copy of that one's, fixed.
      let fixed = fixedJson.get(target.sameAs);
      if (!fixed) {
        const { metadata, spec } = target.sameAs.template;
        fixedJson.set(target.sameAs, (fixed = JSON.stringify({ metadata, spec })));
      }
      const { metadata, spec } = JSON.parse(fixed);
      replaceContents(target.template.metadata, metadata);
      replaceContents(target.template.spec, spec);
      target.fixed = target.sameAs.fixed;
      continue;
    }
    const result = results[i]!;
    target.fixed = new Set(result.changes.map(c => `${c.capability}/${c.rule}`));
    // A change said once, naming the roles alike that get it too.
    const also = alsoIn(target);
    for (const c of result.changes) {
      const key = `${c.capability}/${c.rule}/${c.message}`;
      if (!said.has(key)) changes.push(also ? { ...c, message: `${c.message}${also}` } : c);
      said.add(key);
    }
    for (const f of result.failures)
      if (!failures.some(g => g.capability === f.capability && g.reason === f.reason))
        failures.push(f);
  }
  const notes = [...new Set(targets.flatMap(t => t.role?.notes ?? []))];
  const renames = targets.flatMap(t => (t.role?.rename ? [t.role.rename] : []));
  const rename = renames.length
    ? (text: string) => renames.reduce((out, r) => r(out), text)
    : undefined;
  return { copy, targets, changes, failures, notes, rename };
}

/**
 * Marks the roles whose template (and whether it makes pods at all) is the same as an earlier
 * role's: a Ray cluster's worker groups often are, and each is then fixed and judged once.
 */
function groupAlike(targets: PodTarget[]): void {
  if (targets.length < 2) return;
  const first = new Map<string, PodTarget>();
  for (const t of targets) {
    const key = `${(t.role?.pods ?? 1) > 0}:${JSON.stringify(t.template.metadata)}:${JSON.stringify(t.template.spec)}`;
    const earlier = first.get(key);
    if (!earlier) {
      first.set(key, t);
      continue;
    }
    t.sameAs = earlier;
    (earlier.alike ??= []).push(t);
  }
}

const listed = (names: string[]) =>
  names.length > 4
    ? `${names.slice(0, 3).join(", ")} and ${names.length - 3} more`
    : names.join(", ");
const roleName = (t: PodTarget) => t.role?.name ?? t.template.path;

/** " (the same in roles gpu-1, gpu-2 and 62 more)": what a finding of a target says of those alike. */
function alsoIn(target: PodTarget): string {
  const names = (target.alike ?? []).map(roleName);
  if (!names.length) return "";
  return ` (the same in ${names.length > 1 ? "roles" : "role"} ${listed(names)})`;
}

/**
 * A finding of one role of a gang, said so that a reader knows which: " (role Worker)" or
 * " (roles a, b, c and 2 more)" when the message names no field of it; else the roles alike.
 */
export function whichRoles(target: PodTarget, message: string): string {
  if (!target.role) return "";
  const named =
    message.includes(target.template.path) || message.includes(`(role ${target.role.name})`);
  if (named) return alsoIn(target);
  const names = [target.role.name, ...(target.alike ?? []).map(roleName)];
  return ` (${names.length > 1 ? "roles" : "role"} ${listed(names)})`;
}

function replaceContents(target: object, source: object): void {
  for (const key of Object.keys(target)) delete (target as Record<string, unknown>)[key];
  Object.assign(target, source);
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
