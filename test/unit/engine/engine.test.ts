import {
  answer,
  decide,
  mutate,
  modeOf,
  contextFor,
  review,
  recordedFixes,
  applicability,
} from "../../../lib/engine";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { defaultSettings, parseSettings } from "../../../lib/settings";
import { helloPeprPolicy, HELLO_DENY_LABEL, HELLO_LABEL } from "../../../hello-pepr";
import { imageRegistryPolicy } from "../../../capabilities/image-registry";
import { containersChanged, type KubeObject } from "../../../lib/objects/pod";
import type { Policy } from "../../../lib/engine/policy";
import { asArea } from "../../support/policies";

const demoPod = (labels: Record<string, string> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p", namespace: "pepr-demo", labels },
  spec: { containers: [{ name: "c", image: "nginx" }] },
});

const cluster = (nsLabels: Record<string, string> = {}) =>
  new SnapshotCluster([{ kind: "Namespace", metadata: { name: "pepr-demo", labels: nsLabels } }]);

/** The mutating webhook's step on `object`, in place, with these settings. */
const mutateIn = (object: KubeObject, settings = defaultSettings(), c = cluster()) =>
  mutate(
    { object, operation: "CREATE", dryRun: false },
    { settings, cluster: c, policies: [helloPeprPolicy] },
    [helloPeprPolicy],
  );

describe("engine with the hello-pepr template capability", () => {
  it("fixes a pod once, records the fix, and a second run changes nothing", async () => {
    const pod = demoPod();
    const first = await mutateIn(pod);
    expect(first.changes.map(c => c.rule)).toEqual(["greet"]);
    expect(pod.metadata?.labels?.[HELLO_LABEL]).toBe("true");
    expect(recordedFixes(pod).get("hello-pepr")).toEqual(["greet"]);
    const snapshot = JSON.stringify(pod);
    const second = await mutateIn(pod);
    expect(second.changes).toEqual([]);
    expect(JSON.stringify(pod)).toBe(snapshot);
  });

  it("does not act outside its namespaces", async () => {
    const pod = { ...demoPod(), metadata: { name: "p", namespace: "other" } };
    const r = await review([helloPeprPolicy], pod, {
      settings: defaultSettings(),
      cluster: cluster(),
    });
    expect(r.handled).toBe(false);
    expect(r.changes).toEqual([]);
  });

  it("denies in enforce mode, warns in warn mode, stays silent in audit, does nothing when off", async () => {
    const pod = demoPod({ [HELLO_DENY_LABEL]: "true" });
    const settings = defaultSettings();
    const enforce = await review([helloPeprPolicy], pod, { settings, cluster: cluster() });
    expect(enforce.allowed).toBe(false);
    expect(enforce.violations[0]).toMatchObject({
      capability: "hello-pepr",
      rule: "no-deny-label",
    });

    const warn = await review([helloPeprPolicy], pod, {
      settings,
      cluster: cluster({ "admission-guard.dev/mode": "warn" }),
    });
    expect(warn.allowed).toBe(true);
    expect(warn.warnings.join("\n")).toMatch(
      /admission-guard\/hello-pepr: .*Fix: remove the label/,
    );

    const audit = await review([helloPeprPolicy], pod, {
      settings,
      cluster: cluster({ "admission-guard.dev/mode": "audit" }),
    });
    expect(audit.allowed).toBe(true);
    expect(audit.warnings).toEqual([]);

    const off = await review([helloPeprPolicy], pod, {
      settings,
      cluster: cluster({ "admission-guard.dev/mode": "off" }),
    });
    expect(off.handled).toBe(false);
    expect(off.object).toBe(pod);
  });

  it("does not change the input object and fixes a workload's template copy only", async () => {
    const deployment: KubeObject = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "d", namespace: "pepr-demo" },
      spec: {
        replicas: 1,
        template: {
          metadata: { labels: { app: "x" } },
          spec: { containers: [{ name: "c", image: "nginx" }] },
        },
      },
    };
    const before = JSON.stringify(deployment);
    const r = await review([helloPeprPolicy], deployment, {
      settings: defaultSettings(),
      cluster: cluster(),
    });
    expect(JSON.stringify(deployment)).toBe(before);
    expect(r.allowed).toBe(true);
    expect(r.changes.map(c => c.message)).toEqual([
      `spec.template.metadata.labels["${HELLO_LABEL}"]="true"`,
    ]);
    expect(r.warnings.join("\n")).toMatch(/its pods will get .*when Deployment creates them/);
    const template = (
      r.object.spec as { template: { metadata: { labels: Record<string, string> } } }
    ).template;
    expect(template.metadata.labels[HELLO_LABEL]).toBe("true");
  });

  it("treats an unknown mode label as enforce and says so", () => {
    const ctx = contextFor(demoPod(), {
      settings: defaultSettings(),
      cluster: cluster({ "admission-guard.dev/mode": "loud" }),
    });
    const { mode, warning } = modeOf(ctx);
    expect(mode).toBe("enforce");
    expect(warning).toMatch(/not one of enforce\|warn\|audit\|off/);
  });

  it("turns a rule that throws into a clear violation, not a crash", async () => {
    const broken = {
      ...helloPeprPolicy,
      name: "broken",
      check: () => {
        throw new Error("boom");
      },
    };
    const r = await review([broken], demoPod(), {
      settings: defaultSettings(),
      cluster: cluster(),
    });
    expect(r.allowed).toBe(false);
    expect(r.violations[0]).toMatchObject({ capability: "broken", rule: "internal-error" });
    expect(r.violations[0].message).toContain("boom");
  });

  it("keeps warn-severity violations as warnings even in enforce mode", () => {
    const d = decide(
      {
        changes: [],
        warnings: [],
        skipped: [],
        violations: [{ capability: "c", rule: "r", message: "m", fix: "f", severity: "warn" }],
      },
      "enforce",
    );
    expect(d.allowed).toBe(true);
    expect(d.warnings).toEqual(["admission-guard/c: m. Fix: f"]);
  });
});

