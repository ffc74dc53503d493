// The engine's core conditions, each pinned by an input that takes the other branch too: the
// namespace's mode, which policies act where, Exemptions (and what they may not waive), the UPDATE
// gate, the mutating step and the trace it leaves, read back by the validating step.
import { policies } from "../../../capabilities";
import { exemptionsValidator } from "../../../capabilities/exemptions/policy";
import { SnapshotCluster } from "../../../lib/cluster/view";
import {
  answer,
  applicability,
  contextFor,
  decide,
  fixedNotes,
  fixedNotesOf,
  judgesObject,
  modeOf,
  mutate,
  needsJudging,
  pendingWarnings,
  recordedFixes,
  recordFixes,
  review,
  storedVersionOf,
  templateIsFixed,
  validatorAnswer,
  type EngineDeps,
} from "../../../lib/engine";
import { recordedFixFailures, recordFixFailures } from "../../../lib/objects/fix-trace";
import type { KubeObject } from "../../../lib/objects/pod";
import {
  CONFIG_MAP,
  type Operation,
  type Policy,
  type PolicyRules,
} from "../../../lib/engine/policy";
import { parseSettings, type Settings } from "../../../lib/settings";
import type { Violation } from "../../../lib/objects/verdict";
import { asArea } from "../../support/policies";

const NS = "team";
const MODE = "admission-guard.dev/mode";
const EXEMPTIONS_NS = "admission-guard-exemptions";

const pod = (
  labels: Record<string, string> = {},
  namespace: string | undefined = NS,
): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p", ...(namespace ? { namespace } : {}), labels },
  spec: { containers: [{ name: "c", image: "ghcr.io/org/app:1" }] },
});

const deployment = (
  labels: Record<string, string> = {},
  extra: Partial<KubeObject> = {},
): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "d", namespace: NS },
  spec: {
    selector: { matchLabels: { app: "d" } },
    template: {
      metadata: { labels: { app: "d", ...labels } },
      spec: { containers: [{ name: "c", image: "ghcr.io/org/app:1" }] },
    },
  },
  ...extra,
});

const namespace = (name: string, labels: Record<string, string> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Namespace",
  metadata: { name, labels },
});

const clusterWith = (nsLabels: Record<string, string> = {}, ...objects: KubeObject[]) =>
  new SnapshotCluster([namespace(NS, nsLabels), ...objects]);

/**
 * A policy that fixes a pod by labelling it `<name>/fixed`, and finds a violation `bad` on a pod
 * (or template) labelled `<name>/bad`.
 */
const stub = (name: string, extra: Partial<PolicyRules> = {}): Policy =>
  asArea({
    name,
    description: "",
    rules: ["bad", "worse"],
    fix: target => {
      const labels = (target.template.metadata.labels ??= {});
      if (labels[`${name}/fixed`]) return [];
      labels[`${name}/fixed`] = "true";
      return [{ rule: "label", message: `${name} label` }];
    },
    check: (_obj, target) => ({
      changes: [],
      warnings: [],
      violations: target?.template.metadata.labels?.[`${name}/bad`]
        ? [{ rule: "bad", message: `${name} is bad`, fix: "remove it" }]
        : [],
    }),
    ...extra,
  });

const depsOf = (
  acting: Policy[],
  cluster = clusterWith(),
  settings: Settings = parseSettings({}),
): EngineDeps => ({ settings, cluster, policies: acting });

const request = (object: KubeObject, operation: Operation = "CREATE", oldObject?: KubeObject) => ({
  object,
  operation,
  oldObject,
  dryRun: false,
});

const exemption = (
  waive: { capability: string; rules?: string[] }[],
  expires = "2099-01-01T00:00:00Z",
  name = "e1",
): KubeObject => ({
  apiVersion: "admission-guard.dev/v1alpha1",
  kind: "Exemption",
  metadata: { name, namespace: EXEMPTIONS_NS },
  spec: { reason: "needed", expires, match: { namespaces: [NS] }, waive },
});

const violation = (severity?: "warn"): Violation => ({
  capability: "c",
  rule: "r",
  message: "m",
  fix: "f",
  ...(severity ? { severity } : {}),
});

