// The Pepr front door. Each policy area is a Pepr Capability made by capabilityOf from its policy
// (capabilities/<area>/index.ts, where its declaration says what it acts on); the module's one
// Mutate and one Validate are the shared capability `admission`'s When(...) bindings, registered
// by bindAdmission from every capability's declaration (lib/engine/routes.ts). Their actions
// decide nothing: an action turns Pepr's request into the engine's (lib/engine), runs the engine
// with the module's policies (each acts only on what it declares), and turns the answer into
// Pepr's (a mutated object, Approve with warnings, or Deny with the message), counting the
// decisions and logging denials on the way. Why one step each: docs/adr/0030.
import { a, Capability, Log, type PeprMutateRequest, type PeprValidateRequest } from "pepr";
import type { KubernetesObject } from "kubernetes-fluent-client";
import {
  answer,
  mutate,
  reasonOf,
  validatorAnswer,
  type AdmissionInput,
  type DecisionEvent,
  type EngineDeps,
} from "../engine";
import { recordDecision } from "../metrics";
import type { KubeObject } from "../objects/pod";
import type { Operation, Policy, Validator } from "../engine/policy";
import type { Settings } from "../settings";
import {
  admissionRoutes,
  bindingsOf,
  isGroupBinding,
  routeMatches,
  validatorRoutes,
  type Route,
} from "../engine/routes";

type Request = PeprMutateRequest<KubernetesObject> | PeprValidateRequest<KubernetesObject>;

// What every action answers with: the settings, the live cluster view and the module's policies.
// Set once by pepr.ts before the controller starts; the capabilities are defined before that (at
// import, as Pepr's capabilities are), so their actions read it when a request comes.
let deps: EngineDeps | undefined;

/** Called by pepr.ts (and by tests that run the actions) before any request. */
export function configureAdmission(configured: EngineDeps): void {
  deps = configured;
}

function configured(): EngineDeps {
  if (!deps)
    throw new Error("admission-guard: configureAdmission() was not called before a request");
  return deps;
}

// Which policy each capability runs: pepr.ts and `check` read the policies from the list of
// capabilities, so a capability added to that list acts in the webhook and in `check` alike.
const policyOfCapability = new WeakMap<Capability, Policy>();

// Which validator each capability runs, likewise.
const validatorOfCapability = new WeakMap<Capability, Validator>();

/** The validators of these capabilities, in their order. */
export function validatorsOf(capabilities: Capability[]): Validator[] {
  return capabilities.flatMap(c => {
    const validator = validatorOfCapability.get(c);
    return validator ? [validator] : [];
  });
}

/** The policies of these capabilities, in their order (capabilities without one, e.g. workloads, left out). */
export function policiesOf(capabilities: Capability[]): Policy[] {
  return capabilities.flatMap(c => {
    const policy = policyOfCapability.get(c);
    return policy ? [policy] : [];
  });
}

// Pepr's request object is the same for every capability's action on it: its deadline is set when
// the first action sees it, so the actions share one budget.
const deadlines = new WeakMap<object, number>();

/** The deadline of an admission request (epoch ms): its arrival plus images.budgetMs. */
function deadlineOf(request: object, budgetMs: number, now = Date.now()): number {
  let deadline = deadlines.get(request);
  if (deadline === undefined) deadlines.set(request, (deadline = now + budgetMs));
  return deadline;
}

function inputOf(req: Request): AdmissionInput {
  const r = req.Request;
  return {
    object: req.Raw as KubeObject,
    operation: r.operation as Operation,
    oldObject: (r.oldObject as KubeObject | undefined) ?? undefined,
    dryRun: r.dryRun === true,
    namespace: r.namespace,
    // One budget from the request's arrival, shared by every capability's action on it.
    deadline: deadlineOf(r, configured().settings.images.budgetMs),
    // Whose word "made by a controller" is (lib/engine/update-gate.ts).
    user: r.userInfo?.username,
  };
}

/** The engine's input, once the namespace it is judged in is known (see ClusterView.settle). */
async function settledInputOf(req: Request): Promise<AdmissionInput> {
  const input = inputOf(req);
  const namespace = input.object?.metadata?.namespace || input.namespace;
  if (namespace) await configured().cluster.settle?.(namespace);
  return input;
}

/**
 * The decisions on /metrics: one increment per capability, rule and outcome, by how many events
 * it had (a pod author chooses how many containers, hence events, a request brings).
 */
function countDecisions(events: readonly DecisionEvent[]): void {
  const groups = new Map<string, { event: DecisionEvent; count: number }>();
  for (const event of events) {
    const key = `${event.capability}\0${event.rule ?? ""}\0${event.outcome}`;
    const group = groups.get(key);
    if (group) group.count++;
    else groups.set(key, { event, count: 1 });
  }
  for (const { event, count } of groups.values())
    recordDecision(event.capability, event.outcome, count, event.rule);
}

async function mutateWith(req: PeprMutateRequest<KubernetesObject>, acting: Policy[]) {
  try {
    const result = await mutate(await settledInputOf(req), configured(), acting);
    for (const e of result.errors)
      Log.error({ capability: e.capability, uid: req.Request.uid }, e.message);
    countDecisions(result.events);
  } catch (e) {
    // A throw here would make Pepr (onError: reject) refuse the pod with no word of why; the
    // validating webhook says it instead (its own call fails the same way, with the reason).
    Log.error({ error: reasonOf(e), capabilities: acting.map(p => p.name) }, "mutation failed");
  }
}

/** Who judges in a validating action: the acting policies (the engine), or a validator. */
type Judge = { policies: Policy[] } | { validator: Validator };