describe("engine on malformed objects", () => {
  it("reports a pod without spec once, not once per capability", async () => {
    const other = { ...helloPeprPolicy, name: "other" };
    const pod: KubeObject = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "x", namespace: "pepr-demo" },
    };
    const r = await review([helloPeprPolicy, other], pod, {
      settings: defaultSettings(),
      cluster: cluster(),
    });
    expect(r.allowed).toBe(false);
    expect(r.violations.map(v => v.rule)).toEqual(["malformed-object"]);
  });
});

describe("engine on a Pod UPDATE", () => {
  const greeted = () => {
    const pod = demoPod({ [HELLO_LABEL]: "true" });
    return pod;
  };
  const update = (pod: KubeObject, old: KubeObject) =>
    review([helloPeprPolicy], pod, {
      settings: defaultSettings(),
      cluster: cluster(),
      operation: "UPDATE",
      oldObject: old,
    });

  it("an update that changes no container is not judged, whatever the pod carries", async () => {
    const old = greeted();
    const relabelled = structuredClone(old);
    relabelled.metadata!.labels![HELLO_DENY_LABEL] = "true"; // hello-pepr would deny it on CREATE
    const r = await update(relabelled, old);
    expect(r.allowed).toBe(true);
    expect(r.violations).toEqual([]);
  });

  it("an update that changes a container is judged, and only what is new counts", async () => {
    // Stored with the deny label (admitted before the rule, or in warn mode).
    const old = demoPod({ [HELLO_DENY_LABEL]: "true" });
    const bumped = structuredClone(old);
    (bumped.spec as { containers: { image: string }[] }).containers[0].image = "nginx:2";
    const r = await update(bumped, old);
    expect(r.violations).toEqual([]);
    expect(r.allowed).toBe(true);
  });

  it("a changed image is judged: a new violation denies, one the stored pod had does not", async () => {
    const settings = {
      ...defaultSettings(),
      registries: { ...defaultSettings().registries, allowed: ["ghcr.io"] },
    };
    const pod = (...images: string[]): KubeObject => ({
      ...demoPod(),
      spec: { containers: images.map((image, i) => ({ name: `c${i}`, image })) },
    });
    const run = (now: KubeObject, old: KubeObject) =>
      review([imageRegistryPolicy], now, {
        settings,
        cluster: cluster(),
        operation: "UPDATE",
        oldObject: old,
      });
    const denied = await run(pod("evil.example.com/x:1"), pod("ghcr.io/x:1"));
    expect(denied.allowed).toBe(false);
    expect(denied.violations.map(v => v.rule)).toEqual(["registry-not-allowed"]);
    // c0 came from a registry that is not allowed since creation; only c1 changes, to an allowed one.
    const kept = await run(pod("quay.io/x:1", "ghcr.io/y:2"), pod("quay.io/x:1", "ghcr.io/y:1"));
    expect(kept.violations).toEqual([]);
    expect(kept.allowed).toBe(true);
  });

  it("containersChanged sees images and ephemeral containers, not metadata or tolerations", () => {
    const old = demoPod();
    const same = structuredClone(old);
    same.metadata!.labels = { x: "y" };
    (same.spec as Record<string, unknown>).tolerations = [{ key: "k", operator: "Exists" }];
    expect(containersChanged(same, old)).toBe(false);
    const image = structuredClone(old);
    (image.spec as { containers: { image: string }[] }).containers[0].image = "nginx:2";
    expect(containersChanged(image, old)).toBe(true);
    const debug = structuredClone(old);
    (debug.spec as Record<string, unknown>).ephemeralContainers = [{ name: "d", image: "busybox" }];
    expect(containersChanged(debug, old)).toBe(true);
  });
});

