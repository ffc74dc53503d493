// Which step runs on which objects, with which policies: the module's dispatch, declared once.
// The capabilities' When-chains (capabilities/*/index.ts) are what Pepr registers and a Pepr user
// reads; this table says the same thing as data, and `check` (review.ts) runs it. A unit test
// (test/unit/routes.test.ts) holds the two equal: every binding Pepr records is a row here, in the
// same order, and nothing else is.
import { isPod, isWorkload, type KubeObject } from "../pod";
import type { Operation, Policy } from "../policy";
import type { Settings } from "../settings";
import { kindsInForce } from "../workload-kinds/in-force";

export interface Route {
  /** The Pepr capability that holds the binding. */
  capability: string;
  step: "mutate" | "validate";
  /** What the binding receives: Pods, workloads (built-in and the kinds in force), or the policy's extra kinds. */
  target: "pods" | "workloads" | "extra-kinds";
  operations: readonly Operation[];
  /** The policies that act: the capability's own, or every policy of the module (a shared action). */
  acting: "own" | "all";
}

const CREATE: readonly Operation[] = ["CREATE"];
const CREATE_OR_UPDATE: readonly Operation[] = ["CREATE", "UPDATE"];

/**
 * The routes of a module whose capabilities run these policies, in Pepr's order (capabilities in
 * the order of capabilities/index.ts, then the shared pods and workloads capabilities).
 * `settings` are the ones the module was built with: workloads.mutate adds the template fixes.
 */
export function routesOf(policies: readonly Policy[], settings: Settings): Route[] {
  const own = (p: Policy): Route[] => [
    ...(p.fix
      ? [
          {
            capability: p.name,
            step: "mutate",
            target: "pods",
            operations: CREATE,
            acting: "own",
          } as const,
        ]
      : []),
    ...(p.extraKinds?.length
      ? [
          {
            capability: p.name,
            step: "validate",
            target: "extra-kinds",
            operations: CREATE_OR_UPDATE,
            acting: "own",
          } as const,
        ]
      : []),
  ];
  return [
    ...policies.flatMap(own),
    {
      capability: "pods",
      step: "validate",
      target: "pods",
      operations: CREATE_OR_UPDATE,
      acting: "all",
    },
    ...(settings.workloads.mutate
      ? [
          {
            capability: "workloads",
            step: "mutate",
            target: "workloads",
            operations: CREATE_OR_UPDATE,
            acting: "all",
          } as const,
        ]
      : []),
    {
      capability: "workloads",
      step: "validate",
      target: "workloads",
      operations: CREATE_OR_UPDATE,
      acting: "all",
    },
  ];
}

/** Whether a route's binding receives this object on this operation. */
export function routeMatches(
  route: Route,
  obj: KubeObject,
  operation: Operation,
  policies: readonly Policy[],
  settings: Settings,
): boolean {
  if (!route.operations.includes(operation)) return false;
  switch (route.target) {
    case "pods":
      return isPod(obj);
    case "workloads":
      return isWorkload(obj, kindsInForce(settings.workloads));
    case "extra-kinds":
      return !!ownPolicy(route, policies)?.extraKinds?.includes(obj?.kind ?? "");
  }
}

const ownPolicy = (route: Route, policies: readonly Policy[]) =>
  policies.find(p => p.name === route.capability);

/** The policies a route acts for. */
export const actingFor = (route: Route, policies: Policy[]): Policy[] =>
  route.acting === "all" ? policies : policies.filter(p => p.name === route.capability);
