import { labelsPolicy } from "../../../capabilities/labels";
import {
  APP_LABEL,
  COMPONENT_LABEL,
  NAME_LABEL,
  carryAppLabel,
} from "../../../capabilities/labels/rules";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { contextFor, review } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import { podTemplateOf } from "../../../lib/workload-kinds/built-in";
import { parseSettings, type SettingsInput } from "../../../lib/settings";
import * as fc from "fast-check";

const NS = "gpt4-canary";
const pod = (
  labels?: Record<string, string>,
  extra: Partial<KubeObject["metadata"]> = {},
): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "test-gpt4", namespace: NS, ...(labels ? { labels } : {}), ...extra },
  spec: { containers: [{ name: "inference", image: "openai/gpt4-inference:1.0" }] },
});
// Seed 002's Deployment ("before"): selector and template use app: gpt4.
const deployment = (templateLabels: Record<string, string>): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "gpt4-canary", namespace: NS },
  spec: {
    replicas: 2,
    selector: { matchLabels: { app: "gpt4" } },
    template: {
      metadata: { labels: templateLabels },
      spec: { containers: [{ name: "inference", image: "openai/gpt4-inference:1.0" }] },
    },
  },
});
const cluster = (nsLabels: Record<string, string> = {}) =>
  new SnapshotCluster([{ kind: "Namespace", metadata: { name: NS, labels: nsLabels } }]);
const settings = (labels: SettingsInput["labels"] = {}) => parseSettings({ labels });
const policies = [labelsPolicy];

async function fixOnce(obj: KubeObject, s = settings()) {
  const ctx = contextFor(obj, { settings: s, cluster: cluster() });
  const template = podTemplateOf(obj)!;
  return carryAppLabel({ object: obj, template, isTemplate: obj.kind !== "Pod" }, ctx);
}

describe("labels: carry the app label", () => {
  it("adds component and name from app, keeps app (seed 002)", async () => {
    const r = await review(policies, pod({ app: "gpt4", tier: "canary" }), {
      settings: settings(),
      cluster: cluster(),
    });
    expect(r.allowed).toBe(true);
    expect(r.object.metadata?.labels).toEqual({
      app: "gpt4",
      tier: "canary",
      [COMPONENT_LABEL]: "gpt4",
      [NAME_LABEL]: "gpt4",
    });
    expect(r.changes.map(c => c.rule)).toEqual(["component-from-app", "component-from-app"]);
  });

  it("never overwrites an existing value, and warns when it differs", async () => {
    const r = await review(policies, pod({ app: "gpt4", [COMPONENT_LABEL]: "inference" }), {
      settings: settings(),
      cluster: cluster(),
    });
    expect(r.object.metadata?.labels?.[COMPONENT_LABEL]).toBe("inference");
    expect(r.object.metadata?.labels?.[NAME_LABEL]).toBe("gpt4");
    expect(r.warnings.join("\n")).toMatch(
      /admission-guard\/labels: .*app\.kubernetes\.io\/component="inference", which differs from app="gpt4"/,
    );
  });

  it("does nothing without an app label, or with mutation off", async () => {
    expect(await fixOnce(pod({ tier: "x" }))).toEqual([]);
    expect(await fixOnce(pod())).toEqual([]);
    expect(await fixOnce(pod({ app: "gpt4" }), settings({ mutate: false }))).toEqual([]);
    // Switched off, the engine runs no fix of it at all.
    const off = await review([labelsPolicy], pod({ app: "gpt4" }), {
      settings: settings({ enabled: false }),
      cluster: cluster(),
    });
    expect([off.changes, off.object.metadata?.labels]).toEqual([[], { app: "gpt4" }]);
  });

  it("removes app only when opted in, and never on a pod with an owner", async () => {
    const on = settings({ removeLegacyAppLabel: true });
    const bare = pod({ app: "gpt4" });
    await fixOnce(bare, on);
    expect(bare.metadata?.labels?.[APP_LABEL]).toBeUndefined();
    expect(bare.metadata?.labels?.[COMPONENT_LABEL]).toBe("gpt4");

    const owned = pod(
      { app: "gpt4" },
      { ownerReferences: [{ apiVersion: "apps/v1", kind: "ReplicaSet", name: "rs", uid: "u" }] },
    );
    await fixOnce(owned, on);
    expect(owned.metadata?.labels?.[APP_LABEL]).toBe("gpt4");

    const differs = pod({ app: "gpt4", [COMPONENT_LABEL]: "other" });
    await fixOnce(differs, on);
    expect(differs.metadata?.labels?.[APP_LABEL]).toBe("gpt4");
  });

  it("never removes app from a workload template, whose selector uses it", async () => {
    const d = deployment({ app: "gpt4" });
    await fixOnce(d, settings({ removeLegacyAppLabel: true }));
    expect(podTemplateOf(d)!.metadata.labels?.[APP_LABEL]).toBe("gpt4");
  });

  it("a Deployment is not changed, and warns what its pods will get", async () => {
    const d = deployment({ app: "gpt4", tier: "canary" });
    const before = JSON.stringify(d);
    const r = await review(policies, d, { settings: settings(), cluster: cluster() });
    expect(JSON.stringify(d)).toBe(before);
    expect(r.allowed).toBe(true);
    expect(r.warnings.join("\n")).toMatch(
      /its pods will get spec\.template\.metadata\.labels\["app\.kubernetes\.io\/component"\]="gpt4"/,
    );
  });

  it("survives malformed labels", async () => {
    const bad = pod();
    (bad.metadata as Record<string, unknown>).labels = ["app"];
    expect(await fixOnce(bad)).toEqual([]);
    const nonString = pod();
    (nonString.metadata as Record<string, unknown>).labels = { app: 5 };
    expect(await fixOnce(nonString)).toEqual([]);
    const r = await review(
      policies,
      { kind: "Pod", metadata: { namespace: NS } },
      {
        settings: settings(),
        cluster: cluster(),
      },
    );
    expect(r.allowed).toBe(false);
    // Denied as malformed, said once, with the fix — not an internal error of a rule.
    expect(r.violations.map(v => v.rule)).toEqual(["malformed-object"]);
    expect(r.denials[0]).toMatch(/has no spec.*Fix: give the Pod a spec with containers/);
  });

  it("is idempotent for any labels (property)", async () => {
    const key = fc.constantFrom(APP_LABEL, COMPONENT_LABEL, NAME_LABEL, "tier");
    const value = fc.stringMatching(/^[a-z0-9]{0,6}$/);
    await fc.assert(
      fc.asyncProperty(
        fc.dictionary(key, value),
        fc.boolean(),
        fc.boolean(),
        async (labels, remove, owned) => {
          const p = pod(
            { ...labels },
            owned
              ? { ownerReferences: [{ apiVersion: "v1", kind: "ReplicaSet", name: "r", uid: "u" }] }
              : {},
          );
          const s = settings({ removeLegacyAppLabel: remove });
          await fixOnce(p, s);
          const once = JSON.stringify(p);
          expect(await fixOnce(p, s)).toEqual([]);
          expect(JSON.stringify(p)).toBe(once);
          const after = p.metadata?.labels ?? {};
          // Never overwrites a value that was set.
          for (const k of [COMPONENT_LABEL, NAME_LABEL])
            if (labels[k] !== undefined) expect(after[k]).toBe(labels[k]);
          // app survives unless opted in on an unowned pod.
          if (labels.app && (!remove || owned)) expect(after.app).toBe(labels.app);
        },
      ),
    );
  });
});