describe("the namespace's mode decides what a violation does", () => {
  const findings = () => ({
    changes: [],
    skipped: [],
    warnings: ["admission-guard/c: a note"],
    violations: [violation(), violation("warn")],
  });
  const line = "admission-guard/c: m. Fix: f";

  it("decide(): enforce denies, warn and audit allow (audit silently), off says nothing", () => {
    expect(decide(findings(), "enforce")).toEqual({
      allowed: false,
      denials: [line],
      warnings: [line, "admission-guard/c: a note"],
    });
    expect(decide(findings(), "warn")).toEqual({
      allowed: true,
      denials: [],
      warnings: [line, line, "admission-guard/c: a note"],
    });
    expect(decide(findings(), "audit")).toEqual({ allowed: true, denials: [], warnings: [] });
    expect(decide(findings(), "off")).toEqual({ allowed: true, denials: [], warnings: [] });
  });

  it("answer(): the namespace label sets the mode, and each mode its events and warnings", async () => {
    const bad = stub("s");
    const object = () => pod({ "s/bad": "true" });
    const run = (labels: Record<string, string>) =>
      answer(request(object()), depsOf([bad], clusterWith(labels)), [bad]);

    const enforce = await run({});
    expect([enforce.mode, enforce.allowed, enforce.handled]).toEqual(["enforce", false, true]);
    expect(enforce.events).toEqual([{ capability: "s", outcome: "denied", rule: "bad" }]);

    const warn = await run({ [MODE]: "warn" });
    expect([warn.mode, warn.allowed, warn.denials]).toEqual(["warn", true, []]);
    expect(warn.warnings).toContain("admission-guard/s: s is bad. Fix: remove it");
    expect(warn.events).toEqual([{ capability: "s", outcome: "allowed-warn", rule: "bad" }]);

    const audit = await run({ [MODE]: "audit" });
    expect([audit.mode, audit.allowed, audit.warnings]).toEqual(["audit", true, []]);
    expect(audit.violations.map(v => v.rule)).toEqual(["bad"]);
    expect(audit.events).toEqual([{ capability: "s", outcome: "allowed-audit", rule: "bad" }]);

    const off = await run({ [MODE]: "off" });
    expect(off).toEqual({
      handled: false,
      judgedBy: [],
      skipped: [],
      mode: "off",
      allowed: true,
      denials: [],
      warnings: [],
      violations: [],
      waived: [],
      pending: [],
      events: [],
    });

    // Nothing found: each acting policy counts one "allowed".
    const clean = await answer(request(pod()), depsOf([bad, stub("t")]), [bad, stub("t")]);
    expect(clean.events).toEqual([
      { capability: "s", outcome: "allowed" },
      { capability: "t", outcome: "allowed" },
    ]);
  });

  it("without a label the settings' mode holds; an unknown label enforces and is said once", async () => {
    const settings = parseSettings({ mode: "warn" });
    const ctx = (labels: Record<string, string>) =>
      contextFor(pod(), { settings, cluster: clusterWith(labels) });
    expect(modeOf(ctx({}))).toEqual({ mode: "warn" });
    expect(modeOf(ctx({ [MODE]: "audit" }))).toEqual({ mode: "audit" });
    expect(modeOf(ctx({ [MODE]: "loud" })).mode).toBe("enforce");

    const r = await review(policies, pod(), { settings, cluster: clusterWith({ [MODE]: "loud" }) });
    expect(r.mode).toBe("enforce");
    expect(r.warnings.filter(w => w.includes('"loud"'))).toHaveLength(1);
    const quiet = await review(policies, pod(), { settings, cluster: clusterWith({}) });
    expect(quiet.mode).toBe("warn");
    expect(quiet.warnings.filter(w => w.includes("not one of"))).toEqual([]);
  });

  it("an unknown label is said for a ConfigMap too, by the one policy that judges it", async () => {
    const big: KubeObject = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "weights", namespace: NS },
      data: { blob: "x".repeat(2_000_000) },
    };
    const settings = parseSettings({});
    const r = await review(policies, big, { settings, cluster: clusterWith({ [MODE]: "loud" }) });
    expect(r.allowed).toBe(false);
    expect(r.violations.map(v => v.rule)).toEqual(["object-too-large"]);
    expect(r.warnings.filter(w => w.includes('"loud"'))).toHaveLength(1);
  });

  it("a validator answers in enforce even where the mode is off, and never in an ignored namespace", async () => {
    const exemptionObject = { ...exemption([{ capability: "s" }]) };
    exemptionObject.metadata = { name: "e1", namespace: NS }; // outside the exemptions namespace
    const cluster = clusterWith({ [MODE]: "off" });
    const alone = validatorAnswer(
      request(exemptionObject),
      depsOf(policies, cluster),
      exemptionsValidator,
    );
    expect(alone).toMatchObject({ mode: "enforce", handled: true, allowed: false });
    expect(alone.violations.map(v => v.rule)).toContain("exemption-namespace");
    expect(alone.events).toContainEqual({
      capability: "exemptions",
      outcome: "denied",
      rule: "exemption-namespace",
    });
    // check replays its binding: the same answer, from review() with the module's validators.
    const checked = await review(
      policies,
      exemptionObject,
      { settings: parseSettings({}), cluster },
      [exemptionsValidator],
    );
    expect(checked.violations.map(v => v.rule)).toEqual(alone.violations.map(v => v.rule));
    expect(checked.allowed).toBe(false);
    // The policies' engine never sees it: where the mode is off, a Pod is not handled at all.
    expect((await answer(request(pod()), depsOf(policies, cluster), policies)).handled).toBe(false);
    // In an ignored namespace, nothing is judged.
    const ignored = { ...exemptionObject, metadata: { name: "e1", namespace: "kube-system" } };
    expect(validatorAnswer(request(ignored), depsOf(policies), exemptionsValidator).handled).toBe(
      false,
    );
  });
});

