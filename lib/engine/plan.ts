// Stage 1 of every step: where an object is judged and who judges it, decided once per step (a
// request has one Mutate and one Validate: docs/adr/0030) —
// its namespace and that namespace's mode, the stored version an UPDATE is compared with, which
// policies act (and why the others do not), which one speaks for the module, and the Exemptions
// that bear on it. The fixes (fixes.ts) and the checks (checks.ts) read the plan; nothing after
// this stage decides again whether a policy acts.
import { applicableExemptions, NO_EXEMPTIONS, type ApplicableExemptions } from "../exemptions";
import { hasController, isPod, type KubeObject } from "../objects/pod";
import { isWorkload } from "../workload-kinds/built-in";
import { declares, type Operation, type Policy, type RuleContext } from "./policy";
import { isIgnoredNamespace, MODES, NS_KEYS, type Mode, type Settings } from "../settings";
import type { WorkloadKindSpec } from "../workload-kinds/kind-spec";
import { kindsInForce } from "../workload-kinds/in-force";
import { workloadKindOf } from "../workload-kinds/roles";
import type { AdmissionInput, ContextInput, EngineDeps } from "./types";
import { needsJudging, storedVersionOf } from "./update-gate";

export function contextFor(obj: KubeObject, input: ContextInput): RuleContext {
  const namespaceName = obj?.metadata?.namespace || input.namespace || "";
  return {
    settings: input.settings,
    cluster: input.cluster,
    namespaceName,
    namespace: namespaceName ? input.cluster.namespace(namespaceName) : undefined,
    operation: input.operation ?? "CREATE",
    stored: storedVersionOf(
      obj,
      input.operation ?? "CREATE",
      input.oldObject,
      input.settings,
      input.cluster,
      namespaceName,
    ),
    dryRun: input.dryRun ?? false,
    scan: input.scan ?? false,
    policies: input.policies ?? [],
    deadline: input.deadline ?? Date.now() + input.settings.images.budgetMs,
    user: input.user,
  };
}

// Field by field, not `{ ...request, settings, ... }`: a spread followed by keys its source lacks
// costs microseconds in this V8 (every action of every request builds one; docs/bench.md).
export const contextOf = (request: AdmissionInput, deps: EngineDeps) =>
  contextFor(request.object, {
    settings: deps.settings,
    cluster: deps.cluster,
    policies: deps.policies,
    operation: request.operation,
    namespace: request.namespace,
    oldObject: request.oldObject,
    dryRun: request.dryRun,
    scan: request.scan,
    deadline: request.deadline,
    user: request.user,
  });

/** The namespace's mode label, else the default mode. An unknown label value counts as enforce and is reported. */
export function modeOf(ctx: Pick<RuleContext, "namespace" | "namespaceName" | "settings">): {
  mode: Mode;
  warning?: string;
} {
  const label = ctx.namespace?.labels[NS_KEYS.mode];
  if (label === undefined) return { mode: ctx.settings.mode };
  if ((MODES as readonly string[]).includes(label)) return { mode: label as Mode };
  return {
    mode: "enforce",
    warning: `admission-guard: namespace ${ctx.namespaceName} has ${NS_KEYS.mode}="${label}", which is not one of ${MODES.join("|")}; enforcing. Fix: kubectl label namespace ${ctx.namespaceName} ${NS_KEYS.mode}=warn --overwrite`,
  };
}

/** Why a policy does not act in a context, or "applies". */
export type Applicability =
  | "applies"
  | "ignored-namespace"
  | "not-its-namespace"
  | "mode-off"
  | "disabled";

/**
 * Whether a policy acts on objects in a namespace in this mode: not in the system or ignored
 * namespaces, only in its own namespaces if it names some, not where the mode is off, not when its
 * settings section is switched off. (The Exemptions' validator is no policy: it answers in every
 * mode, on its own binding: answer.ts, validatorAnswer.)
 */
function applicabilityIn(
  policy: Policy,
  namespaceName: string,
  mode: Mode,
  settings: Settings,
): Applicability {
  if (isIgnoredNamespace(namespaceName, settings)) return "ignored-namespace";
  if (policy.namespaces?.length && !policy.namespaces.includes(namespaceName))
    return "not-its-namespace";
  if (mode === "off") return "mode-off";
  if (policy.switchedBy && !settings[policy.switchedBy].enabled) return "disabled";
  return "applies";
}

/** applicabilityIn for a rule context (what the reports and the tests ask). */
export const applicability = (policy: Policy, ctx: RuleContext): Applicability =>
  applicabilityIn(policy, ctx.namespaceName, modeOf(ctx).mode, ctx.settings);

export const policyApplies = (policy: Policy, ctx: RuleContext): boolean =>
  applicability(policy, ctx) === "applies";

/** Whether a policy's declaration has it judge this object (its check) on this operation. */
export function judgesObject(
  policy: Policy,
  obj: KubeObject,
  platformKinds?: readonly WorkloadKindSpec[],
  operation: Operation = "CREATE",
): boolean {
  const shape = isPod(obj) ? "pod" : isWorkload(obj, platformKinds) ? "workload" : "other";
  return declares(policy, "check", TARGET_OF[shape], operation, obj);
}

