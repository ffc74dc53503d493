// The one rule engine behind all front doors. A request takes the same two steps in the webhook and
// in `check`:
//
//   mutate():  the mutating webhook — the acting policies' fixes, in order, on the object in place
//              (a Pod on CREATE; a workload's own template with workloads.mutate)
//   answer():  the validating webhook — allowed or denied, the denial messages, the warnings and the
//              metric events, for the acting policies
//
// The Pepr bindings (lib/pepr-adapter.ts) call them action by action: each policy area is a Pepr
// capability that fixes Pods with its own policy; Pods and workload templates are judged by shared
// actions with every policy (one binding per kind instead of one per area: docs/bench.md). review()
// — what `check` runs — calls them the same way, action by action, and joins the answers as Pepr
// joins them. The front doors only translate.
import type { ClusterView } from "./cluster";
import {
  applicableExemptions,
  applyExemptions,
  expiredWarning,
  exemptionPath,
  NO_EXEMPTIONS,
  waivedWarning,
  wholeCapabilitiesWaived,
  type ApplicableExemptions,
} from "./exemptions";
import {
  containersChanged,
  hasController,
  isBeingDeleted,
  isPod,
  isWorkload,
  podTemplateOf,
  workloadSpecChanged,
  type KubeObject,
} from "./pod";
import type { Operation, Policy, PodTarget, RuleContext, RuleFindings } from "./policy";
import { isIgnoredNamespace, MODES, NS_KEYS, type Mode, type Settings } from "./settings";
import {
  emptyFindings,
  formatNote,
  formatPendingChange,
  formatViolation,
  mergeFindings,
  type Change,
  type Findings,
  type Violation,
} from "./verdict";

/** One admission request, as the webhook receives it and `check` simulates it. */
export interface AdmissionInput {
  object: KubeObject;
  operation: Operation;
  /** The stored object on UPDATE. */
  oldObject?: KubeObject;
  dryRun: boolean;
  /** The request's namespace, used when the object has none. */
  namespace?: string;
  /** A stored object judged for the reports, not a request (RuleContext.scan). */
  scan?: boolean;
}

/** What every request is answered with: the settings, the cluster, every policy of the module in order. */
export interface EngineDeps {
  settings: Settings;
  cluster: ClusterView;
  policies: Policy[];
}

/** A decision to count on /metrics (lib/metrics.ts). */
export interface DecisionEvent {
  capability: string;
  /** fixed | allowed | denied | allowed-warn | allowed-audit | exempted */
  outcome: string;
  rule?: string;
  /** The Exemption (namespace/name) that waived the rule. */
  exemption?: string;
}

export interface MutateResult {
  changes: Change[];
  /** Fixes that threw: recorded on the object, said by answer() as internal errors. */
  errors: Violation[];
  events: DecisionEvent[];
}

export interface Answer {
  /** Whether an acting policy acts on this object at all (kind, namespace, mode off). */
  handled: boolean;
  mode: Mode;
  allowed: boolean;
  /** Formatted violations that deny (enforce mode). */
  denials: string[];
  /** The admission warnings. */
  warnings: string[];
  /** The violations that stand (an Exemption waived none of them). */
  violations: Violation[];
  /** The violations an Exemption in force waived, with its namespace/name. */
  waived: { violation: Violation; exemption: string }[];
  /** A workload: the fixes its pods will get when they are created. */
  pending: Change[];
  /** A workload: a copy with its pod template fixed by every policy, as its pods will be. */
  predicted?: KubeObject;
  events: DecisionEvent[];
}

export interface ContextInput {
  settings: Settings;
  cluster: ClusterView;
  operation?: Operation;
  /** The request's namespace, used when the object has none. */
  namespace?: string;
  oldObject?: KubeObject;
  dryRun?: boolean;
  scan?: boolean;
  policies?: readonly Policy[];
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
    scan: input.scan ?? false,
    policies: input.policies ?? [],
  };
}

const contextOf = (request: AdmissionInput, deps: EngineDeps) =>
  contextFor(request.object, {
    ...request,
    settings: deps.settings,
    cluster: deps.cluster,
    policies: deps.policies,
  });

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
  return policy.enforcedInEveryMode || modeOf(ctx).mode !== "off";
}

/** The Exemptions in the cluster view that bear on this object. */
function exemptionsFor(obj: KubeObject, ctx: RuleContext): ApplicableExemptions {
  if (!obj || typeof obj !== "object") return NO_EXEMPTIONS;
  return applicableExemptions(obj, ctx.namespaceName, ctx.cluster.exemptions(), ctx.settings);
}