describe("engine with workloads.mutate", () => {
  const deployment = (): KubeObject => ({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "d", namespace: "pepr-demo" },
    spec: {
      selector: { matchLabels: { app: "d" } },
      template: {
        metadata: { labels: { app: "d" } },
        spec: { containers: [{ name: "c", image: "nginx" }] },
      },
    },
  });
  const on = () => ({
    ...defaultSettings(),
    workloads: { ...defaultSettings().workloads, mutate: true },
  });
  const template = (obj: KubeObject) =>
    (obj.spec as { template: { metadata: KubeObject["metadata"] } }).template;

  it("fixes the template itself, records the fix on it, and a second run changes nothing", async () => {
    const d = deployment();
    const first = await mutateIn(d, on());
    expect(first.changes.map(c => c.rule)).toEqual(["greet"]);
    expect(template(d).metadata?.labels?.[HELLO_LABEL]).toBe("true");
    expect(template(d).metadata?.annotations?.["admission-guard.dev/fixed"]).toBe(
      "hello-pepr/greet",
    );
    const snapshot = JSON.stringify(d);
    expect((await mutateIn(d, on())).changes).toEqual([]);
    expect(JSON.stringify(d)).toBe(snapshot);
  });

  it("review() returns the fixed workload and says fixed, not 'its pods will get'", async () => {
    const input = deployment();
    const r = await review([helloPeprPolicy], input, { settings: on(), cluster: cluster() });
    expect(template(r.object).metadata?.labels?.[HELLO_LABEL]).toBe("true");
    expect(r.warnings.join("\n")).toContain("admission-guard/hello-pepr: fixed ");
    expect(r.warnings.join("\n")).not.toContain("its pods will get");
    expect(template(input).metadata?.labels?.[HELLO_LABEL]).toBeUndefined(); // input untouched
  });

  it("leaves alone a workload a controller made (a Deployment's ReplicaSet): its template is its owner's", async () => {
    const rs: KubeObject = {
      ...deployment(),
      kind: "ReplicaSet",
      metadata: {
        name: "d-5f7c9",
        namespace: "pepr-demo",
        ownerReferences: [
          { apiVersion: "apps/v1", kind: "Deployment", name: "d", uid: "u", controller: true },
        ],
      },
    };
    expect((await mutateIn(rs, on())).changes).toEqual([]);
    expect(template(rs).metadata?.labels?.[HELLO_LABEL]).toBeUndefined();
  });

  it("off (the default): the template is left alone, and its pods' fixes are announced", async () => {
    const r = await review([helloPeprPolicy], deployment(), {
      settings: defaultSettings(),
      cluster: cluster(),
    });
    expect(template(r.object).metadata?.annotations).toBeUndefined();
    expect(r.warnings.join("\n")).toContain("its pods will get");
    expect((await mutateIn(deployment())).changes).toEqual([]);
  });
});