describe("where a policy acts, and what is not handled", () => {
  const settings = parseSettings({ ignoredNamespaces: ["sandbox"], registries: { enabled: true } });
  const ctxIn = (ns: string, labels: Record<string, string> = {}) =>
    contextFor(pod({}, ns), { settings, cluster: new SnapshotCluster([namespace(ns, labels)]) });

  it("applicability: ignored namespaces, own namespaces, mode off, switched on", () => {
    const s = stub("s");
    expect(applicability(s, ctxIn("sandbox"))).toBe("ignored-namespace");
    expect(applicability(s, ctxIn("kube-public"))).toBe("ignored-namespace");
    expect(applicability(s, ctxIn(NS))).toBe("applies");
    expect(applicability({ ...s, namespaces: [] }, ctxIn(NS))).toBe("applies");
    expect(applicability({ ...s, namespaces: ["elsewhere"] }, ctxIn(NS))).toBe("not-its-namespace");
    expect(applicability({ ...s, namespaces: [NS] }, ctxIn(NS))).toBe("applies");
    expect(applicability(s, ctxIn(NS, { [MODE]: "off" }))).toBe("mode-off");
    expect(applicability({ ...s, switchedBy: "registries" }, ctxIn(NS))).toBe("applies");
  });

  it("contextFor: the request's namespace when the object has none, and the defaults", () => {
    const cluster = new SnapshotCluster([namespace(NS, { [MODE]: "warn" })]);
    const ctx = contextFor(pod({}, undefined), { settings, cluster, namespace: NS });
    expect(ctx.namespaceName).toBe(NS);
    expect(ctx.namespace?.labels[MODE]).toBe("warn");
    expect([ctx.operation, ctx.dryRun, ctx.scan, ctx.policies, ctx.stored]).toEqual([
      "CREATE",
      false,
      false,
      [],
      undefined,
    ]);
    const own = contextFor(pod({}, "other"), { settings, cluster, namespace: NS });
    expect(own.namespaceName).toBe("other");
    const bare = { kind: "Pod", spec: { containers: [] } } as KubeObject;
    expect(contextFor(bare, { settings, cluster, namespace: NS }).namespaceName).toBe(NS);
    const none = undefined as unknown as KubeObject;
    expect(contextFor(none, { settings, cluster, namespace: NS }).namespaceName).toBe(NS);
    const cs = contextFor({ kind: "Node", metadata: { name: "n" } }, { settings, cluster });
    expect([cs.namespaceName, cs.namespace]).toEqual(["", undefined]);
    const update = contextFor(pod(), {
      settings,
      cluster,
      operation: "UPDATE",
      oldObject: pod(),
      dryRun: true,
      scan: true,
      policies,
    });
    expect([update.operation, update.dryRun, update.scan, update.policies]).toEqual([
      "UPDATE",
      true,
      true,
      policies,
    ]);
    expect(update.stored?.object).toEqual(pod());
  });

  it("judgesObject: Pods and workloads for the usual policies, extra kinds for their own", () => {
    const s = stub("s");
    const configMap: KubeObject = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" } };
    expect(judgesObject(s, pod())).toBe(true);
    expect(judgesObject(s, deployment())).toBe(true);
    expect(judgesObject(s, configMap)).toBe(false);
    expect(judgesObject(asArea(s, [CONFIG_MAP]), configMap)).toBe(true);
    // Only on the operations declared.
    expect(judgesObject(asArea(s, [CONFIG_MAP]), configMap, undefined, "DELETE")).toBe(false);
    // The module's own objects are its validators', never a policy's.
    expect(judgesObject(s, exemption([{ capability: "s" }]))).toBe(false);
  });

  it("a pod in an ignored namespace or outside a policy's namespaces is not handled and not fixed", async () => {
    const s = stub("s");
    for (const object of [
      pod({ "s/bad": "true" }, "sandbox"),
      pod({ "s/bad": "true" }, "kube-system"),
    ]) {
      const deps = depsOf([s], new SnapshotCluster([]), settings);
      const a = await answer(request(object), deps, [s]);
      expect(a).toMatchObject({ handled: false, allowed: true, judgedBy: [], events: [] });
      expect((await mutate(request(object), deps, [s])).changes).toEqual([]);
      expect(object.metadata?.labels?.["s/fixed"]).toBeUndefined();
    }
    const narrow = { ...s, namespaces: ["elsewhere"] };
    const r = await review([narrow], pod({ "s/bad": "true" }), {
      settings,
      cluster: clusterWith(),
    });
    expect(r).toMatchObject({ handled: false, allowed: true, changes: [], judgedBy: [] });
  });

  it("a switched-off policy among others: the others judge, its rules are skipped with the reason", async () => {
    const off = parseSettings({ registries: { enabled: false } });
    const registry = stub("reg", { switchedBy: "registries", rules: ["one", "two"] });
    const s = stub("s");
    const a = await answer(
      request(pod({ "reg/bad": "true" })),
      depsOf([registry, s], clusterWith(), off),
      [registry, s],
    );
    expect(a.handled).toBe(true);
    expect(a.allowed).toBe(true);
    expect(a.judgedBy).toEqual([s]);
    expect(a.skipped.map(k => [k.capability, k.rule, k.reason])).toEqual([
      ["reg", "one", "reg is switched off (settings registries.enabled: false)"],
      ["reg", "two", "reg is switched off (settings registries.enabled: false)"],
    ]);
    // Switched on, nothing is skipped and it denies.
    const on = await answer(request(pod({ "reg/bad": "true" })), depsOf([registry, s]), [
      registry,
      s,
    ]);
    expect(on.skipped).toEqual([]);
    expect(on.allowed).toBe(false);
  });
});