/**
 * Whether this policy is the first of the module's that acts here: what concerns the object rather
 * than one policy (a malformed object, an unknown mode label) is said once, by that policy, and
 * so once whether the policies are asked together (`check`) or capability by capability (Pepr).
 */
function speaksFirst(policy: Policy, ctx: RuleContext, allPolicies: Policy[]): boolean {
  return allPolicies.find(p => !p.onlyExtraKinds && policyApplies(p, ctx)) === policy;
}

// The engine, not each rule, says which capability a finding is from. A rule returns new objects
// on every call, so they are stamped in place (this runs for every finding of every request).
function stamped<T extends object>(policy: Policy, items: T[]): (T & { capability: string })[] {
  for (const item of items) (item as T & { capability: string }).capability = policy.name;
  return items as (T & { capability: string })[];
}

function stampFindings(policy: Policy, found: RuleFindings): Findings {
  return {
    changes: stamped(policy, found.changes),
    violations: stamped(policy, found.violations),
    warnings: found.warnings,
  };
}

function internalError(capability: string, stage: string, reason: string): Violation {
  return {
    capability,
    rule: "internal-error",
    message: `the ${stage} step failed on this object (${reason})`,
    fix: `check the object is well-formed; if it is, report this bug and meanwhile set the namespace to warn mode: kubectl label namespace <ns> ${NS_KEYS.mode}=warn --overwrite`,
  };
}

/** What a thrown value says, for messages and logs. */
export const reasonOf = (e: unknown) => (e instanceof Error ? e.message : String(e));

/** A fix that threw: the capability and what it said. */
interface FixFailure {
  capability: string;
  reason: string;
}

const fixFailureViolation = (f: FixFailure) => internalError(f.capability, "fix", f.reason);

/**
 * Runs the policies' fixes on a pod spec in place. A fix that throws is recorded, never rethrown.
 * A capability an Exemption waives whole is not fixed either: the object stays as its author wrote it.
 */
async function runFixes(
  policies: Policy[],
  target: PodTarget,
  ctx: RuleContext,
  exemptions: ApplicableExemptions,
): Promise<{ changes: Change[]; failures: FixFailure[] }> {
  const changes: Change[] = [];
  const failures: FixFailure[] = [];
  const waivedWhole = wholeCapabilitiesWaived(exemptions);
  for (const policy of policies) {
    if (!policy.fix || !policyApplies(policy, ctx) || waivedWhole.has(policy.name)) continue;
    try {
      changes.push(...stamped(policy, await policy.fix(target, ctx)));
    } catch (e) {
      failures.push({ capability: policy.name, reason: reasonOf(e) });
    }
  }
  return { changes, failures };
}

/** Whether a workload's own template is fixed when it is applied (see mutate). */
export function templateIsFixed(workload: KubeObject, settings: Settings): boolean {
  return settings.workloads.mutate && isWorkload(workload) && !hasController(workload);
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
  const obj = request.object;
  const ctx = contextOf(request, deps);
  const template = podTemplateOf(obj);
  let result = { changes: [] as Change[], failures: [] as FixFailure[] };
  if (template && isPod(obj) && request.operation === "CREATE") {
    const target = { object: obj, template, isTemplate: false };
    result = await runFixes(acting, target, ctx, exemptionsFor(obj, ctx));
    recordFixes(obj, result.changes);
    recordFixFailures(obj, result.failures);
  } else if (template && templateIsFixed(obj, deps.settings) && request.operation !== "DELETE") {
    const target = { object: obj, template, isTemplate: true, applied: true };
    result = await runFixes(acting, target, ctx, exemptionsFor(obj, ctx));
    recordFixes({ metadata: template.metadata }, result.changes);
  }
  const events = result.changes.map(c => ({
    capability: c.capability,
    outcome: "fixed",
    rule: c.rule,
  }));
  return { changes: result.changes, errors: result.failures.map(fixFailureViolation), events };
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
  // Read by every capability's validation of every pod: one pass, no copies.
  for (const entry of value.split(",")) {
    const slash = entry.indexOf("/");
    const capability = entry.slice(0, slash).trim();
    const rule = entry.slice(slash + 1).trim();
    if (slash < 0 || !capability || !rule) continue;
    const rules = out.get(capability);
    if (rules) rules.push(rule);
    else out.set(capability, [rule]);
  }
  return out;
}

/** One capability's line of the trace: `admission-guard/<capability>: fixed rule, rule`. */
const fixedNote = (capability: string, rules: string[]) =>
  formatNote(capability, `fixed ${rules.join(", ")}`);