describe("engine: one decision path", () => {
  const stampedPolicy = (name: string): Policy =>
    asArea({
      name,
      description: "",
      rules: [],
      fix: () => [{ rule: "r", message: "m", capability: "someone-else" } as never],
      check: () => ({
        changes: [],
        violations: [{ rule: "v", message: "bad", fix: "f", capability: "someone-else" } as never],
        warnings: [],
      }),
    });

  it("stamps the capability on what a rule returns, whatever the rule said", async () => {
    const p = stampedPolicy("mine");
    const r = await review(
      [p],
      { ...demoPod(), metadata: { name: "p", namespace: "ns" } },
      {
        settings: defaultSettings(),
        cluster: new SnapshotCluster([]),
      },
    );
    expect(r.changes.map(c => c.capability)).toEqual(["mine"]);
    expect(r.violations.map(v => v.capability)).toEqual(["mine"]);
  });

  it("an unknown mode label is said once, by the first policy that acts, asked one by one or together", async () => {
    const a = stampedPolicy("a");
    const b = stampedPolicy("b");
    const c = new SnapshotCluster([
      {
        kind: "Namespace",
        metadata: { name: "ns", labels: { "admission-guard.dev/mode": "sometimes" } },
      },
    ]);
    const deps = { settings: defaultSettings(), cluster: c, policies: [a, b] };
    const input = {
      object: { ...demoPod(), metadata: { name: "p", namespace: "ns" } },
      operation: "CREATE" as const,
      dryRun: false,
    };
    const one = (await answer(input, deps, [a])).warnings.filter(w => w.includes("sometimes"));
    const two = (await answer(input, deps, [b])).warnings.filter(w => w.includes("sometimes"));
    const both = (await answer(input, deps, [a, b])).warnings.filter(w => w.includes("sometimes"));
    expect([one.length, two.length, both.length]).toEqual([1, 0, 1]);
  });

  it("a fix that throws is recorded by the mutation and denied by the validation, with the reason", async () => {
    const throwing: Policy = asArea({
      name: "explodes",
      description: "",
      rules: [],
      fix: () => {
        throw new Error("boom");
      },
    });
    const deps = {
      settings: defaultSettings(),
      cluster: new SnapshotCluster([]),
      policies: [throwing],
    };
    const object: KubeObject = { ...demoPod(), metadata: { name: "p", namespace: "ns" } };
    const input = { object, operation: "CREATE" as const, dryRun: false };
    const mutated = await mutate(input, deps, [throwing]);
    expect(mutated.errors.map(e => e.rule)).toEqual(["internal-error"]);
    expect(object.metadata?.annotations?.["admission-guard.dev/fix-failed"]).toBe(
      '{"explodes":"boom"}',
    );
    const answered = await answer(input, deps, [throwing]);
    expect(answered.allowed).toBe(false);
    expect(answered.denials).toEqual([
      "admission-guard/explodes: the fix step failed on this object (boom). Fix: check the object is well-formed; if it is, report this bug and meanwhile set the namespace to warn mode: kubectl label namespace <ns> admission-guard.dev/mode=warn --overwrite",
    ]);
  });
});

describe("a capability switched off (its settings section's enabled: false)", () => {
  const all = [imageRegistryPolicy, helloPeprPolicy];
  const settings = parseSettings({ registries: { enabled: false, allowed: ["ghcr.io"] } });
  const deps = { settings, cluster: cluster(), policies: all };
  const fromDockerHub = demoPod(); // image nginx: docker.io, not allowed

  it("the one applicability decision says why it does not act", () => {
    const ctx = contextFor(fromDockerHub, { settings, cluster: cluster() });
    expect(applicability(imageRegistryPolicy, ctx)).toBe("disabled");
    expect(applicability(helloPeprPolicy, ctx)).toBe("applies");
    const off = contextFor(fromDockerHub, {
      settings,
      cluster: cluster({ "admission-guard.dev/mode": "off" }),
    });
    expect(applicability(helloPeprPolicy, off)).toBe("mode-off");
    const system = contextFor(fromDockerHub, {
      settings,
      cluster: cluster(),
      namespace: "kube-system",
    });
    expect(applicability(helloPeprPolicy, { ...system, namespaceName: "kube-system" })).toBe(
      "ignored-namespace",
    );
  });

  it("judges nothing, is not counted as allowed, and lists its rules as not evaluated", async () => {
    const r = await answer(
      { object: fromDockerHub, operation: "CREATE", dryRun: false },
      deps,
      all,
    );
    expect(r.allowed).toBe(true);
    expect(r.violations).toEqual([]);
    expect(r.judgedBy.map(p => p.name)).toEqual([helloPeprPolicy.name]);
    expect(r.events.map(e => e.capability)).not.toContain(imageRegistryPolicy.name);
    expect(r.skipped).toEqual(
      imageRegistryPolicy.rules.map(rule => ({
        capability: "image-registry",
        rule,
        reason: "image-registry is switched off (settings registries.enabled: false)",
      })),
    );
  });

  it("switched on, the same pod is denied by it (the test above could fail)", async () => {
    const on = { ...deps, settings: parseSettings({ registries: { allowed: ["ghcr.io"] } }) };
    const r = await answer({ object: demoPod(), operation: "CREATE", dryRun: false }, on, all);
    expect(r.allowed).toBe(false);
    expect(r.judgedBy.map(p => p.name)).toContain("image-registry");
  });

  it("alone, the object is not handled at all", async () => {
    const r = await answer(
      { object: fromDockerHub, operation: "CREATE", dryRun: false },
      { ...deps, policies: [imageRegistryPolicy] },
      [imageRegistryPolicy],
    );
    expect(r.handled).toBe(false);
    expect(r.events).toEqual([]);
  });
});
