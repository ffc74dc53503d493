// What runs where, made from the one declaration each capability writes in its index.ts
// (Policy.acts, policyOf): the routes Pepr's bindings are registered from (lib/pepr/adapter.ts),
// the webhook's rules (webhookRules, written by the build overlay), and what `check` replays
// (review.ts). Pure data: no Pepr here. Why one Mutate and one Validate: docs/adr/0030.
import { isPod, type KubeObject } from "../objects/pod";
import { isWorkload } from "../workload-kinds/built-in";
import { BUILT_IN_WORKLOADS } from "../workload-kinds/table";
import { isKind, POD, type KindRef, type Operation, type Policy, type Validator } from "./policy";
import type { Settings } from "../settings";
import { groupOf, pluralOf } from "../workload-kinds/kind-spec";
import { kindsInForce } from "../workload-kinds/in-force";

const CREATE_OR_UPDATE: readonly Operation[] = ["CREATE", "UPDATE"];

export interface Route {
  /** The Pepr capability that holds the binding: the shared `admission`, or a validator's. */
  capability: string;
  step: "mutate" | "validate";
  /**
   * What the binding receives: Pods, workload templates (built-in kinds and the kinds in force),
   * the other kinds policies declare, or a validator's kinds (the module's own objects).
   */
  target: "pods" | "templates" | "kinds" | "own-objects";
  /** Every operation any capability declares for this step and target. */
  operations: readonly Operation[];
  /** The kinds it receives: one webhook rule each (webhookRules); Pepr binds them by bindingsOf. */
  binds: readonly KindRef[];
}

/** The Pepr capability that holds the module's one Mutate and one Validate (capabilities/admission). */
export const ADMISSION = "admission";

const OPERATIONS: readonly Operation[] = ["CREATE", "UPDATE", "DELETE", "CONNECT"];

/** The operations any of these lists names, in the API's order. */
const unionOf = (lists: readonly (readonly Operation[] | undefined)[]): Operation[] =>
  OPERATIONS.filter(op => lists.some(list => list?.includes(op)));

/** The kinds whose pod templates are judged: the built-in workloads and the kinds in force. */
export function templateKinds(workloads: Settings["workloads"]): KindRef[] {
  return [
    ...BUILT_IN_WORKLOADS,
    // The ML kinds and the platform's own: any version of their group.
    ...kindsInForce(workloads).map(spec => ({
      group: groupOf(spec.apiVersion),
      version: "",
      kind: spec.kind,
      plural: pluralOf(spec),
    })),
  ];
}

/**
 * The shared routes, made from every capability's declaration (Policy.acts): one route per step
 * and target, on every operation some capability declares for it. One Mutate and one Validate
 * instead of one per capability: each Pepr binding costs a filter pass and a callback on every
 * request, and each step builds the plan, the context and the Exemptions once (docs/adr/0030).
 * Which capabilities act on a request is the plan's question (lib/engine/plan.ts, `declares`).
 * `workloads` are the settings the module is built with: they decide the webhook's rules.
 */
export function admissionRoutes(
  policies: readonly Policy[],
  workloads: Settings["workloads"],
): Route[] {
  const routes: Route[] = [];
  const route = (
    step: Route["step"],
    target: Route["target"],
    operations: readonly Operation[],
    binds: readonly KindRef[],
  ) => {
    if (operations.length && binds.length)
      routes.push({ capability: ADMISSION, step, target, operations, binds });
  };
  const fixes = policies.map(p => p.acts.fix);
  const checks = policies.map(p => p.acts.check);
  const templates = templateKinds(workloads);
  route("mutate", "pods", unionOf(fixes.map(t => t?.pods)), [POD]);
  // A workload's own template is fixed in place only when the module is built to (ADR 0003).
  if (workloads.mutate)
    route("mutate", "templates", unionOf(fixes.map(t => t?.templates)), templates);
  // The validating step also says what a fix did to the same object (lib/engine/plan.ts).
  route("validate", "pods", unionOf([...checks, ...fixes].map(t => t?.pods)), [POD]);
  route("validate", "templates", unionOf([...checks, ...fixes].map(t => t?.templates)), templates);
  // Other kinds: one route per set of operations, each kind once.
  const byOperations = new Map<string, { operations: Operation[]; refs: KindRef[] }>();
  for (const kinds of checks.map(t => t?.kinds)) {
    if (!kinds) continue;
    const operations = unionOf([kinds.operations]);
    const key = operations.join();
    const entry = byOperations.get(key) ?? { operations, refs: [] };
    byOperations.set(key, entry);
    for (const ref of kinds.refs) if (!entry.refs.some(r => sameKind(r, ref))) entry.refs.push(ref);
  }
  for (const { operations, refs } of byOperations.values())
    route("validate", "kinds", operations, refs);
  return routes;
}

const sameKind = (a: KindRef, b: KindRef) =>
  a.group === b.group && a.version === b.version && a.kind === b.kind;

/** A validator's route: a Validate of its kinds, on CREATE and UPDATE. */
export const validatorRoutes = (validator: Validator): Route[] => [
  {
    capability: validator.name,
    step: "validate",
    target: "own-objects",
    operations: CREATE_OR_UPDATE,
    binds: validator.kinds,
  },
];

/**
 * The routes of a module with these policies and validators: the validators' own bindings, then
 * the shared admission's (capabilities/index.ts registers them in this order).
 */
export function routesOf(
  policies: readonly Policy[],
  settings: Settings,
  validators: readonly Validator[] = [],
): Route[] {
  return [...validators.flatMap(validatorRoutes), ...admissionRoutes(policies, settings.workloads)];
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
    case "templates":
      return isWorkload(obj, kindsInForce(settings.workloads));
    case "kinds":
    case "own-objects":
      return route.binds.some(ref => isKind(obj, ref));
  }
}