/** The trace annotation's summary as warnings, for these policies in their order. */
export function fixedNotes(fixed: Map<string, string[]>, policies: Policy[]): string[] {
  return policies.flatMap(p => {
    const rules = fixed.get(p.name);
    return rules?.length ? [fixedNote(p.name, rules)] : [];
  });
}

/** The changes' summary as answer() words it, through the same trace annotation (for reports). */
export function fixedNotesOf(changes: Change[]): string[] {
  const traced: KubeObject = {};
  recordFixes(traced, changes);
  return [...recordedFixes(traced)].map(([capability, rules]) => fixedNote(capability, rules));
}

/** Fixes that threw, by capability, in an annotation: the mutating webhook cannot deny with a message. */
function recordFixFailures(obj: KubeObject, failures: FixFailure[]): void {
  if (!failures.length) return;
  const annotations = ((obj.metadata ??= {}).annotations ??= {});
  const failed = recordedFixFailures(obj);
  for (const f of failures) failed.set(f.capability, f.reason);
  annotations[NS_KEYS.fixFailed] = JSON.stringify(Object.fromEntries([...failed].sort()));
}

function recordedFixFailures(obj: KubeObject): Map<string, string> {
  const value = obj.metadata?.annotations?.[NS_KEYS.fixFailed];
  if (typeof value !== "string") return new Map();
  try {
    const parsed: unknown = JSON.parse(value);
    if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) return new Map();
    return new Map(Object.entries(parsed).map(([k, v]) => [k, String(v).slice(0, 500)]));
  } catch {
    return new Map();
  }
}

interface Simulation {
  copy: KubeObject;
  target: PodTarget;
  changes: Change[];
  failures: FixFailure[];
}

