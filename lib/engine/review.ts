// The whole admission path for one object, offline (what `check` runs): Pepr's dispatch replayed
// binding by binding, from the routes Pepr's bindings are registered from (routes.ts, made from
// every capability's declaration).
import { kindsInForce } from "../workload-kinds/in-force";
import type { KubeObject } from "../objects/pod";
import { isWorkload } from "../workload-kinds/built-in";
import type { Policy, Validator } from "./policy";
import type { Mode } from "../settings";
import type { Change, Skip, Violation } from "../objects/verdict";
import { answer, validatorAnswer } from "./answer";
import { contextOf, modeOf, templateIsFixed } from "./plan";
import { mutate } from "./fixes";
import { routeMatches, routesOf } from "./routes";
import type { AdmissionInput, Answer, ContextInput, EngineDeps } from "./types";

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
  /** The policies that judged it, in the module's order. */
  judgedBy: Policy[];
  /** Rules not evaluated, with why. */
  skipped: Skip[];
}

/**
 * The whole admission path for one object, offline (what `check` prints): the mutating step and
 * the validating step, binding by binding as the webhook runs them, joined as Pepr joins
 * them (denials in capability order, warnings concatenated). The input object is not changed.
 * `validators` judge the module's own objects (an Exemption), as their bindings do.
 */
export async function review(
  policies: Policy[],
  input: KubeObject,
  ctxInput: ContextInput,
  validators: readonly Validator[] = [],
): Promise<Review> {
  const deps: EngineDeps = { settings: ctxInput.settings, cluster: ctxInput.cluster, policies };
  const object = structuredClone(input);
  const request: AdmissionInput = {
    object,
    operation: ctxInput.operation ?? "CREATE",
    oldObject: ctxInput.oldObject,
    dryRun: ctxInput.dryRun ?? false,
    namespace: ctxInput.namespace,
    user: ctxInput.user,
  };
  const ctx = contextOf(request, deps);
  const meta = input?.metadata ?? {};
  const base = {
    kind: String(input?.kind ?? ""),
    namespace: ctx.namespaceName,
    name: meta.name || meta.generateName || "",
    mode: modeOf(ctx).mode,
  };

  // Pepr's dispatch, from the one table of routes: every mutating action on the object in order
  // (the mutating webhook), then every validating one.
  const routes = routesOf(policies, deps.settings, validators).filter(r =>
    routeMatches(r, object, request.operation, deps.settings),
  );
  const changes: Change[] = [];
  // One mutating route at most receives an object (Pods or templates).
  if (routes.some(r => r.step === "mutate"))
    changes.push(...(await mutate(request, deps, policies)).changes);
  const answers: Answer[] = [];
  for (const route of routes.filter(r => r.step === "validate")) {
    const validator = validators.find(v => v.name === route.capability);
    answers.push(
      route.target === "own-objects" && validator
        ? validatorAnswer(request, deps, validator)
        : await answer(request, deps, policies),
    );
  }
  const kinds = kindsInForce(deps.settings.workloads);

  const handled = answers.some(a => a.handled);
  // A workload not mutated is shown as its pods will be: the copy its validation was judged on.
  const predicted = answers.find(a => a.predicted)?.predicted;
  const result =
    isWorkload(input, kinds) && !templateIsFixed(input, deps.settings)
      ? (predicted ?? input)
      : object;
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
    judgedBy: policies.filter(p => answers.some(a => a.judgedBy.includes(p))),
    skipped: answers.flatMap(a => a.skipped),
  };
}