describe("Exemptions waive what they name, never a rule that is not waivable", () => {
  const quota = stub("quota", {
    notWaivable: { worse: "the API server refuses it anyway" },
    check: (_o, target) => ({
      changes: [],
      warnings: [],
      violations: target?.template.metadata.labels?.["quota/bad"]
        ? [
            { rule: "bad", message: "bad one", fix: "f" },
            { rule: "worse", message: "worse one", fix: "f" },
          ]
        : [],
    }),
  });

  it("a waived rule is allowed, said as a warning and counted as exempted; a notWaivable one stands", async () => {
    // Waived whole, with another capability (that has no notWaivable rules) first in the module.
    const cluster = clusterWith({}, exemption([{ capability: "quota" }, { capability: "s" }]));
    const a = await answer(
      request(pod({ "quota/bad": "true" })),
      depsOf([stub("s"), quota], cluster),
      [quota],
    );
    expect(a.allowed).toBe(false);
    expect(a.violations.map(v => v.rule)).toEqual(["worse"]);
    expect(a.waived.map(w => [w.violation.rule, w.exemption])).toEqual([
      ["bad", `${EXEMPTIONS_NS}/e1`],
    ]);
    expect(a.warnings.filter(w => w.includes("waived by Exemption"))).toHaveLength(1);
    // No Exemption can help with what stands: no way out is offered.
    expect(a.denials).toHaveLength(1);
    expect(a.denials.join()).not.toContain("can waive");
    expect(a.events).toEqual([
      { capability: "quota", outcome: "denied", rule: "worse" },
      { capability: "quota", outcome: "exempted", rule: "bad", exemption: `${EXEMPTIONS_NS}/e1` },
    ]);
  });

  it("a denial a waiver could lift says who can grant one; not when Exemptions are off", async () => {
    const s = stub("s");
    const denied = await answer(request(pod({ "s/bad": "true" })), depsOf([s]), [s]);
    expect(denied.denials).toHaveLength(2);
    expect(denied.denials[1]).toContain(`can waive s/bad`);
    const noExemptions = parseSettings({ exemptions: { enabled: false } });
    const plain = await answer(
      request(pod({ "s/bad": "true" })),
      depsOf([s], clusterWith(), noExemptions),
      [s],
    );
    expect(plain.denials).toEqual(["admission-guard/s: s is bad. Fix: remove it"]);
  });

  it("in audit mode a waiver and an expired Exemption are not said; in warn mode they are", async () => {
    const s = stub("s");
    const objects = [
      exemption([{ capability: "s", rules: ["bad"] }]),
      exemption([{ capability: "s" }], "2001-01-01T00:00:00Z", "old"),
    ];
    const run = (mode: string) =>
      answer(
        request(pod({ "s/bad": "true" })),
        depsOf([s], clusterWith({ [MODE]: mode }, ...objects)),
        [s],
      );
    const warn = await run("warn");
    expect(warn.waived.map(w => w.violation.rule)).toEqual(["bad"]);
    expect(warn.warnings.some(w => w.includes("waived by Exemption"))).toBe(true);
    expect(warn.warnings.some(w => w.includes(`Exemption ${EXEMPTIONS_NS}/old expired`))).toBe(
      true,
    );
    const audit = await run("audit");
    expect(audit.waived.map(w => w.violation.rule)).toEqual(["bad"]);
    expect(audit.warnings).toEqual([]);
    expect(audit.events.map(e => e.outcome)).toEqual(["allowed", "exempted"]);
  });

  it("a capability waived whole is not fixed either; one waived rule by rule still is", async () => {
    const s = stub("s");
    const whole = pod();
    await mutate(request(whole), depsOf([s], clusterWith({}, exemption([{ capability: "s" }]))), [
      s,
    ]);
    expect(whole.metadata?.labels?.["s/fixed"]).toBeUndefined();
    const some = pod();
    const deps = depsOf([s], clusterWith({}, exemption([{ capability: "s", rules: ["bad"] }])));
    expect((await mutate(request(some), deps, [s])).changes.map(c => c.rule)).toEqual(["label"]);
  });
});

