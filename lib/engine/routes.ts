// What runs where: the module's one declaration. Pepr's bindings are registered from it (each
// capability's index.ts hands its policy to bindPolicy, lib/pepr/adapter.ts), `check` replays it
// (review.ts), and nothing else says which step runs on which objects. Pure data: no Pepr here.
import { isPod, type KubeObject } from "../objects/pod";
import { isWorkload } from "../workload-kinds/built-in";
import { isKind, POD, type KindRef, type Operation, type Policy, type Validator } from "./policy";
import type { Settings } from "../settings";
import { groupOf, pluralOf } from "../workload-kinds/kind-spec";
import { kindsInForce } from "../workload-kinds/in-force";
import { BUILT_IN_WORKLOADS } from "../workload-kinds/table";

export interface Route {
  /** The Pepr capability that holds the binding. */
  capability: string;
  step: "mutate" | "validate";
  /**
   * What the binding receives: Pods, workloads (built-in and the kinds in force), a policy's extra
   * kinds, or a validator's kinds (the module's own objects: an Exemption).
   */
  target: "pods" | "workloads" | "extra-kinds" | "own-objects";
  operations: readonly Operation[];
  /** The policies that act: the capability's own, or every policy of the module (a shared action). */
  acting: "own" | "all";
  /** The kinds it receives: one webhook rule each (webhookRules); Pepr binds them by bindingsOf. */
  binds: readonly KindRef[];
}

const CREATE: readonly Operation[] = ["CREATE"];
const CREATE_OR_UPDATE: readonly Operation[] = ["CREATE", "UPDATE"];

/** A policy's own routes: a fix is a Mutate on Pod CREATE; extra kinds are a Validate of their own. */
export function policyRoutes(policy: Policy): Route[] {
  const routes: Route[] = [];
  if (policy.fix)
    routes.push({
      capability: policy.name,
      step: "mutate",
      target: "pods",
      operations: CREATE,
      acting: "own",
      binds: [POD],
    });
  if (policy.extraKinds?.length)
    routes.push({
      capability: policy.name,
      step: "validate",
      target: "extra-kinds",
      operations: CREATE_OR_UPDATE,
      acting: "own",
      binds: policy.extraKinds,
    });
  return routes;
}

/** A validator's route: a Validate of its kinds, on CREATE and UPDATE. */
export const validatorRoutes = (validator: Validator): Route[] => [
  {
    capability: validator.name,
    step: "validate",
    target: "own-objects",
    operations: CREATE_OR_UPDATE,
    acting: "own",
    binds: validator.kinds,
  },
];

/**
 * The shared routes, with every policy at once (one route per step instead of one per policy:
 * each binding costs Pepr a filter pass on every request, docs/bench.md): Pods judged after every
 * mutating webhook, workloads' templates judged (and, with workloads.mutate, fixed) as their pods
 * will be. `workloads` are the settings the module is built with: they decide the webhook's rules.
 */
export function sharedRoutes(workloads: Settings["workloads"]): Route[] {
  const kinds: KindRef[] = [
    ...BUILT_IN_WORKLOADS,
    // The ML kinds and the platform's own: any version of their group.
    ...kindsInForce(workloads).map(spec => ({
      group: groupOf(spec.apiVersion),
      version: "",
      kind: spec.kind,
      plural: pluralOf(spec),
    })),
  ];
  const route = (capability: string, step: Route["step"], target: Route["target"]): Route => ({
    capability,
    step,
    target,
    operations: CREATE_OR_UPDATE,
    acting: "all",
    binds: target === "pods" ? [POD] : kinds,
  });
  return [
    route("pods", "validate", "pods"),
    ...(workloads.mutate ? [route("workloads", "mutate", "workloads")] : []),
    route("workloads", "validate", "workloads"),
  ];
}

/**
 * The routes of a module whose capabilities run these policies and validators, in Pepr's order
 * (the capabilities of capabilities/index.ts: the policy areas', the validators', then the shared
 * pods and workloads capabilities).
 */