/**
 * Whether a workload's own template is fixed when it is applied (workloads.mutate): not one a
 * controller made (its template is its owner's), nor a kind whose pods are built in code.
 */
export function templateIsFixed(workload: KubeObject, settings: Settings): boolean {
  const kinds = kindsInForce(settings.workloads);
  return (
    settings.workloads.mutate &&
    isWorkload(workload, kinds) &&
    !hasController(workload) &&
    // Pods built in code (an InferenceService's) have no template of their own to fix in place.
    !workloadKindOf(workload, kinds)?.builtBy
  );
}

/** What the object is to the engine. */
export type Shape = "pod" | "workload" | "other";

/** Everything the fixes, the checks and the answer read, decided once for one request and step. */
export interface Plan {
  object: KubeObject;
  deps: EngineDeps;
  ctx: RuleContext;
  shape: Shape;
  kinds: readonly WorkloadKindSpec[];
  /** The namespace's mode. */
  mode: Mode;
  /** An unknown mode label, said once by `speaker`. */
  modeWarning?: string;
  /** The step's policies that judge this object's kind, and whether each acts here. */
  judging: Policy[];
  applies: ReadonlyMap<Policy, Applicability>;
  /** Those that act: they fix, check and count. */
  active: Policy[];
  /** A workload whose own template is fixed when applied (templateIsFixed). */
  templateFixed: boolean;
  // The validating step's alone (empty or unset in the mutating step's plan):
  /** Every policy of the module that acts here, in order: a workload's pods get all their fixes. */
  allActive: Policy[];
  /**
   * The first policy of the module that judges this object and acts here: what concerns the
   * object rather than one policy (a malformed object, an unknown mode label) is said by it alone,
   * so once per answer.
   */
  speaker?: Policy;
  /** Whether the object is judged at all (the update gate: update-gate.ts). */
  judged: boolean;
  /** The Exemptions that bear on the object. */
  exemptions: ApplicableExemptions;
}

/** The declared target (Policy.acts) an object of this shape is. */
const TARGET_OF = { pod: "pods", workload: "templates", other: "kinds" } as const;

/**
 * Whether a policy takes part in a step on this object and operation, as it declares: its fix in
 * the mutating step; its check in the validating one, which also says what its fix did on the
 * same object (a fix that threw is denied there; a workload's pods' fixes are warned).
 */
function takesPart(
  p: Policy,
  step: "mutate" | "validate",
  target: (typeof TARGET_OF)[Shape],
  operation: Operation,
  obj: KubeObject,
): boolean {
  if (step === "mutate") return target !== "kinds" && declares(p, "fix", target, operation);
  return (
    declares(p, "check", target, operation, obj) ||
    (target !== "kinds" && declares(p, "fix", target, operation))
  );
}

/** Whether a policy acts where the object is, its applicability worked out once per plan. */
function actsHere(
  p: Policy,
  where: {
    applies: Map<Policy, Applicability>;
    namespace: string;
    mode: Plan["mode"];
    deps: EngineDeps;
  },
): boolean {
  let found = where.applies.get(p);
  if (found === undefined)
    where.applies.set(
      p,
      (found = applicabilityIn(p, where.namespace, where.mode, where.deps.settings)),
    );
  return found === "applies";
}

/** Stage 1: the plan for one request's step with these acting policies. */
export function planOf(
  request: AdmissionInput,
  deps: EngineDeps,
  acting: Policy[],
  step: "mutate" | "validate",
): Plan {
  const obj = request.object;
  const ctx = contextOf(request, deps);
  const kinds = kindsInForce(deps.settings.workloads);
  const shape: Shape = isPod(obj) ? "pod" : isWorkload(obj, kinds) ? "workload" : "other";
  const namespaceMode = modeOf(ctx);
  // No named closures here: the bundle names each one it creates (keepNames), on every request.
  const applies = new Map<Policy, Applicability>();
  const where = { applies, namespace: ctx.namespaceName, mode: namespaceMode.mode, deps };
  // Only the policies that declare this step on this object and operation (Policy.acts).
  const target = TARGET_OF[shape];
  const judging = acting.filter(p => takesPart(p, step, target, request.operation, obj));
  const active = judging.filter(p => actsHere(p, where));
  const exemptions =
    active.length && obj && typeof obj === "object"
      ? applicableExemptions(obj, ctx.namespaceName, deps.cluster.exemptions(), deps.settings)
      : NO_EXEMPTIONS;
  // A mutating step (one capability's fixes on a Pod) asks nothing of the module's other policies.
  const validating = step === "validate" && active.length > 0;
  return {
    object: obj,
    deps,
    ctx,
    shape,
    kinds,
    mode: namespaceMode.mode,
    modeWarning: namespaceMode.warning,
    judging,
    applies,
    active,
    templateFixed: shape === "workload" && templateIsFixed(obj, deps.settings),
    // What its pods will get: the fixes declared on Pod CREATE.
    allActive:
      validating && shape === "workload"
        ? deps.policies.filter(p => declares(p, "fix", "pods", "CREATE") && actsHere(p, where))
        : [],
    speaker: validating
      ? deps.policies.find(
          p => takesPart(p, step, target, request.operation, obj) && actsHere(p, where),
        )
      : undefined,
    judged: validating && needsJudging(obj, ctx),
    exemptions,
  };
}