describe("the UPDATE gate: what is judged at all", () => {
  const settings = parseSettings({});
  // Sent by a controller: only a controller's ownerReferences count (issue 26;
  // engine/update-gate.test.ts).
  const gate = (object: KubeObject, old?: KubeObject, withSettings = true) => ({
    stored: storedVersionOf(object, old ? "UPDATE" : "CREATE", old, settings),
    user: "system:kube-controller-manager",
    ...(withSettings ? { settings } : {}),
  });
  const owned = {
    ownerReferences: [{ apiVersion: "v1", kind: "X", name: "x", uid: "u", controller: true }],
  };
  const pytorchJob = (): KubeObject => ({
    apiVersion: "kubeflow.org/v1",
    kind: "PyTorchJob",
    metadata: { name: "j", namespace: NS, ...owned },
    spec: {
      pytorchReplicaSpecs: { Master: { replicas: 1, template: { spec: { containers: [] } } } },
    },
  });

  it("a controller-owned workload is not judged (an ML kind too, with the settings), its Pod is", () => {
    expect(needsJudging(pytorchJob(), gate(pytorchJob()))).toBe(false);
    expect(needsJudging(pytorchJob(), gate(pytorchJob(), undefined, false))).toBe(true);
    const ownedPod = { ...pod(), metadata: { ...pod().metadata, ...owned } };
    expect(needsJudging(ownedPod, gate(ownedPod))).toBe(true);
    const notController = deployment(
      {},
      {
        metadata: {
          name: "d",
          namespace: NS,
          ownerReferences: [{ ...owned.ownerReferences[0], controller: false }],
        },
      },
    );
    expect(needsJudging(notController, gate(notController))).toBe(true);
  });

  it("a deleting Pod is judged for a new container (a deletionTimestamp is no pass), not for its metadata; other kinds' updates always are", () => {
    const old = pod();
    const changed = pod();
    (changed.spec as { containers: { image: string }[] }).containers[0].image = "evil/x";
    expect(needsJudging(changed, gate(changed, old))).toBe(true);
    const deletingOf = (p: KubeObject) =>
      ({
        ...p,
        metadata: { ...p.metadata, deletionTimestamp: "2026-01-01T00:00:00Z" },
      }) as unknown as KubeObject;
    const deleting = deletingOf(changed);
    expect(needsJudging(deleting, gate(deleting, deletingOf(old)))).toBe(true);
    const unchanged = deletingOf(old);
    expect(needsJudging(unchanged, gate(unchanged, deletingOf(old)))).toBe(false);
    const cm: KubeObject = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "c", namespace: NS },
    };
    expect(needsJudging(cm, gate(cm, structuredClone(cm)))).toBe(true);
  });

  it("an UPDATE that adds nothing is admitted whatever the object carries; the same object created is denied", async () => {
    const s = stub("s");
    const deps = depsOf([s]);
    const old = pod({ "s/bad": "true" });
    const relabelled = pod({ "s/bad": "true", other: "x" });
    const update = await answer(request(relabelled, "UPDATE", old), deps, [s]);
    expect(update).toMatchObject({ handled: true, allowed: true, violations: [] });
    expect(update.events).toEqual([{ capability: "s", outcome: "allowed" }]);
    expect((await answer(request(relabelled), deps, [s])).allowed).toBe(false);
    // A workload's new template that adds the violation is denied; one that keeps it is not.
    const before = deployment({ "s/bad": "true" });
    const scaled = deployment({ "s/bad": "true" });
    (scaled.spec as { replicas?: number }).replicas = 5;
    expect((await answer(request(scaled, "UPDATE", before), deps, [s])).allowed).toBe(true);
    expect((await answer(request(scaled, "UPDATE", deployment()), deps, [s])).allowed).toBe(false);
  });

  it("the stored version of a Pod is its own spec, worked out once; a Deployment's ephemeral containers count for nothing", () => {
    const old = pod();
    const stored = storedVersionOf(pod(), "UPDATE", old, settings)!;
    expect(stored.targets).toHaveLength(1);
    expect(stored.targets[0]).toMatchObject({ isTemplate: false, template: { path: "" } });
    expect(stored.targets).toBe(stored.targets);
    expect(stored.templateAt("")?.spec.containers[0].image).toBe("ghcr.io/org/app:1");
    expect(
      storedVersionOf(
        { kind: "Pod" } as KubeObject,
        "UPDATE",
        "x" as unknown as KubeObject,
        settings,
      ),
    ).toBeUndefined();
    const withEphemeral = deployment();
    (withEphemeral.spec as Record<string, unknown>).ephemeralContainers = [{ name: "d" }];
    expect(
      storedVersionOf(withEphemeral, "UPDATE", deployment(), settings)?.addsEphemeralContainers,
    ).toBe(false);
    const noSpec = { ...pod(), spec: undefined } as unknown as KubeObject;
    const debugged = pod();
    (debugged.spec as Record<string, unknown>).ephemeralContainers = [
      { name: "d", image: "busybox" },
    ];
    expect(storedVersionOf(debugged, "UPDATE", noSpec, settings)?.addsEphemeralContainers).toBe(
      true,
    );
  });
});

