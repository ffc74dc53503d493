// Where an object is judged: its namespace, the namespace's mode, which policies act there, and the
// Exemptions that bear on it.
import { applicableExemptions, NO_EXEMPTIONS, type ApplicableExemptions } from "../exemptions";
import { isPod, isWorkload, type KubeObject } from "../pod";
import type { Policy, RuleContext } from "../policy";
import { isIgnoredNamespace, MODES, NS_KEYS, type Mode } from "../settings";
import type { WorkloadKindSpec } from "../workload-kinds/kind-spec";
import { kindsInForce } from "../workload-kinds/in-force";
import type { AdmissionInput, ContextInput, EngineDeps } from "./types";
import { storedVersionOf } from "./update-gate";

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

// The webhook's request object is the same for every capability's action on it: its deadline is
// set when the first action sees it, so the actions share one budget.
const deadlines = new WeakMap<object, number>();

/** The deadline of an admission request (epoch ms): its arrival plus images.budgetMs. */
export function deadlineOf(request: object, budgetMs: number, now = Date.now()): number {
  let deadline = deadlines.get(request);
  if (deadline === undefined) deadlines.set(request, (deadline = now + budgetMs));
  return deadline;
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
export function modeOf(ctx: RuleContext): { mode: Mode; warning?: string } {
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
 * The one decision of whether a policy acts on objects in this context: not in the system or
 * ignored namespaces, only in its own namespaces if it names some, not where the mode is off
 * (unless it holds in every mode), not when its settings section is switched off. The fixes, the
 * checks, the answer's "handled", the metrics and the reports all read it.
 */
export function applicability(policy: Policy, ctx: RuleContext): Applicability {
  if (isIgnoredNamespace(ctx.namespaceName, ctx.settings)) return "ignored-namespace";
  if (policy.namespaces?.length && !policy.namespaces.includes(ctx.namespaceName))
    return "not-its-namespace";
  if (!policy.enforcedInEveryMode && modeOf(ctx).mode === "off") return "mode-off";
  if (policy.switchedBy && !ctx.settings[policy.switchedBy].enabled) return "disabled";
  return "applies";
}

export const policyApplies = (policy: Policy, ctx: RuleContext): boolean =>
  applicability(policy, ctx) === "applies";

/** The Exemptions in the cluster view that bear on this object. */
export function exemptionsFor(obj: KubeObject, ctx: RuleContext): ApplicableExemptions {
  if (!obj || typeof obj !== "object") return NO_EXEMPTIONS;
  return applicableExemptions(obj, ctx.namespaceName, ctx.cluster.exemptions(), ctx.settings);
}

/** Whether a policy judges this object's kind: Pods and workloads, or one of its extra kinds. */
export function judgesObject(
  policy: Policy,
  obj: KubeObject,
  platformKinds?: readonly WorkloadKindSpec[],
): boolean {
  return isPod(obj) || isWorkload(obj, platformKinds)
    ? !policy.onlyExtraKinds
    : !!policy.extraKinds?.includes(obj?.kind ?? "");
}

/**
 * Whether this policy is the first of the module's that judges this object here: what concerns the
 * object rather than one policy (a malformed object, an unknown mode label) is said once, by that
 * policy, and so once whether the policies are asked together (`check`) or capability by
 * capability (Pepr), for a ConfigMap as for a Pod.
 */
export function speaksFirst(
  policy: Policy,
  obj: KubeObject,
  ctx: RuleContext,
  allPolicies: Policy[],
): boolean {
  const kinds = kindsInForce(ctx.settings.workloads);
  return allPolicies.find(p => judgesObject(p, obj, kinds) && policyApplies(p, ctx)) === policy;
}