/** A copy of a workload whose pod template has had every policy's fix applied: its pods as they will run. */
async function simulateWorkload(
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

/**
 * One policy's validation of an object as it will be stored. For a workload, the checks see the
 * template with every policy's fix applied (the simulation), and the policy's own pending fixes
 * come back as changes.
 */
async function validate(
  policy: Policy,
  obj: KubeObject,
  ctx: RuleContext,
  allPolicies: Policy[],
  simulation?: Simulation,
): Promise<Findings> {
  const findings = emptyFindings();
  if (!policyApplies(policy, ctx) || !obj || typeof obj !== "object") return findings;
  try {
    if (isPod(obj)) {
      const template = podTemplateOf(obj);
      const failed = recordedFixFailures(obj).get(policy.name);
      if (failed !== undefined && ctx.operation === "CREATE")
        findings.violations.push(internalError(policy.name, "fix", failed));
      if (!template) {
        if (speaksFirst(policy, ctx, allPolicies))
          findings.violations.push(malformed(policy, obj, "has no spec"));
      } else if (policy.check && !policy.onlyExtraKinds) {
        const target = { object: obj, template, isTemplate: false };
        mergeFindings(findings, stampFindings(policy, await policy.check(obj, target, ctx)));
      }
    } else if (isWorkload(obj)) {
      if (!simulation) {
        if (speaksFirst(policy, ctx, allPolicies))
          findings.violations.push(malformed(policy, obj, "has no pod template"));
      } else {
        findings.changes.push(...simulation.changes.filter(c => c.capability === policy.name));
        for (const f of simulation.failures)
          if (f.capability === policy.name) findings.violations.push(fixFailureViolation(f));
        if (policy.check && !policy.onlyExtraKinds) {
          const found = await policy.check(simulation.copy, simulation.target, ctx);
          mergeFindings(findings, stampFindings(policy, found));
        }
      }
    } else if (policy.check && policy.extraKinds?.includes(obj.kind ?? "")) {
      mergeFindings(findings, stampFindings(policy, await policy.check(obj, undefined, ctx)));
    }
  } catch (e) {
    findings.violations.push(internalError(policy.name, "check", reasonOf(e)));
  }
  return findings;
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

/**
 * Whether an object is judged at all, before any policy runs: the one gate for what makes no new
 * pod, as Pod Security Admission has one (isSignificantPodUpdate).
 * - A workload a controller made (a Deployment's ReplicaSet, a CronJob's Job) is its owner's
 *   template: judged when the owner was applied, and its pods are judged one by one as they are
 *   created. Judging it again would stall a rollout in a namespace whose quota is full (the new
 *   ReplicaSet counted whole, where the rollout adds only its surge) or after a rule changed.
 * - An object being deleted is never refused (its finalizers are being removed).
 * - A workload UPDATE that leaves its spec alone (labels, annotations, finalizers, status) makes
 *   no pod; a Pod UPDATE that leaves its containers alone changes nothing a rule judges.
 */
export function needsJudging(
  obj: KubeObject,
  ctx: Pick<RuleContext, "operation" | "oldObject">,
): boolean {
  if (isWorkload(obj) && hasController(obj)) return false;
  if (ctx.operation !== "UPDATE" || !ctx.oldObject) return true;
  if (isBeingDeleted(obj)) return false;
  if (isPod(obj) && isPod(ctx.oldObject)) return containersChanged(obj, ctx.oldObject);
  if (isWorkload(obj)) return workloadSpecChanged(obj, ctx.oldObject);
  return true;
}

/**
 * The acting policies' validation of an object, in order, merged.
 *
 * An UPDATE that needsJudging (a changed image, an added ephemeral container, a workload's new
 * template or more replicas) is judged on what it changes: every policy judges the object as it
 * will be stored and as it is stored, and only what the stored one did not already have counts —
 * an object admitted earlier (under another mode or older rules) is never refused an update for
 * something it had since its creation, and a scale-down is never refused.
 */
async function validateAll(
  acting: Policy[],
  obj: KubeObject,
  ctx: RuleContext,
  allPolicies: Policy[],
  exemptions: ApplicableExemptions,
): Promise<Validation> {
  if (!needsJudging(obj, ctx)) return { findings: emptyFindings() };
  const old = ctx.oldObject;
  const comparable = old && (isPod(obj) ? isPod(old) : isWorkload(obj) && isWorkload(old));
  if (ctx.operation !== "UPDATE" || !comparable)
    return validateEach(acting, obj, ctx, allPolicies, exemptions);
  const [now, before] = await Promise.all([
    validateEach(acting, obj, ctx, allPolicies, exemptions),
    validateEach(acting, old, ctx, allPolicies, exemptions),
  ]);
  // A workload's pending fixes are what its pods will get, whatever the stored one had.
  return {
    findings: { ...newFindings(now.findings, before.findings), changes: now.findings.changes },
    simulation: now.simulation,
  };
}

/** The findings, and for a workload the simulation they were judged on. */
interface Validation {
  findings: Findings;
  simulation?: Simulation;
}

async function validateEach(
  acting: Policy[],
  obj: KubeObject,
  ctx: RuleContext,
  allPolicies: Policy[],
  exemptions: ApplicableExemptions,
): Promise<Validation> {
  // A workload's template is fixed once, with every policy, for all the acting ones.
  const simulation = isWorkload(obj)
    ? await simulateWorkload(allPolicies, obj, ctx, exemptions)
    : undefined;
  const findings = emptyFindings();
  for (const p of acting)
    mergeFindings(findings, await validate(p, obj, ctx, allPolicies, simulation));
  return { findings, simulation };
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

/** Whether a policy judges this object's kind: Pods and workloads, or one of its extra kinds. */
export function judgesObject(policy: Policy, obj: KubeObject): boolean {
  return isPod(obj) || isWorkload(obj)
    ? !policy.onlyExtraKinds
    : !!policy.extraKinds?.includes(obj?.kind ?? "");
}

/**
 * The validating webhook's answer for the acting policies: the decision in the namespace's mode,
 * the warnings (what the mutating webhook fixed, from the trace it left; what a workload's pods
 * will get), and the events to count.
 */
export async function answer(
  request: AdmissionInput,
  deps: EngineDeps,
  acting: Policy[],
): Promise<Answer> {
  const obj = request.object;
  const ctx = contextOf(request, deps);
  // The Exemptions' own validation holds in every namespace, whatever its mode label says.
  const { mode, warning } = acting.every(p => p.enforcedInEveryMode)
    ? { mode: "enforce" as const, warning: undefined }
    : modeOf(ctx);
  // A policy acts on this object when it applies here and judges its kind (the Exemptions' policy,
  // which holds in every mode, never makes a Pod in a namespace that is off "handled").
  const active = acting.filter(p => policyApplies(p, ctx) && judgesObject(p, obj));
  const none: Answer = {
    handled: false,
    mode,
    allowed: true,
    denials: [],
    warnings: [],
    violations: [],
    waived: [],
    pending: [],
    events: [],
  };
  if (!active.length) return none;

  // Exemptions waive what would otherwise stand (and, waiving a whole capability, its fixes in a
  // workload's simulation); an expired one that matches says so, and counts no more.
  const exemptions = exemptionsFor(obj, ctx);
  const { findings, simulation } = await validateAll(acting, obj, ctx, deps.policies, exemptions);
  if (warning && speaksFirst(active[0], ctx, deps.policies)) findings.warnings.unshift(warning);
  const waivable = (v: Violation) =>
    !deps.policies.find(p => p.name === v.capability)?.notWaivable?.[v.rule];
  const { standing, waived } = applyExemptions(findings.violations, exemptions, waivable);
  findings.violations = standing;
  if (mode !== "audit") {
    findings.warnings.push(...waived.map(waivedWarning));
    findings.warnings.push(...exemptions.expired.map(expiredWarning));
  }
  const decision = decide(findings, mode);
  const wayOut = decision.allowed ? undefined : exemptionPath(standing, deps.settings, waivable);
  if (wayOut) decision.denials.push(wayOut);
  const warnings = [...decision.warnings];
  const pending = isWorkload(obj) ? findings.changes : [];
  if (mode !== "audit") {
    if (isPod(obj) && ctx.operation === "CREATE")
      warnings.push(...fixedNotes(recordedFixes(obj), active));
    const template = podTemplateOf(obj);
    if (template && templateIsFixed(obj, deps.settings))
      warnings.push(...fixedNotes(recordedFixes({ metadata: template.metadata }), active));
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
  return {
    handled: true,
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
 * The mutating actions Pepr runs on an object, in order, each with the policies it acts for
 * (capabilities/index.ts): each area's own fix on a Pod; every area's fixes on a workload template.
 */
function mutatorsFor(policies: Policy[], obj: KubeObject): Policy[][] {
  if (isPod(obj)) return policies.filter(p => p.fix).map(p => [p]);
  return isWorkload(obj) ? [policies] : [];
}

/**
 * The validating actions Pepr runs on an object: one shared action with every policy on a Pod or
 * a workload (capabilities/pods, capabilities/workloads); each area's own on its extra kinds.
 */
function validatorsFor(policies: Policy[], obj: KubeObject): Policy[][] {
  if (isPod(obj) || isWorkload(obj)) return [policies];
  return policies.filter(p => p.extraKinds?.includes(obj?.kind ?? "")).map(p => [p]);
}

export interface Review {
  kind: string;
  namespace: string;
  name: string;
  mode: Mode;
  allowed: boolean;
  /** Fixes applied (Pod, or a template with workloads.mutate) and that a workload's pods will get. */
  changes: Change[];
  violations: Violation[];
  /** Violations an Exemption waived, with its namespace/name. */
  waived: { violation: Violation; exemption: string }[];
  /** The denial messages, as the webhook joins them with "; ". */
  denials: string[];
  /** The admission warnings, as the webhook returns them. */
  warnings: string[];
  /** The object after mutation; for a workload not mutated, its pod template fixed as its pods will be. */
  object: KubeObject;
  /** Whether admission-guard acts on this object at all. */
  handled: boolean;
}

/**
 * The whole admission path for one object, offline (what `check` prints): the mutating step and
 * the validating step, capability by capability as the webhook runs them, joined as Pepr joins
 * them (denials in capability order, warnings concatenated). The input object is not changed.
 */
export async function review(
  policies: Policy[],
  input: KubeObject,
  ctxInput: ContextInput,
): Promise<Review> {
  const deps: EngineDeps = { settings: ctxInput.settings, cluster: ctxInput.cluster, policies };
  const object = structuredClone(input);
  const request: AdmissionInput = {
    object,
    operation: ctxInput.operation ?? "CREATE",
    oldObject: ctxInput.oldObject,
    dryRun: ctxInput.dryRun ?? false,
    namespace: ctxInput.namespace,
  };
  const ctx = contextOf(request, deps);
  const meta = input?.metadata ?? {};
  const base = {
    kind: String(input?.kind ?? ""),
    namespace: ctx.namespaceName,
    name: meta.name || meta.generateName || "",
    mode: modeOf(ctx).mode,
  };

  const changes: Change[] = [];
  for (const acting of mutatorsFor(policies, object))
    changes.push(...(await mutate(request, deps, acting)).changes);
  const answers: Answer[] = [];
  for (const acting of validatorsFor(policies, object))
    answers.push(await answer(request, deps, acting));

  const handled = answers.some(a => a.handled);
  // A workload not mutated is shown as its pods will be: the copy its validation was judged on.
  const predicted = answers.find(a => a.predicted)?.predicted;
  const result =
    isWorkload(input) && !templateIsFixed(input, deps.settings) ? (predicted ?? input) : object;
  return {
    ...base,
    allowed: answers.every(a => a.allowed),
    changes: [...changes, ...answers.flatMap(a => a.pending)],
    violations: answers.flatMap(a => a.violations),
    waived: answers.flatMap(a => a.waived),
    denials: answers.flatMap(a => a.denials),
    warnings: answers.flatMap(a => a.warnings),
    object: handled ? result : input,
    handled,
  };
}