describe("the mutating step and the trace it leaves", () => {
  const mutating = parseSettings({ workloads: { mutate: true } });

  it("fixes a Pod on CREATE only, a workload's template (with workloads.mutate) but not on DELETE", async () => {
    const s = stub("s");
    const updated = pod();
    expect((await mutate(request(updated, "UPDATE", pod()), depsOf([s]), [s])).changes).toEqual([]);
    expect(updated.metadata?.annotations).toBeUndefined();

    const created = pod();
    const r = await mutate(request(created), depsOf([s]), [s]);
    expect(r.events).toEqual([{ capability: "s", outcome: "fixed", rule: "label" }]);
    expect(created.metadata?.annotations?.["admission-guard.dev/fixed"]).toBe("s/label");

    const d = deployment();
    expect(
      (await mutate(request(d, "DELETE"), depsOf([s], clusterWith(), mutating), [s])).changes,
    ).toEqual([]);
    const u = deployment();
    const onUpdate = await mutate(
      request(u, "UPDATE", deployment()),
      depsOf([s], clusterWith(), mutating),
      [s],
    );
    expect(onUpdate.changes.map(c => c.rule)).toEqual(["label"]);
    expect(templateIsFixed(deployment(), mutating)).toBe(true);
    expect(templateIsFixed(deployment(), parseSettings({}))).toBe(false);
    expect(templateIsFixed(pod(), mutating)).toBe(false);
  });

  it("a fix that throws on a workload's template is an internal error of that policy; the others still fix", async () => {
    const s = stub("s");
    const broken = stub("broken", {
      fix: () => {
        throw "no good";
      },
    });
    const d = deployment();
    const r = await mutate(request(d), depsOf([broken, s], clusterWith(), mutating), [broken, s]);
    expect(r.changes.map(c => c.capability)).toEqual(["s"]);
    expect(r.errors).toEqual([
      expect.objectContaining({
        capability: "broken",
        rule: "internal-error",
        message: expect.stringContaining("no good"),
      }),
    ]);
    // Validated, the simulation of its pods fails the same way: denied with the reason.
    const a = await answer(request(deployment()), depsOf([broken, s]), [broken, s]);
    expect(a.allowed).toBe(false);
    expect(a.violations.map(v => [v.capability, v.rule])).toEqual([["broken", "internal-error"]]);
  });

  it("a recorded fix failure denies the Pod on CREATE only, and only for its own policy", async () => {
    const s = stub("s");
    const t = stub("t");
    const failed = () => {
      const p = pod();
      recordFixFailures(p, [{ capability: "s", reason: "boom" }]);
      return p;
    };
    const create = await answer(request(failed()), depsOf([s, t]), [s, t]);
    expect(create.violations.map(v => [v.capability, v.rule])).toEqual([["s", "internal-error"]]);
    const update = await answer(request(failed(), "UPDATE", pod({ x: "y" })), depsOf([s, t]), [
      s,
      t,
    ]);
    expect(update.violations).toEqual([]);
  });

  it("the validating step reads the trace back: fixed notes on a Pod CREATE, not on UPDATE nor in audit", async () => {
    const s = stub("s");
    const t = stub("t");
    const traced = () => {
      const p = pod();
      recordFixes(p, [
        { capability: "t", rule: "b", message: "" },
        { capability: "s", rule: "a", message: "" },
      ]);
      return p;
    };
    const create = await answer(request(traced()), depsOf([s, t]), [s, t]);
    expect(create.warnings).toEqual(["admission-guard/s: fixed a", "admission-guard/t: fixed b"]);
    const changed = traced();
    (changed.spec as { containers: { image: string }[] }).containers[0].image = "ghcr.io/org/app:2";
    const update = await answer(request(changed, "UPDATE", traced()), depsOf([s, t]), [s, t]);
    expect(update.warnings).toEqual([]);
    const audit = await answer(
      request(traced()),
      depsOf([s, t], clusterWith({ [MODE]: "audit" })),
      [s, t],
    );
    expect(audit.warnings).toEqual([]);
    // A template fixed in place (workloads.mutate): its notes, once.
    const d = deployment();
    await mutate(request(d), depsOf([s], clusterWith(), mutating), [s]);
    const fixed = await answer(request(d), depsOf([s], clusterWith(), mutating), [s]);
    expect(fixed.warnings).toEqual(["admission-guard/s: fixed label"]);
    expect(fixed.pending).toEqual([]);
    // The same traced Deployment once workloads.mutate is off: its pods will be fixed, nothing "fixed"
    // is said of it, nor of a trace on its own metadata.
    d.metadata!.annotations = { "admission-guard.dev/fixed": "s/label" };
    const notFixedInPlace = await answer(request(d), depsOf([s]), [s]);
    expect(notFixedInPlace.warnings).toEqual([]);
  });

  it("recordFixes merges with what is there, sorted and deduplicated; nothing to record leaves no annotation", () => {
    const p = pod();
    recordFixes(p, []);
    expect(p.metadata?.annotations).toBeUndefined();
    p.metadata!.annotations = { "admission-guard.dev/fixed": " z/y , ,a/b" };
    recordFixes(p, [
      { capability: "m", rule: "n", message: "" },
      { capability: "a", rule: "b", message: "" },
    ]);
    expect(p.metadata?.annotations?.["admission-guard.dev/fixed"]).toBe("a/b,m/n,z/y");
    const bare: KubeObject = {};
    recordFixes(bare, [{ capability: "c", rule: "r", message: "" }]);
    expect(bare.metadata?.annotations).toEqual({ "admission-guard.dev/fixed": "c/r" });
  });

  it("recordedFixes reads capability/rule pairs, skips what is not one, and copes with long values", () => {
    const traced = (value: unknown) => ({
      metadata: { annotations: { "admission-guard.dev/fixed": value as string } },
    });
    const read = (value: unknown) => Object.fromEntries(recordedFixes(traced(value)));
    expect(read(" s/a , s/b,t/c")).toEqual({ s: ["a", "b"], t: ["c"] });
    expect(read("noslash,/rule,cap/, /x,ok/yes")).toEqual({ ok: ["yes"] });
    expect(read(42)).toEqual({});
    expect(recordedFixes({}).size).toBe(0);
    const long = Array.from({ length: 300 }, (_, i) => `cap/rule-${i}`).join(",");
    expect(long.length).toBeGreaterThan(2048);
    expect(recordedFixes(traced(long)).get("cap")).toHaveLength(300);
    // Many different traces: each still read right after the cache starts again.
    for (let i = 0; i < 1100; i++) expect(read(`c/r${i}`)).toEqual({ c: [`r${i}`] });
  });

  it("fixedNotes follow the policies' order and skip those with nothing fixed; fixedNotesOf words changes alike", () => {
    const fixed = new Map([
      ["t", ["b"]],
      ["s", ["a", "c"]],
      ["u", []],
    ]);
    expect(fixedNotes(fixed, [stub("s"), stub("u"), stub("t"), stub("v")])).toEqual([
      "admission-guard/s: fixed a, c",
      "admission-guard/t: fixed b",
    ]);
    expect(
      fixedNotesOf([
        { capability: "s", rule: "c", message: "" },
        { capability: "s", rule: "a", message: "" },
      ]),
    ).toEqual(["admission-guard/s: fixed a, c"]);
    expect(fixedNotesOf([])).toEqual([]);
  });

  it("fix failures: merged by capability, sorted; an unreadable annotation counts as none", () => {
    const p = pod();
    recordFixFailures(p, []);
    expect(p.metadata?.annotations).toBeUndefined();
    recordFixFailures(p, [{ capability: "z", reason: "one" }]);
    recordFixFailures(p, [{ capability: "a", reason: "two" }]);
    expect(p.metadata?.annotations?.["admission-guard.dev/fix-failed"]).toBe(
      '{"a":"two","z":"one"}',
    );
    const read = (value: unknown) =>
      Object.fromEntries(
        recordedFixFailures({
          metadata: { annotations: { "admission-guard.dev/fix-failed": value as string } },
        }),
      );
    expect(read("not json")).toEqual({});
    expect(read("[1]")).toEqual({});
    expect(read("null")).toEqual({});
    expect(read("7")).toEqual({});
    expect(read(5)).toEqual({});
    expect(read(JSON.stringify({ s: "x".repeat(600) })).s).toHaveLength(500);
  });
});

