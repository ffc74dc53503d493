// What runs where is declared once, by each capability (Policy.acts in its index.ts); the routes
// are made from those declarations (lib/engine/routes.ts): the shared admission capability
// registers its Pepr bindings from them (bindAdmission; one per kind, or per API group:
// bindingsOf), the build overlay writes the webhook's rules from them (webhookRules) and `check`
// replays them. Here: every admission binding Pepr recorded is a route's, in the same order per
// step, and nothing else is; the rules name every declared kind once; so the webhook receives
// exactly what `check` judges; and a policy acts only on what it declares.
import { capabilities, policies, validators } from "../../../capabilities";
import {
  ADMISSION,
  bindingsOf,
  routeMatches,
  routesOf,
  webhookRules,
  type Route,
} from "../../../lib/engine/routes";
import type { KubeObject } from "../../../lib/objects/pod";
import { CONFIG_MAP, noFindings, policyOf, type Operation } from "../../../lib/engine/policy";
import { planOf } from "../../../lib/engine/plan";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { asArea } from "../../support/policies";
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
    r => r.target === "templates" && r.step === "validate",
  )!;
  expect(workloads.binds.map(k => k.kind).sort()).toEqual(
    [...WORKLOAD_KINDS, ...kindsInForce(built.workloads).map(k => k.kind)].sort(),
  );
  const validated = byStep(bindings, "validate").filter(r => r.capability === ADMISSION);
  const coveredBy = (k: (typeof workloads.binds)[number]) =>
    validated.find(r => r.kind === `${k.kind}.${k.group}/${k.version}` || r.kind === `.${k.group}/`)
      ?.kind ?? `no binding for ${k.kind}`;
  for (const k of workloads.binds) expect(coveredBy(k)).not.toMatch(/^no binding/);
  // One Mutate and one Validate of Pods for the whole module, whatever the number of capabilities.
  expect(bindings.filter(r => r.kind === "Pod./v1").map(r => `${r.capability} ${r.event}`)).toEqual(
    [`${ADMISSION} CREATE`, `${ADMISSION} CREATEORUPDATE`],
  );
  expect(policies.filter(p => p.fix).length).toBeGreaterThan(1);
});

describe("Pepr's bindings and the webhook's rules (bindingsOf, webhookRules)", () => {
  const routes = routesOf(policies, built, validators);
  const workloads = routes.find(r => r.target === "templates" && r.step === "validate")!;

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
    const payload = routes.find(r => r.target === "kinds")!;
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
  expect(on.filter(r => r.target === "templates").map(r => r.step)).toEqual(["mutate", "validate"]);
  const off = routesOf(policies, parseSettings({}));
  expect(off.filter(r => r.target === "templates").map(r => r.step)).toEqual(["validate"]);
});

describe("which step receives which object on which operation", () => {
  const settings = parseSettings({});
  const fixing = asArea({ name: "fixing", description: "", rules: [], fix: () => [] });
  const checking = asArea({
    name: "checking",
    description: "",
    rules: [],
    check: () => noFindings(),
  });
  const extra = asArea({ ...checking, name: "extra" }, [CONFIG_MAP]);
  // Declares less than an area usually does: its check on Pods as they are created, nothing else.
  const createdPodsOnly = policyOf(
    { name: "created-pods-only", description: "", rules: [], check: () => noFindings() },
    { check: { pods: ["CREATE"] } },
  );
  const module = [fixing, checking, extra, createdPodsOnly];
  const routes = routesOf(module, settings);
  const pod = { apiVersion: "v1", kind: "Pod", metadata: { name: "p" }, spec: { containers: [] } };
  const deployment = { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "d" } };
  const configMap = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" } };
  const matching = (obj: KubeObject, operation: Operation) =>
    routes.filter(r => routeMatches(r, obj, operation, settings)).map(r => `${r.step} ${r.target}`);

  it("one route per step and target, on the union of the operations declared", () => {
    expect(routes.map(r => `${r.capability} ${r.step} ${r.target} ${r.operations}`)).toEqual([
      "admission mutate pods CREATE",
      "admission validate pods CREATE,UPDATE",
      "admission validate templates CREATE,UPDATE",
      "admission validate kinds CREATE,UPDATE",
    ]);
  });

  it("matches kinds and operations: a Pod's fixes on CREATE only, its validation on UPDATE too", () => {
    expect(matching(pod, "CREATE")).toEqual(["mutate pods", "validate pods"]);
    expect(matching(pod, "UPDATE")).toEqual(["validate pods"]);
    expect(matching(pod, "DELETE")).toEqual([]);
    expect(matching(deployment, "UPDATE")).toEqual(["validate templates"]);
    expect(matching(configMap, "CREATE")).toEqual(["validate kinds"]);
    expect(matching({ apiVersion: "v1", kind: "Secret" }, "CREATE")).toEqual([]);
    // Other kinds match by API group too: another group's ConfigMap is not the core one.
    const foreign = { apiVersion: "example.com/v1", kind: "ConfigMap", metadata: { name: "c" } };
    expect(matching(foreign, "CREATE")).toEqual([]);
  });

  it("each step acts only with the policies that declare it, on that object and operation", () => {
    const deps = { settings, cluster: new SnapshotCluster(), policies: module };
    const acting = (object: KubeObject, operation: Operation, step: "mutate" | "validate") =>
      planOf(
        {
          object: { ...object, metadata: { ...object.metadata, namespace: "ns" } },
          operation,
          dryRun: false,
        },
        deps,
        module,
        step,
      ).judging.map(p => p.name);
    expect(acting(pod, "CREATE", "mutate")).toEqual(["fixing"]);
    // The validating step also says what a fix did to the same object: "fixing" takes part where
    // it fixed (a Pod's CREATE; a workload's template, fixed or simulated), not on a Pod's UPDATE.
    expect(acting(pod, "CREATE", "validate")).toEqual([
      "fixing",
      "checking",
      "extra",
      "created-pods-only",
    ]);
    expect(acting(pod, "UPDATE", "validate")).toEqual(["checking", "extra"]);
    expect(acting(deployment, "CREATE", "validate")).toEqual(["fixing", "checking", "extra"]);
    expect(acting(configMap, "UPDATE", "validate")).toEqual(["extra"]);
  });

  it("refuses, at load, a declaration that does not match the rules", () => {
    const fix = () => [];
    const check = () => noFindings();
    const rules = { name: "x", description: "", rules: [] };
    expect(() => policyOf({ ...rules, fix }, {})).toThrow("x: has a fix but declares no acts.fix");
    expect(() => policyOf(rules, { fix: { pods: ["CREATE"] } })).toThrow(
      "declares acts.fix but has no fix",
    );
    expect(() => policyOf({ ...rules, check }, {})).toThrow(
      "has a check but declares no acts.check",
    );
    expect(() => policyOf(rules, { check: { pods: ["CREATE"] } })).toThrow(
      "declares acts.check but has no check",
    );
    expect(() => policyOf({ ...rules, checkGang: check }, { check: { pods: ["CREATE"] } })).toThrow(
      "has a checkGang (a workload judged whole) but no acts.check.templates",
    );
  });
});
