// The one rule engine behind all front doors: the Pepr bindings (lib/pepr-adapter.ts) and the
// offline `check` (cli/check.ts) both call these functions, so they cannot disagree.
//
//   Pod CREATE:  fixPod (mutating webhook, in place)  →  validate (validating webhook, as stored)
//   workloads:   validate: all fixes simulated once on a copy of the template, then the checks;
//                the template itself is never changed (GitOps tools would see drift).
//   review():    what `check` prints — the two steps above in one call.
import type { ClusterView } from "./cluster";
import { containersChanged, isPod, isWorkload, podTemplateOf, type KubeObject } from "./pod";
import type { Operation, Policy, PodTarget, RuleContext } from "./policy";
import { isIgnoredNamespace, MODES, NS_KEYS, type Mode, type Settings } from "./settings";
import {
  emptyFindings,
  formatChange,
  formatPendingChange,
  formatViolation,
  mergeFindings,
  type Change,
  type Findings,
  type Violation,
} from "./verdict";

export interface ContextInput {
  settings: Settings;
  cluster: ClusterView;
  operation?: Operation;
  /** The request's namespace, used when the object has none. */
  namespace?: string;
  oldObject?: KubeObject;
  dryRun?: boolean;
}

export function contextFor(obj: KubeObject, input: ContextInput): RuleContext {
  const namespaceName = obj?.metadata?.namespace || input.namespace || "";
  return {
    settings: input.settings,
    cluster: input.cluster,
    namespaceName,
    namespace: namespaceName ? input.cluster.namespace(namespaceName) : undefined,
    operation: input.operation ?? "CREATE",
    oldObject: input.oldObject,
    dryRun: input.dryRun ?? false,
  };
}

/** The namespace's mode label, else the default mode. An unknown label value counts as enforce and is reported. */
export function modeOf(ctx: RuleContext): { mode: Mode; warning?: string } {
  const label = ctx.namespace?.labels[NS_KEYS.mode];
  if (label === undefined) return { mode: ctx.settings.mode };
  if ((MODES as readonly string[]).includes(label)) return { mode: label as Mode };
  return {
    mode: "enforce",
    warning: `admission-guard: namespace ${ctx.namespaceName} has ${NS_KEYS.mode}="${label}", which is not one of ${MODES.join("|")}; enforcing. Fix: kubectl label namespace ${ctx.namespaceName} ${NS_KEYS.mode}=warn --overwrite`,
  };
}

/** Whether a policy acts on objects in this context at all (system namespaces, the policy's namespaces, mode off). */
export function policyApplies(policy: Policy, ctx: RuleContext): boolean {
  if (isIgnoredNamespace(ctx.namespaceName, ctx.settings)) return false;
  if (policy.namespaces?.length && !policy.namespaces.includes(ctx.namespaceName)) return false;
  return modeOf(ctx).mode !== "off";
}

function internalError(policy: Policy, stage: string, e: unknown): Violation {
  const reason = e instanceof Error ? e.message : String(e);
  return {
    capability: policy.name,
    rule: "internal-error",
    message: `the ${stage} step failed on this object (${reason})`,
    fix: `check the object is well-formed; if it is, report this bug and meanwhile set the namespace to warn mode: kubectl label namespace <ns> ${NS_KEYS.mode}=warn --overwrite`,
  };
}

/** Runs the policies' fixes on a pod spec in place. Errors become violations, never exceptions. */
async function runFixes(
  policies: Policy[],
  target: PodTarget,
  ctx: RuleContext,
): Promise<{ changes: Change[]; errors: Violation[] }> {
  const changes: Change[] = [];
  const errors: Violation[] = [];
  for (const policy of policies) {
    if (!policy.fix || !policyApplies(policy, ctx)) continue;
    try {
      changes.push(...(await policy.fix(target, ctx)));
    } catch (e) {
      errors.push(internalError(policy, "fix", e));
    }
  }
  return { changes, errors };
}

/** The Pod mutation: fixes the pod in place, records what changed in an annotation. */
export async function fixPod(
  policies: Policy[],
  pod: KubeObject,
  ctx: RuleContext,
): Promise<{ changes: Change[]; errors: Violation[] }> {
  const template = podTemplateOf(pod);
  if (!template || !isPod(pod)) return { changes: [], errors: [] };
  const result = await runFixes(policies, { object: pod, template, isTemplate: false }, ctx);
  recordFixes(pod, result.changes);
  return result;
}

/** Whether a workload's own template is fixed when it is applied (see fixWorkload). */
export function templateIsFixed(workload: KubeObject, settings: Settings): boolean {
  return (
    settings.workloads.mutate &&
    isWorkload(workload) &&
    !(workload.metadata?.ownerReferences ?? []).some(o => o.controller === true)
  );
}

