// What runs where is declared once (lib/engine/routes.ts): the capabilities register their Pepr
// bindings from it (bindPolicy, bindShared; one per kind, or per API group: bindingsOf), the build
// overlay writes the webhook's rules from it (webhookRules) and `check` replays it. Here: every
// admission binding Pepr recorded is a route's, in the same order per step, and nothing else is;
// the rules name every declared kind once; so the webhook receives exactly what `check` judges.
import { capabilities, policies, validators } from "../../../capabilities";
import {
  actingFor,
  bindingsOf,
  routeMatches,
  routesOf,
  webhookRules,
  type Route,
} from "../../../lib/engine/routes";
import type { KubeObject } from "../../../lib/objects/pod";
import { CONFIG_MAP, noFindings, type Operation } from "../../../lib/engine/policy";
import { moduleEnvironment, parseSettings, settingsFromEnv } from "../../../lib/settings";
import { WORKLOAD_KINDS } from "../../../lib/workload-kinds/built-in";
import { kindsInForce } from "../../../lib/workload-kinds/in-force";
import cfg from "../../../package.json";

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
        kind: `${b.kind.kind}.${b.kind.group}/${b.kind.version}`,
        event: String(b.event),
      })),
  );
}

function routeRows(routes: Route[]): Row[] {
  return routes.flatMap(r =>
    bindingsOf(r).map(k => ({
      capability: r.capability,
      step: r.step,
      kind: `${k.kind}.${k.group}/${k.version}`,
      event: r.operations.includes("UPDATE") ? "CREATEORUPDATE" : "CREATE",
    })),
  );
}

const byStep = (rows: Row[], step: Row["step"]) => rows.filter(r => r.step === step);

test("every admission binding of the capabilities is a route's, in order, and every route bound", () => {
  const bindings = bindingRows();
  const routes = routeRows(routesOf(policies, built, validators));
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
  // And what is bound is what the engine judges: every built-in workload kind and every kind in
  // force, each once, in the webhook's rules and under a binding of its own or of its group;
  // Pods once by the shared validation; each fix once on Pod CREATE.
  const workloads = routesOf(policies, built, validators).find(
    r => r.capability === "workloads" && r.step === "validate",
  )!;
  expect(workloads.binds.map(k => k.kind).sort()).toEqual(
    [...WORKLOAD_KINDS, ...kindsInForce(built.workloads).map(k => k.kind)].sort(),
  );
  const validated = byStep(bindings, "validate").filter(r => r.capability === "workloads");
  const coveredBy = (k: (typeof workloads.binds)[number]) =>
    validated.find(r => r.kind === `${k.kind}.${k.group}/${k.version}` || r.kind === `.${k.group}/`)
      ?.kind ?? `no binding for ${k.kind}`;
  for (const k of workloads.binds) expect(coveredBy(k)).not.toMatch(/^no binding/);
  expect(bindings.filter(r => r.kind === "Pod./v1").map(r => `${r.capability} ${r.event}`)).toEqual(
    [...policies.filter(p => p.fix).map(p => `${p.name} CREATE`), "pods CREATEORUPDATE"],
  );
});

describe("Pepr's bindings and the webhook's rules (bindingsOf, webhookRules)", () => {
  const routes = routesOf(policies, built, validators);
  const workloads = routes.find(r => r.capability === "workloads" && r.step === "validate")!;

  test("a named API group the route binds two kinds or more of is one binding; the core group never is", () => {
    const bound = bindingsOf(workloads);
    const groups = new Map<string, number>();
    for (const k of workloads.binds) groups.set(k.group, (groups.get(k.group) ?? 0) + 1);
    for (const [group, count] of groups) {
      const ofGroup = bound.filter(b => b.group === group);
      if (group && count > 1)
        expect(ofGroup).toEqual([{ group, version: "", kind: "", plural: "*" }]);
      else expect(ofGroup).toEqual(workloads.binds.filter(k => k.group === group));
    }
    // apps (4 kinds), batch (2), kubeflow.org (6), ray.io (3): 15 kinds in 4 bindings.
    expect(bound.length).toBeLessThan(workloads.binds.length);
    expect(bound.some(b => b.group === "" && b.kind === "")).toBe(false);
    // Two core kinds stay two bindings: a core binding without a kind is every request to Pepr.
    const payload = routes.find(r => r.capability === "payload-size")!;
    expect(bindingsOf(payload)).toEqual(payload.binds);
  });

  test("the rules are one per declared kind, as Pepr writes a kind's binding, each once", () => {
    const rules = webhookRules(routes, "validate");
    const resources = rules.flatMap(r => r.apiGroups.map(g => `${g}/${r.resources[0]}`));
    expect(new Set(resources).size).toBe(resources.length);
    expect(rules.find(r => r.resources[0] === "deployments")).toEqual({
      apiGroups: ["apps"],
      apiVersions: ["v1"],
      operations: ["CREATE", "UPDATE"],
      resources: ["deployments"],
    });
    expect(rules.find(r => r.resources[0] === "pytorchjobs")).toMatchObject({
      apiGroups: ["kubeflow.org"],
      apiVersions: ["*"],
    });
    // In-place resize (Kubernetes 1.33+) is an UPDATE of pods/resize: validated, never mutated.
    expect(rules.find(r => r.resources[0] === "pods")?.resources).toEqual([
      "pods",
      "pods/ephemeralcontainers",
      "pods/resize",
    ]);
    expect(rules.some(r => r.resources.includes("*"))).toBe(false);
    expect(webhookRules(routes, "mutate")).toEqual([
      {
        apiGroups: [""],
        apiVersions: ["v1"],
        operations: ["CREATE"],
        resources: ["pods", "pods/ephemeralcontainers"],
      },
    ]);
    // Every declared kind of every validating route has its rule.
    for (const route of routes.filter(r => r.step === "validate"))
      for (const k of route.binds)
        expect(resources).toContain(`${k.group}/${k.plural ?? `${k.kind.toLowerCase()}s`}`);
  });
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
  const extra = { ...checking, name: "extra", extraKinds: [CONFIG_MAP] };
  const module = [fixing, checking, extra];
  const routes = routesOf(module, settings);
  const pod = { apiVersion: "v1", kind: "Pod", metadata: { name: "p" }, spec: { containers: [] } };
  const deployment = { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "d" } };
  const configMap = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" } };
  const matching = (obj: KubeObject, operation: Operation) =>
    routes
      .filter(r => routeMatches(r, obj, operation, settings))
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
    // Extra kinds match by API group too: another group's ConfigMap is not the core one.
    const foreign = { apiVersion: "example.com/v1", kind: "ConfigMap", metadata: { name: "c" } };
    expect(matching(foreign, "CREATE")).toEqual([]);
  });

  it("a shared route acts for every policy, a capability's own for its policy alone", () => {
    expect(actingFor(routes[0], module)).toEqual([fixing]);
    expect(actingFor(routes[2], module)).toEqual(module);
  });
});