describe("a workload's answer: pending fixes, the predicted pods, review()", () => {
  it("pending fixes are announced one line per capability, not in audit, and never for a Pod", async () => {
    expect(
      pendingWarnings(
        [
          { capability: "s", rule: "a", message: "one" },
          { capability: "t", rule: "b", message: "two" },
          { capability: "s", rule: "c", message: "three" },
        ],
        "Job",
      ),
    ).toEqual([
      "admission-guard/s: its pods will get one; three (when Job creates them)",
      "admission-guard/t: its pods will get two (when Job creates them)",
    ]);
    const s = stub("s");
    const a = await answer(request(deployment()), depsOf([s]), [s]);
    expect(a.pending.map(c => c.rule)).toEqual(["label"]);
    expect(a.warnings).toEqual([
      "admission-guard/s: its pods will get s label (when Deployment creates them)",
    ]);
    expect(
      (a.predicted?.spec as { template: { metadata: { labels: Record<string, string> } } }).template
        .metadata.labels["s/fixed"],
    ).toBe("true");
    const audit = await answer(
      request(deployment()),
      depsOf([s], clusterWith({ [MODE]: "audit" })),
      [s],
    );
    expect(audit.warnings).toEqual([]);
    expect(audit.pending.map(c => c.rule)).toEqual(["label"]);
    const p = await answer(request(pod()), depsOf([s]), [s]);
    expect(p.pending).toEqual([]);
  });

  it("review(): a pod named by generateName, the request's namespace, and an unhandled object returned as given", async () => {
    const s = stub("s");
    const input: KubeObject = { ...pod({}, undefined), metadata: { generateName: "job-" } };
    const r = await review([s], input, {
      settings: parseSettings({}),
      cluster: clusterWith(),
      namespace: NS,
    });
    expect([r.kind, r.namespace, r.name, r.mode, r.handled]).toEqual([
      "Pod",
      NS,
      "job-",
      "enforce",
      true,
    ]);
    expect(r.judgedBy).toEqual([s]);
    expect(r.changes.map(c => c.rule)).toEqual(["label"]);
    expect(input.metadata?.labels).toBeUndefined();
    const system = pod({}, "kube-system");
    const ignored = await review([s], system, {
      settings: parseSettings({}),
      cluster: clusterWith(),
    });
    expect([ignored.handled, ignored.allowed]).toEqual([false, true]);
    expect(ignored.object).toBe(system);
    expect(ignored.changes).toEqual([]);
  });
});

