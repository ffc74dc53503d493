// team-label (the worked example of docs/add-a-capability.md) through the one engine with every
// capability, as the webhook and `check` run it: review() is what `check` runs on a manifest.
import { policies } from "../../../capabilities";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { review } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import { parseSettings, SettingsError, type SettingsInput } from "../../../lib/settings";
import { CAPABILITY } from "../../../capabilities/team-label/rules";

type Obj = Record<string, unknown>;
const namespace = (name: string, labels: Record<string, string> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Namespace",
  metadata: { name, labels },
});
const pod = (labels: Record<string, string> = {}, ns = "ml"): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "train", namespace: ns, labels },
  spec: { containers: [{ name: "c", image: "ghcr.io/org/train:1" }] },
});
const deployment = (labels: Record<string, string> = {}): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "serve", namespace: "ml" },
  spec: {
    selector: { matchLabels: { app: "serve" } },
    template: { metadata: { labels: { app: "serve", ...labels } }, spec: pod().spec },
  },
});
const on = (teamLabel: SettingsInput["teamLabel"] = {}) =>
  parseSettings({ teamLabel: { enabled: true, ...teamLabel } });

async function judge(object: KubeObject, settings = on(), nsLabels: Record<string, string> = {}) {
  const cluster = new SnapshotCluster([namespace("ml", nsLabels)]);
  const result = await review(policies, object, { settings, cluster });
  return {
    ...result,
    ours: result.changes.filter(c => c.capability === CAPABILITY).map(c => c.message),
    label: (result.object.metadata?.labels as Obj | undefined)?.team,
    said: result.warnings.filter(w => w.startsWith(`admission-guard/${CAPABILITY}:`)),
  };
}

describe("the fix: the namespace's team label", () => {
  it("a pod without it gets the namespace's value, said with the field", async () => {
    const r = await judge(pod(), on(), { team: "vision" });
    expect(r.label).toBe("vision");
    expect(r.ours).toEqual(['metadata.labels["team"]="vision" (from namespace ml)']);
    expect(r.allowed).toBe(true);
    // The admission warning names the rule that fixed it; no warning that it is missing.
    expect(r.said).toEqual(["admission-guard/team-label: fixed from-namespace"]);
  });

  it("a value the user set is kept, even one that differs from the namespace's", async () => {
    const r = await judge(pod({ team: "nlp" }), on(), { team: "vision" });
    expect(r.label).toBe("nlp");
    expect(r.ours).toEqual([]);
  });

  it("fixing twice equals fixing once", async () => {
    const once = await judge(pod(), on(), { team: "vision" });
    const twice = await judge(once.object, on(), { team: "vision" });
    expect(twice.ours).toEqual([]);
    expect(twice.object.metadata?.labels).toEqual(once.object.metadata?.labels);
  });

  it("the key is a setting", async () => {
    const r = await judge(pod(), on({ key: "example.com/cost-center" }), {
      "example.com/cost-center": "cc-42",
    });
    expect((r.object.metadata?.labels as Obj)["example.com/cost-center"]).toBe("cc-42");
    expect(r.label).toBeUndefined();
  });

  it("malformed labels are left alone (the API server refuses them), nothing thrown", async () => {
    const bad = pod();
    (bad.metadata as Obj).labels = ["team", "vision"];
    const r = await judge(bad, on(), { team: "vision" });
    expect(r.ours).toEqual([]);
  });

  it("a Deployment: its pods will get it, said on the template's path", async () => {
    const r = await judge(deployment(), on(), { team: "vision" });
    expect(r.ours).toEqual(['spec.template.metadata.labels["team"]="vision" (from namespace ml)']);
    expect(r.allowed).toBe(true);
  });
});

describe("the check: a pod left without it", () => {
  it("warn (the default): admitted, the warning names the label, the namespace and both fixes", async () => {
    const r = await judge(pod());
    expect(r.allowed).toBe(true);
    expect(r.said).toEqual([
      'admission-guard/team-label: Pod ml/train would have no label team, and namespace ml has none to give. Fix: set metadata.labels["team"], or label the namespace: kubectl label namespace ml team=<team>',
    ]);
  });

  it("deny: refused under rule required, with the same fix", async () => {
    const r = await judge(pod(), on({ missing: "deny" }));
    expect(r.allowed).toBe(false);
    expect(r.violations.map(v => `${v.capability}/${v.rule}`)).toEqual(["team-label/required"]);
    expect(r.denials.join("\n")).toContain(
      'admission-guard/team-label: Pod ml/train would have no label team, and namespace ml has none to give. Fix: set metadata.labels["team"], or label the namespace: kubectl label namespace ml team=<team>',
    );
    // A Deployment: named by its pods, on the template's field.
    const d = await judge(deployment(), on({ missing: "deny" }));
    expect(d.denials.join("\n")).toContain(
      'the pods of Deployment ml/serve would have no label team, and namespace ml has none to give. Fix: set spec.template.metadata.labels["team"]',
    );
  });

  it("deny, with the namespace's label: the fix gives it, nothing refused", async () => {
    const r = await judge(pod(), on({ missing: "deny" }), { team: "vision" });
    expect(r.allowed).toBe(true);
  });

  it("off: nothing said; and the capability off (the default) does nothing at all", async () => {
    expect((await judge(pod(), on({ missing: "off" }))).said).toEqual([]);
    const off = await judge(pod(), parseSettings({}), { team: "vision" });
    expect(off.ours).toEqual([]);
    expect(off.label).toBeUndefined();
    expect(off.judgedBy.map(p => p.name)).not.toContain(CAPABILITY);
  });
});

describe("its settings", () => {
  it("a key that is no label key, and an unknown choice, are refused naming the setting", () => {
    expect(() => parseSettings({ teamLabel: { key: "team name" } })).toThrow(SettingsError);
    expect(() => parseSettings({ teamLabel: { key: "team name" } })).toThrow(
      /teamLabel\.key: must be a label key/,
    );
    expect(() => parseSettings({ teamLabel: { missing: "block" } })).toThrow(/teamLabel\.missing/);
    expect(parseSettings({ teamLabel: { key: "example.com/team" } }).teamLabel.key).toBe(
      "example.com/team",
    );
  });
});