/**
 * A workload's pod template, fixed in place when it is applied (setting workloads.mutate): the
 * same fixes its pods would get, recorded in the template's trace annotation (its pods inherit it).
 * Nothing is created in the cluster (a template is not a pod: its first pod ensures its
 * ServiceAccount).
 *
 * A workload a controller made (a Deployment's ReplicaSet, a CronJob's Job) is left alone: its
 * template is its owner's, and a ReplicaSet whose template differs from its Deployment's makes the
 * Deployment controller create another one, and another. Its pods are fixed when they are created.
 */
export async function fixWorkload(
  policies: Policy[],
  workload: KubeObject,
  ctx: RuleContext,
): Promise<{ changes: Change[]; errors: Violation[] }> {
  const template = podTemplateOf(workload);
  if (!template || !templateIsFixed(workload, ctx.settings)) return { changes: [], errors: [] };
  const target = { object: workload, template, isTemplate: true, applied: true };
  const result = await runFixes(policies, target, ctx);
  recordFixes({ metadata: template.metadata }, result.changes);
  return result;
}

/** Adds `capability/rule` entries to the object's trace annotation; sorted and deduplicated so re-runs are stable. */
export function recordFixes(obj: KubeObject, changes: Change[]): void {
  if (!changes.length) return;
  const meta = (obj.metadata ??= {});
  const annotations = (meta.annotations ??= {});
  const entries = new Set(
    (annotations[NS_KEYS.fixed] ?? "")
      .split(",")
      .map(s => s.trim())
      .filter(Boolean),
  );
  for (const c of changes) entries.add(`${c.capability}/${c.rule}`);
  annotations[NS_KEYS.fixed] = [...entries].sort().join(",");
}

/** What admission-guard recorded as fixed on a pod, by capability. */
export function recordedFixes(obj: KubeObject): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const value = obj.metadata?.annotations?.[NS_KEYS.fixed];
  if (typeof value !== "string") return out;
  for (const entry of value.split(",")) {
    const [capability, rule] = entry.trim().split("/");
    if (!capability || !rule) continue;
    out.set(capability, [...(out.get(capability) ?? []), rule]);
  }
  return out;
}

interface Simulation {
  copy: KubeObject;
  target: PodTarget;
  changes: Change[];
  errors: Violation[];
}

// One simulation per request object, shared by every capability's validator (Pepr hands them all
// the same request object), so the template is copied and fixed once per request, not per capability.
const simulations = new WeakMap<object, Promise<Simulation | undefined>>();