describe("what concerns the object is said once, by the first policy that acts here", () => {
  const s = stub("s");
  const narrow = stub("narrow", { namespaces: ["elsewhere"] });
  const off = stub("off", { namespaces: ["nowhere"] });
  // First in the module: two policies that do not act in this namespace.
  const module = [off, narrow, s];

  it("an unknown mode label and a Pod without spec are said by the first policy that acts, once", async () => {
    const deps = depsOf(module, clusterWith({ [MODE]: "loud" }));
    const a = await answer(request(pod()), deps, [s]);
    expect(a.warnings.filter(w => w.includes('"loud"'))).toHaveLength(1);
    const noSpec = { ...pod(), spec: undefined } as unknown as KubeObject;
    const malformed = await answer(request(noSpec), depsOf(module), [narrow, s]);
    expect(malformed.violations.map(v => [v.capability, v.rule])).toEqual([
      ["s", "malformed-object"],
    ]);
    expect(malformed.allowed).toBe(false);
    // Its mutation fixes nothing and records no failure.
    const fixed = await mutate(request(noSpec), depsOf(module), [s]);
    expect([fixed.changes, fixed.errors]).toEqual([[], []]);
  });
});

describe("policies with only some of the steps", () => {
  it("a policy without a fix is not fixed nor failed; one without a check judges nothing", async () => {
    const checksOnly = stub("c", { fix: undefined });
    const fixesOnly = stub("f", { check: undefined });
    const deps = depsOf([checksOnly, fixesOnly]);
    const object = pod({ "f/bad": "true" });
    const m = await mutate(request(object), deps, [checksOnly, fixesOnly]);
    expect(m.changes.map(c => c.capability)).toEqual(["f"]);
    expect(m.errors).toEqual([]);
    const a = await answer(request(object), deps, [checksOnly, fixesOnly]);
    expect(a).toMatchObject({ allowed: true, violations: [] });
    expect(a.events.map(e => `${e.capability} ${e.outcome}`)).toEqual(["c allowed", "f allowed"]);
  });

  it("a change a check reports on a Pod is no pending fix: only a workload has pods to come", async () => {
    const noting = stub("n", {
      check: () => ({
        changes: [{ rule: "note", message: "noted" }],
        violations: [],
        warnings: [],
      }),
    });
    const a = await answer(request(pod()), depsOf([noting]), [noting]);
    expect(a.pending).toEqual([]);
    expect(a.warnings).toEqual([]);
  });

  it("extra kinds: each policy's own answer joined by review(), judged whole on UPDATE", async () => {
    const configMap = (data: Record<string, string>): KubeObject => ({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "cm", namespace: NS },
      data,
    });
    const refuses = (name: string): Policy =>
      asArea(
        {
          name,
          description: "",
          rules: ["no-secret"],
          check: obj => ({
            changes: [],
            warnings: [],
            violations: (obj.data as Record<string, string>)[name]
              ? [{ rule: "no-secret", message: `${name} found`, fix: "remove it" }]
              : [],
          }),
        },
        [CONFIG_MAP],
      );
    const a = refuses("a");
    const b = refuses("b");
    const settings = parseSettings({});
    const r = await review([a, b, stub("s")], configMap({ b: "x" }), {
      settings,
      cluster: clusterWith(),
    });
    expect(r.allowed).toBe(false);
    expect(r.handled).toBe(true);
    expect(r.judgedBy).toEqual([a, b]);
    expect(r.violations.map(v => v.capability)).toEqual(["b"]);
    expect(r.denials[0]).toBe("admission-guard/b: b found. Fix: remove it");
    // Not a Pod nor a workload: an UPDATE is judged as it will be stored, what it had included.
    const update = await review([a, b], configMap({ b: "x", other: "y" }), {
      settings,
      cluster: clusterWith(),
      operation: "UPDATE",
      oldObject: configMap({ b: "x" }),
    });
    expect(update.violations.map(v => v.capability)).toEqual(["b"]);
  });

  it("the stored version of a workload is its template, as a template", () => {
    const stored = storedVersionOf(deployment(), "UPDATE", deployment(), parseSettings({}))!;
    expect(stored.targets.map(t => [t.template.path, t.isTemplate])).toEqual([
      ["spec.template", true],
    ]);
  });
});