async function validateWith(req: PeprValidateRequest<KubernetesObject>, judge: Judge) {
  const names = "validator" in judge ? [judge.validator.name] : judge.policies.map(p => p.name);
  try {
    const input = await settledInputOf(req);
    const result =
      "validator" in judge
        ? validatorAnswer(input, configured(), judge.validator)
        : await answer(input, configured(), judge.policies);
    countDecisions(result.events);
    const warnings = result.warnings.length ? result.warnings : undefined;
    // warn, not info: the deployed module runs at LOG_LEVEL=warn (Pepr's per-request info lines
    // pile up in memory under load), and denials and exemptions used are what an operator audits.
    const raw = req.Raw as KubeObject;
    const subject = {
      kind: raw.kind,
      namespace: raw.metadata?.namespace ?? req.Request.namespace,
      name: raw.metadata?.name || raw.metadata?.generateName,
      uid: req.Request.uid,
    };
    for (const { violation, exemption } of result.waived)
      Log.warn(
        { ...subject, capability: violation.capability, rule: violation.rule, exemption },
        `exempted: ${violation.capability}/${violation.rule} waived by Exemption ${exemption}`,
      );
    if (result.allowed) return req.Approve(warnings);
    Log.warn(subject, `denied: ${result.denials.join("; ")}`);
    return req.Deny(result.denials.join("; "), 403, warnings);
  } catch (e) {
    // Pepr would turn a thrown error into "Action failed with error: {}"; say what happened instead.
    const reason = reasonOf(e);
    Log.error({ error: reason, capabilities: names }, "validation failed");
    return req.Deny(
      `admission-guard: internal error (${reason}). Fix: report this bug; meanwhile label the namespace admission-guard.dev/mode=warn`,
      500,
    );
  }
}

/**
 * The module's two actions, with every policy at once (each acts only on what its capability
 * declares: lib/engine/plan.ts):
 *   mutate — the fixes of a Pod as it is created, or of a workload's own template
 *     (workloads.mutate), every capability's in the order of capabilities/index.ts;
 *   validate — the checks of a Pod, a workload's template (judged with every capability's fixes
 *     simulated together: its pods get them all) or another declared kind.
 */
const admissionActions = {
  // Named functions: stack traces and profiles name them (Pepr logs its own wrapper's name).
  mutate: async function admissionMutate(req: PeprMutateRequest<KubernetesObject>) {
    await mutateWith(req, configured().policies);
  },
  validate: async function admissionValidate(req: PeprValidateRequest<KubernetesObject>) {
    return validateWith(req, { policies: configured().policies });
  },
};

/** Whether a route receives what Pepr matched by a group binding (bindingsOf): a declared kind. */
const receives = (route: Route, req: Request): boolean =>
  routeMatches(
    route,
    req.Raw as KubeObject,
    req.Request.operation as Operation,
    configured().settings,
  );

/**
 * Registers a capability's bindings as its routes say: one When(...) per binding of bindingsOf (a
 * kind, or a whole API group whose action passes over undeclared kinds).
 */
function bind(
  capability: Capability,
  routes: Route[],
  actions: {
    /** Unset for a capability that only validates (its routes have no mutating step). */
    mutate?: (req: PeprMutateRequest<KubernetesObject>) => Promise<void>;
    validate: (req: PeprValidateRequest<KubernetesObject>) => ReturnType<typeof validateWith>;
  },
) {
  for (const route of routes)
    for (const kind of bindingsOf(route)) {
      const when = capability.When(a.GenericKind, kind);
      const event = route.operations.includes("UPDATE")
        ? when.IsCreatedOrUpdated()
        : when.IsCreated();
      const wholeGroup = isGroupBinding(kind);
      if (route.step === "mutate") {
        const { mutate } = actions;
        if (!mutate) throw new Error(`${capability.name}: a mutating route without a fix`);
        event.Mutate(
          wholeGroup
            ? async (req: PeprMutateRequest<KubernetesObject>) => {
                if (receives(route, req)) await mutate(req);
              }
            : mutate,
        );
      } else {
        const { validate } = actions;
        event.Validate(
          wholeGroup
            ? async (req: PeprValidateRequest<KubernetesObject>) =>
                receives(route, req) ? validate(req) : req.Approve()
            : validate,
        );
      }
    }
}

/**
 * A policy area's Pepr capability: its name, description and namespaces are its policy's; what it
 * acts on is its policy's declaration (Policy.acts, written beside this call in its index.ts),
 * which the shared admission capability's bindings carry out. Records which policy it runs, for
 * pepr.ts and `check` (policiesOf).
 */
export function capabilityOf(policy: Policy): Capability {
  const capability = new Capability({
    name: policy.name,
    description: policy.description,
    namespaces: policy.namespaces,
  });
  policyOfCapability.set(capability, policy);
  return capability;
}

/**
 * The shared capability `admission`: the module's one Mutate and one Validate, bound on every kind
 * and operation that some policy declares (lib/engine/routes.ts admissionRoutes). `workloads` are
 * the settings the module is built with: they decide which workload kinds are bound, and whether
 * templates are fixed.
 */
export function bindAdmission(
  capability: Capability,
  policies: readonly Policy[],
  workloads: Settings["workloads"],
): void {
  bind(capability, admissionRoutes(policies, workloads), admissionActions);
}

/**
 * A capability that judges the module's own objects (the Exemptions'): a Validate binding of its
 * validator's kinds (lib/engine/routes.ts), answered by the validator alone, outside the policies'
 * modes and Exemptions. Also records the validator, for `check`.
 */
export function bindValidator(capability: Capability, validator: Validator): void {
  validatorOfCapability.set(capability, validator);
  const validate = async function validate(req: PeprValidateRequest<KubernetesObject>) {
    return validateWith(req, { validator });
  };
  bind(capability, validatorRoutes(validator), { validate });
}