describe("labels: a namespace requires the component label", () => {
  const requires = (value: string) => cluster({ "admission-guard.dev/require-component": value });

  it("a pod whose app label supplies the required value passes after mutation", async () => {
    const r = await review(policies, pod({ app: "gpt4" }), {
      settings: settings(),
      cluster: requires("gpt4"),
    });
    expect(r.allowed).toBe(true);
  });

  it("denies a pod with another component value, naming it and the fix", async () => {
    const r = await review(policies, pod({ app: "gpt4-canary" }), {
      settings: settings(),
      cluster: requires("gpt4"),
    });
    expect(r.allowed).toBe(false);
    expect(r.violations).toHaveLength(1);
    expect(r.violations[0]).toMatchObject({ capability: "labels", rule: "require-component" });
    expect(r.violations[0].message).toBe(
      `Pod ${NS}/test-gpt4 would have app.kubernetes.io/component="gpt4-canary", but namespace ${NS} requires app.kubernetes.io/component="gpt4" (admission-guard.dev/require-component)`,
    );
    expect(r.violations[0].fix).toBe('set metadata.labels["app.kubernetes.io/component"]="gpt4"');
  });

  it("* requires any value; a pod with no labels at all is told both ways to fix it", async () => {
    const r = await review(policies, pod(), { settings: settings(), cluster: requires("*") });
    expect(r.allowed).toBe(false);
    expect(r.violations[0].message).toMatch(
      /neither an app\.kubernetes\.io\/component label nor an app label/,
    );
    expect(r.violations[0].fix).toMatch(/="<component>" \(or an app label/);
    const ok = await review(policies, pod({ [COMPONENT_LABEL]: "x" }), {
      settings: settings(),
      cluster: requires("*"),
    });
    expect(ok.allowed).toBe(true);
    // An empty label value counts as "*".
    const empty = await review(policies, pod({ app: "x" }), {
      settings: settings(),
      cluster: requires(""),
    });
    expect(empty.allowed).toBe(true);
  });

  it("with mutation off, the app label does not satisfy the requirement", async () => {
    const r = await review(policies, pod({ app: "gpt4" }), {
      settings: settings({ mutate: false }),
      cluster: requires("gpt4"),
    });
    expect(r.allowed).toBe(false);
    expect(r.violations[0].fix).not.toMatch(/app label/);
  });

  it("denies a workload whose template would lack it, at apply time, with the template path", async () => {
    const r = await review(policies, deployment({ app: "gpt4-canary" }), {
      settings: settings(),
      cluster: requires("gpt4"),
    });
    expect(r.allowed).toBe(false);
    expect(r.violations[0].message).toMatch(
      /^the pods of Deployment gpt4-canary\/gpt4-canary would have/,
    );
    expect(r.violations[0].fix).toMatch(
      /^set spec\.template\.metadata\.labels\["app\.kubernetes\.io\/component"\]="gpt4" \(the selector may keep/,
    );
    const ok = await review(policies, deployment({ app: "gpt4" }), {
      settings: settings(),
      cluster: requires("gpt4"),
    });
    expect(ok.allowed).toBe(true);
  });

  it("warn mode reports instead of denying; an unknown namespace requires nothing", async () => {
    const r = await review(policies, pod({ app: "x" }), {
      settings: settings(),
      cluster: cluster({
        "admission-guard.dev/require-component": "gpt4",
        "admission-guard.dev/mode": "warn",
      }),
    });
    expect(r.allowed).toBe(true);
    expect(r.warnings.join("\n")).toMatch(/requires app\.kubernetes\.io\/component="gpt4"/);
    const unknown = await review(policies, pod({ app: "x" }), {
      settings: settings(),
      cluster: new SnapshotCluster([]),
    });
    expect(unknown.allowed).toBe(true);
  });
});
