// The dispatch is declared twice on purpose and held equal here: the capabilities' When-chains
// (what Pepr registers, what a Pepr user reads) and lib/engine/routes.ts (what `check` runs). Every
// admission binding Pepr recorded is a route, in the same order per step, and nothing else is; so a
// binding added without its route (or the reverse) fails here, not as a parity drift in e2e.
import { capabilities, policies } from "../../capabilities";
import { actingFor, routeMatches, routesOf, type Route } from "../../lib/engine/routes";
import type { KubeObject } from "../../lib/pod";
import { noFindings, type Operation } from "../../lib/policy";
import { moduleEnvironment, parseSettings, settingsFromEnv } from "../../lib/settings";
import { WORKLOAD_KINDS } from "../../lib/pod";
import { kindsInForce } from "../../lib/workload-kinds/in-force";
import { groupOf } from "../../lib/workload-kinds/kind-spec";
import cfg from "../../package.json";

interface Row {
  capability: string;
  step: "mutate" | "validate";
  kind: string;
  event: string;
}

// The settings the capabilities were registered with (as `pepr build` reads them).
const built = settingsFromEnv(moduleEnvironment(cfg.pepr.env as Record<string, string>));

function bindingRows(): Row[] {
  return capabilities.flatMap(c =>
    c.bindings
      .filter(b => b.isMutate || b.isValidate)
      .map(b => ({
        capability: c.name,
        step: b.isMutate ? ("mutate" as const) : ("validate" as const),
        kind: `${b.kind.kind}.${b.kind.group}`,
        event: String(b.event),
      })),
  );
}

const BUILT_IN_GROUP: Record<string, string> = {
  Deployment: "apps",
  StatefulSet: "apps",
  DaemonSet: "apps",
  ReplicaSet: "apps",
  ReplicationController: "",
  Job: "batch",
  CronJob: "batch",
};
const EXTRA_GROUP: Record<string, string> = {
  ConfigMap: "",
  Secret: "",
  Exemption: "admission-guard.dev",
};

function routeRows(routes: Route[]): Row[] {
  return routes.flatMap(r => {
    const kinds =
      r.target === "pods"
        ? ["Pod."]
        : r.target === "workloads"
          ? [
              ...WORKLOAD_KINDS.map(k => `${k}.${BUILT_IN_GROUP[k]}`),
              ...kindsInForce(built.workloads).map(k => `${k.kind}.${groupOf(k.apiVersion)}`),
            ]
          : (policies.find(p => p.name === r.capability)?.extraKinds ?? []).map(
              k => `${k}.${EXTRA_GROUP[k]}`,
            );
    const event = r.operations.includes("UPDATE") ? "CREATEORUPDATE" : "CREATE";
    return kinds.map(kind => ({ capability: r.capability, step: r.step, kind, event }));
  });
}

const byStep = (rows: Row[], step: Row["step"]) => rows.filter(r => r.step === step);

test("every admission binding of the capabilities is a route, in order, and every route a binding", () => {
  const bindings = bindingRows();
  const routes = routeRows(routesOf(policies, built));
  for (const step of ["mutate", "validate"] as const) {
    const fromBindings = byStep(bindings, step);
    const fromRoutes = byStep(routes, step);
    // Within the workloads capability Pepr interleaves kinds; compare each capability's set, and
    // the capabilities' order.
    const order = (rows: Row[]) => [...new Set(rows.map(r => r.capability))];
    expect(order(fromRoutes)).toEqual(order(fromBindings));
    const key = (r: Row) => `${r.capability} ${r.kind} ${r.event}`;
    expect(fromRoutes.map(key).sort()).toEqual(fromBindings.map(key).sort());
  }
});

test("workloads.mutate adds the template fixes as a route (the build with it has the bindings: cluster tier 70)", () => {
  const on = routesOf(policies, parseSettings({ workloads: { mutate: true } }));
  expect(on.filter(r => r.capability === "workloads").map(r => r.step)).toEqual([
    "mutate",
    "validate",
  ]);
  const off = routesOf(policies, parseSettings({}));
  expect(off.filter(r => r.capability === "workloads").map(r => r.step)).toEqual(["validate"]);
});

describe("which step receives which object on which operation", () => {
  const settings = parseSettings({});
  const fixing = { name: "fixing", description: "", rules: [], fix: () => [] };
  const checking = { name: "checking", description: "", rules: [], check: () => noFindings() };
  const extra = { ...checking, name: "extra", extraKinds: ["ConfigMap"] };
  const module = [fixing, checking, extra];
  const routes = routesOf(module, settings);
  const pod = { apiVersion: "v1", kind: "Pod", metadata: { name: "p" }, spec: { containers: [] } };
  const deployment = { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "d" } };
  const configMap = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" } };
  const matching = (obj: KubeObject, operation: Operation) =>
    routes
      .filter(r => routeMatches(r, obj, operation, module, settings))
      .map(r => `${r.capability} ${r.step}`);

  it("a fix is a mutating route on Pod CREATE, extra kinds a validating one of their own", () => {
    expect(
      routes.map(r => `${r.capability} ${r.step} ${r.target} ${r.operations} ${r.acting}`),
    ).toEqual([
      "fixing mutate pods CREATE own",
      "extra validate extra-kinds CREATE,UPDATE own",
      "pods validate pods CREATE,UPDATE all",
      "workloads validate workloads CREATE,UPDATE all",
    ]);
  });

  it("matches kinds and operations: a Pod's fixes on CREATE only, its validation on UPDATE too", () => {
    expect(matching(pod, "CREATE")).toEqual(["fixing mutate", "pods validate"]);
    expect(matching(pod, "UPDATE")).toEqual(["pods validate"]);
    expect(matching(pod, "DELETE")).toEqual([]);
    expect(matching(deployment, "UPDATE")).toEqual(["workloads validate"]);
    expect(matching(configMap, "CREATE")).toEqual(["extra validate"]);
    expect(matching({ apiVersion: "v1", kind: "Secret" }, "CREATE")).toEqual([]);
    // A route of a capability the module does not have matches nothing.
    const stray = { ...routes[1], capability: "gone" };
    expect(routeMatches(stray, configMap, "CREATE", module, settings)).toBe(false);
  });

  it("a shared route acts for every policy, a capability's own for its policy alone", () => {
    expect(actingFor(routes[0], module)).toEqual([fixing]);
    expect(actingFor(routes[2], module)).toEqual(module);
  });
});