/** A copy of a workload whose pod template has had every policy's fix applied: its pods as they will run. */
export function simulateWorkload(
  allPolicies: Policy[],
  workload: KubeObject,
  ctx: RuleContext,
): Promise<Simulation | undefined> {
  let sim = simulations.get(workload);
  if (!sim) {
    sim = (async () => {
      if (!podTemplateOf(workload)) return undefined;
      const copy = copyWithOwnTemplate(workload);
      const template = podTemplateOf(copy)!;
      const target: PodTarget = { object: copy, template, isTemplate: true };
      const { changes, errors } = await runFixes(allPolicies, target, ctx);
      return { copy, target, changes, errors };
    })();
    simulations.set(workload, sim);
  }
  return sim;
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

/**
 * One policy's validation of an object as it will be stored. For a workload, the checks see the
 * template with every policy's fix applied, and the policy's own pending fixes come back as changes.
 */
export async function validate(
  policy: Policy,
  obj: KubeObject,
  ctx: RuleContext,
  allPolicies: Policy[],
): Promise<Findings> {
  const findings = emptyFindings();
  if (!policyApplies(policy, ctx) || !obj || typeof obj !== "object") return findings;
  try {
    if (isPod(obj)) {
      const template = podTemplateOf(obj);
      if (!template) {
        if (reportsMalformed(policy, ctx, allPolicies))
          findings.violations.push(malformed(policy, obj, "has no spec"));
      } else if (policy.check) {
        mergeFindings(
          findings,
          await policy.check(obj, { object: obj, template, isTemplate: false }, ctx),
        );
      }
    } else if (isWorkload(obj)) {
      const sim = await simulateWorkload(allPolicies, obj, ctx);
      if (!sim) {
        if (reportsMalformed(policy, ctx, allPolicies))
          findings.violations.push(malformed(policy, obj, "has no pod template"));
      } else {
        findings.changes.push(...sim.changes.filter(c => c.capability === policy.name));
        findings.violations.push(...sim.errors.filter(v => v.capability === policy.name));
        if (policy.check) mergeFindings(findings, await policy.check(sim.copy, sim.target, ctx));
      }
    } else if (policy.check && policy.extraKinds?.includes(obj.kind ?? "")) {
      mergeFindings(findings, await policy.check(obj, undefined, ctx));
    }
  } catch (e) {
    findings.violations.push(internalError(policy, "check", e));
  }
  return findings;
}

/** A malformed object is one problem, not one per capability: the first policy that acts reports it. */
function reportsMalformed(policy: Policy, ctx: RuleContext, allPolicies: Policy[]): boolean {
  return allPolicies.find(p => policyApplies(p, ctx)) === policy;
}

/**
 * Every policy's validation of an object, in order, merged.
 *
 * A Pod UPDATE is judged on what it changes: none of its containers (labels, annotations,
 * finalizers, tolerations): nothing to judge, at the cost of a comparison. A changed image or an
 * added ephemeral container: every policy judges the pod as it will be stored and as it is stored,
 * and only what the stored pod did not already have counts — a pod admitted earlier (under another
 * mode or older rules) is never refused an update for something it had since its creation.
 */
export async function validateAll(
  policies: Policy[],
  obj: KubeObject,
  ctx: RuleContext,
): Promise<Findings> {
  const old = ctx.oldObject;
  if (ctx.operation !== "UPDATE" || !isPod(obj) || !old || !isPod(old))
    return validateEach(policies, obj, ctx);
  if (!containersChanged(obj, old)) return emptyFindings();
  const [now, before] = await Promise.all([
    validateEach(policies, obj, ctx),
    validateEach(policies, old, ctx),
  ]);
  return newFindings(now, before);
}

async function validateEach(
  policies: Policy[],
  obj: KubeObject,
  ctx: RuleContext,
): Promise<Findings> {
  const findings = emptyFindings();
  for (const p of policies) mergeFindings(findings, await validate(p, obj, ctx, policies));
  return findings;
}

/** The findings of `now` that `before` did not have, word for word. */
function newFindings(now: Findings, before: Findings): Findings {
  const key = (v: Violation) => `${v.capability}\u0000${v.rule}\u0000${v.message}`;
  const had = new Set(before.violations.map(key));
  const warned = new Set(before.warnings);
  return {
    ...now,
    violations: now.violations.filter(v => !had.has(key(v))),
    warnings: now.warnings.filter(w => !warned.has(w)),
  };
}

function malformed(policy: Policy, obj: KubeObject, what: string): Violation {
  return {
    capability: policy.name,
    rule: "malformed-object",
    message: `${obj.kind} ${what}`,
    fix:
      obj.kind === "Pod"
        ? "give the Pod a spec with containers"
        : "give the workload a spec.template with a pod spec",
  };
}

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

export interface Review {
  kind: string;
  namespace: string;
  name: string;
  mode: Mode;
  allowed: boolean;
  /** Fixes applied (Pod) or that its pods will get (workload). */
  changes: Change[];
  violations: Violation[];
  warnings: string[];
  /** The object after mutation; for a workload, with its pod template fixed as its pods will be. */
  object: KubeObject;
  /** Whether admission-guard acts on this object at all. */
  handled: boolean;
}

/**
 * The whole admission path for one object, offline: what the mutating and then the validating
 * webhook would do. The input object is not changed.
 */
export async function review(
  policies: Policy[],
  input: KubeObject,
  ctxInput: ContextInput,
): Promise<Review> {
  const ctx = contextFor(input, ctxInput);
  const { mode, warning } = modeOf(ctx);
  const meta = input?.metadata ?? {};
  const base = {
    kind: String(input?.kind ?? ""),
    namespace: ctx.namespaceName,
    name: meta.name || meta.generateName || "",
    mode,
  };
  const handledKind =
    isPod(input) ||
    isWorkload(input) ||
    policies.some(p => p.extraKinds?.includes(input?.kind ?? ""));
  const active = policies.filter(p => policyApplies(p, ctx));
  if (!handledKind || active.length === 0) {
    return {
      ...base,
      allowed: true,
      changes: [],
      violations: [],
      warnings: [],
      object: input,
      handled: false,
    };
  }

  const findings = emptyFindings();
  if (warning) findings.warnings.push(warning);
  let object: KubeObject = input;
  // What the mutating webhook does: fix a Pod on CREATE, a workload's template when it is applied
  // with workloads.mutate on; then what the validating webhook says of the result.
  const mutated =
    (isPod(input) && ctx.operation === "CREATE") ||
    (templateIsFixed(input, ctx.settings) && ctx.operation !== "DELETE");
  // Fixes made (the pod, or the template) and fixes a workload's pods will still get on creation.
  const applied: Change[] = [];
  if (isPod(input) || mutated) {
    object = structuredClone(input);
    if (mutated) {
      const fix = isPod(input) ? fixPod : fixWorkload;
      const { changes, errors } = await fix(policies, object, ctx);
      applied.push(...changes);
      findings.violations.push(...errors);
    }
    mergeFindings(findings, await validateAll(policies, object, ctx));
  } else {
    mergeFindings(findings, await validateAll(policies, input, ctx));
    // Not mutated: the workload as its pods will be, predicted on a copy of its template.
    if (isWorkload(input)) object = (await simulateWorkload(policies, input, ctx))?.copy ?? input;
  }
  const decision = decide(findings, mode);
  const changeLines = [
    ...applied.map(formatChange),
    ...(isWorkload(input) ? pendingWarnings(findings.changes, base.kind) : []),
  ];
  findings.changes.unshift(...applied);
  return {
    ...base,
    allowed: decision.allowed,
    changes: findings.changes,
    violations: findings.violations,
    warnings: mode === "audit" ? [] : [...decision.warnings, ...changeLines],
    object,
    handled: true,
  };
}
