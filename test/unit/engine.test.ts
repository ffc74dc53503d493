import { decide, fixPod, modeOf, contextFor, review, recordedFixes } from "../../lib/engine";
import { SnapshotCluster } from "../../lib/cluster";
import { defaultSettings } from "../../lib/settings";
import { helloPepr, HELLO_DENY_LABEL, HELLO_LABEL } from "../../hello-pepr";
import type { KubeObject } from "../../lib/pod";

const demoPod = (labels: Record<string, string> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p", namespace: "pepr-demo", labels },
  spec: { containers: [{ name: "c", image: "nginx" }] },
});

const cluster = (nsLabels: Record<string, string> = {}) =>
  new SnapshotCluster([{ kind: "Namespace", metadata: { name: "pepr-demo", labels: nsLabels } }]);

describe("engine with the hello-pepr template capability", () => {
  it("fixes a pod once, records the fix, and a second run changes nothing", async () => {
    const pod = demoPod();
    const ctx = contextFor(pod, { settings: defaultSettings(), cluster: cluster() });
    const first = await fixPod([helloPepr], pod, ctx);
    expect(first.changes.map(c => c.rule)).toEqual(["greet"]);
    expect(pod.metadata?.labels?.[HELLO_LABEL]).toBe("true");
    expect(recordedFixes(pod).get("hello-pepr")).toEqual(["greet"]);
    const snapshot = JSON.stringify(pod);
    const second = await fixPod([helloPepr], pod, ctx);
    expect(second.changes).toEqual([]);
    expect(JSON.stringify(pod)).toBe(snapshot);
  });

  it("does not act outside its namespaces", async () => {
    const pod = { ...demoPod(), metadata: { name: "p", namespace: "other" } };
    const r = await review([helloPepr], pod, { settings: defaultSettings(), cluster: cluster() });
    expect(r.handled).toBe(false);
    expect(r.changes).toEqual([]);
  });

  it("denies in enforce mode, warns in warn mode, stays silent in audit, does nothing when off", async () => {
    const pod = demoPod({ [HELLO_DENY_LABEL]: "true" });
    const settings = defaultSettings();
    const enforce = await review([helloPepr], pod, { settings, cluster: cluster() });
    expect(enforce.allowed).toBe(false);
    expect(enforce.violations[0]).toMatchObject({
      capability: "hello-pepr",
      rule: "no-deny-label",
    });

    const warn = await review([helloPepr], pod, {
      settings,
      cluster: cluster({ "admission-guard.dev/mode": "warn" }),
    });
    expect(warn.allowed).toBe(true);
    expect(warn.warnings.join("\n")).toMatch(
      /admission-guard\/hello-pepr: .*Fix: remove the label/,
    );

    const audit = await review([helloPepr], pod, {
      settings,
      cluster: cluster({ "admission-guard.dev/mode": "audit" }),
    });
    expect(audit.allowed).toBe(true);
    expect(audit.warnings).toEqual([]);

    const off = await review([helloPepr], pod, {
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
    const r = await review([helloPepr], deployment, {
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
      ...helloPepr,
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
    const other = { ...helloPepr, name: "other" };
    const pod: KubeObject = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "x", namespace: "pepr-demo" },
    };
    const r = await review([helloPepr, other], pod, {
      settings: defaultSettings(),
      cluster: cluster(),
    });
    expect(r.allowed).toBe(false);
    expect(r.violations.map(v => v.rule)).toEqual(["malformed-object"]);
  });
});