export function routesOf(
  policies: readonly Policy[],
  settings: Settings,
  validators: readonly Validator[] = [],
): Route[] {
  return [
    ...policies.flatMap(policyRoutes),
    ...validators.flatMap(validatorRoutes),
    ...sharedRoutes(settings.workloads),
  ];
}

/**
 * The kinds Pepr binds for a route: one binding per API group it names two kinds or more of (kind
 * "", plural "*": Pepr's filter matches it by group alone, and the action checks the kind against
 * the route, routeMatches), else the kind itself. Pepr runs every binding's filter on every
 * request, so fewer bindings cost less (docs/bench.md); the webhook's rules stay one per declared
 * kind (webhookRules, applied by the build overlay). The core group is never bound whole: Pepr
 * reads a core binding without a kind as "every request of every group". Why: docs/adr/0025.
 */
export function bindingsOf(route: Route): KindRef[] {
  const perGroup = new Map<string, number>();
  for (const kind of route.binds) perGroup.set(kind.group, (perGroup.get(kind.group) ?? 0) + 1);
  const bound = new Set<string>();
  const bindings: KindRef[] = [];
  for (const kind of route.binds) {
    if (!kind.group || perGroup.get(kind.group)! < 2) bindings.push(kind);
    else if (!bound.has(kind.group)) {
      bound.add(kind.group);
      bindings.push({ group: kind.group, version: "", kind: "", plural: "*" });
    }
  }
  return bindings;
}

/** Whether Pepr binds this as a whole API group (bindingsOf). */
export const isGroupBinding = (kind: KindRef): boolean => kind.kind === "";

/** A rule of an admission webhook (admissionregistration.k8s.io/v1 RuleWithOperations). */
export interface WebhookRule {
  apiGroups: string[];
  apiVersions: string[];
  operations: string[];
  resources: string[];
}

/**
 * The rules of the module's mutating or validating webhook: one per declared kind, each as Pepr
 * 1.1.4 writes one for a binding of that kind (its plural, else the kind in lower case + "s";
 * Pods with their subresources, podResources), in the routes' order, each once. The build overlay puts
 * them in place of the group-wide rules Pepr writes for bindingsOf's group bindings, so the API
 * server sends exactly the declared kinds.
 */
export function webhookRules(routes: readonly Route[], step: Route["step"]): WebhookRule[] {
  const rules = new Map<string, WebhookRule>();
  for (const route of routes)
    if (route.step === step)
      for (const kind of route.binds) {
        const resource = kind.plural || `${kind.kind.toLowerCase()}s`;
        const rule: WebhookRule = {
          apiGroups: [kind.group],
          apiVersions: [kind.version || "*"],
          operations: [...route.operations],
          resources: resource === "pods" ? podResources(route.operations) : [resource],
        };
        const key = JSON.stringify(rule);
        if (!rules.has(key)) rules.set(key, rule);
      }
  return [...rules.values()];
}

/**
 * Pods and the subresources whose requests carry the whole Pod: ephemeral containers (kubectl
 * debug) and, for UPDATE, in-place resize (`pods/resize`, Kubernetes 1.33+), which changes the
 * containers' resources. A resize is never a CREATE, so the mutating rule (CREATE) leaves it out:
 * nothing a fix does reaches a resize.
 */
function podResources(operations: readonly Operation[]): string[] {
  return [
    "pods",
    "pods/ephemeralcontainers",
    ...(operations.includes("UPDATE") ? ["pods/resize"] : []),
  ];
}

/** Whether a route's binding receives this object on this operation. */
export function routeMatches(
  route: Route,
  obj: KubeObject,
  operation: Operation,
  settings: Settings,
): boolean {
  if (!route.operations.includes(operation)) return false;
  switch (route.target) {
    case "pods":
      return isPod(obj);
    case "workloads":
      return isWorkload(obj, kindsInForce(settings.workloads));
    case "extra-kinds":
    case "own-objects":
      return route.binds.some(ref => isKind(obj, ref));
  }
}

/** The policies a route acts for. */
export const actingFor = (route: Route, policies: Policy[]): Policy[] =>
  route.acting === "all" ? policies : policies.filter(p => p.name === route.capability);
