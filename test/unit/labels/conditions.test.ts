// The conditions that decide a labels violation, warning or fix, one case each side of the line:
// cases mutation testing (npm run test:mutation) found no test for.
import { carryAppLabel, checkLabels, COMPONENT_LABEL } from "../../../capabilities/labels/rules";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { contextFor, review } from "../../../lib/engine";
import { labelsPolicy } from "../../../capabilities/labels";
import type { KubeObject } from "../../../lib/objects/pod";
import { podTemplateOf } from "../../../lib/workload-kinds/built-in";
import { NS_KEYS, parseSettings, type SettingsInput } from "../../../lib/settings";

const pod = (metadata: Record<string, unknown>): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p", namespace: "ml", ...metadata },
  spec: { containers: [{ name: "c", image: "i" }] },
});

const ctxFor = (
  obj: KubeObject,
  labels: SettingsInput["labels"] = {},
  nsLabels: Record<string, string> = {},
) =>
  contextFor(obj, {
    settings: parseSettings({ labels }),
    cluster: new SnapshotCluster([
      { kind: "Namespace", metadata: { name: "ml", labels: nsLabels } },
    ]),
  });

const target = (obj: KubeObject) => ({
  object: obj,
  template: podTemplateOf(obj)!,
  isTemplate: false,
});

function fix(metadata: Record<string, unknown>, labels: SettingsInput["labels"] = {}) {
  const obj = pod(metadata);
  const changes = carryAppLabel(target(obj) as never, ctxFor(obj, labels));
  return { changes, labels: obj.metadata?.labels as unknown };
}

function check(
  metadata: Record<string, unknown>,
  nsLabels: Record<string, string> = {},
  labels: SettingsInput["labels"] = {},
) {
  const obj = pod(metadata);
  return checkLabels(obj, target(obj) as never, ctxFor(obj, labels, nsLabels));
}

describe("labels conditions", () => {
  it("labels that are missing or null are created; malformed ones are left alone", () => {
    expect(fix({}).labels).toEqual({});
    expect(fix({ labels: null }).labels).toEqual({});
    expect(fix({ labels: "app=x" })).toEqual({ changes: [], labels: "app=x" });
    expect(fix({ labels: ["app"] })).toEqual({ changes: [], labels: ["app"] });
  });

  it("an empty app label is not copied", () => {
    expect(fix({ labels: { app: "" } })).toEqual({ changes: [], labels: { app: "" } });
  });

  it("removes the legacy app label from a pod whose owner list is empty, not from an owned pod", () => {
    const remove = { removeLegacyAppLabel: true };
    expect(fix({ labels: { app: "x" }, ownerReferences: [] }, remove).labels).toEqual({
      [COMPONENT_LABEL]: "x",
      "app.kubernetes.io/name": "x",
    });
    const owned = [{ apiVersion: "apps/v1", kind: "ReplicaSet", name: "r", uid: "u" }];
    expect(fix({ labels: { app: "x" }, ownerReferences: owned }, remove).labels).toMatchObject({
      app: "x",
    });
  });

  it("warns only when app and component are both set and differ", () => {
    const warns = (labels: Record<string, unknown>) => check({ labels }).warnings.length;
    expect(warns({ app: "a", [COMPONENT_LABEL]: "b" })).toBe(1);
    expect(warns({ app: "a", [COMPONENT_LABEL]: "a" })).toBe(0);
    expect(warns({ app: "a" })).toBe(0);
    expect(warns({ [COMPONENT_LABEL]: "b" })).toBe(0);
    // A label value that is not a string counts as unset.
    expect(warns({ app: "a", [COMPONENT_LABEL]: 5 })).toBe(0);
    expect(check({ labels: "app=a" }).warnings).toEqual([]);
  });

  it("a required component of * or empty accepts any value; a value is trimmed", () => {
    const key = NS_KEYS.requireComponent;
    const denied = (labels: Record<string, string>, ns: Record<string, string>) =>
      check({ labels }, ns).violations.length > 0;
    expect(denied({ [COMPONENT_LABEL]: "anything" }, { [key]: "*" })).toBe(false);
    expect(denied({ [COMPONENT_LABEL]: "anything" }, { [key]: "" })).toBe(false);
    expect(denied({ [COMPONENT_LABEL]: "anything" }, { [key]: "  " })).toBe(false);
    expect(denied({}, { [key]: "*" })).toBe(true);
    expect(denied({ [COMPONENT_LABEL]: "inference" }, { [key]: " inference " })).toBe(false);
    expect(denied({ [COMPONENT_LABEL]: "training" }, { [key]: " inference " })).toBe(true);
  });

  it("labels.enabled=false requires nothing", async () => {
    const ns = { [NS_KEYS.requireComponent]: "inference" };
    const off = await review([labelsPolicy], pod({ labels: { app: "x" } }), {
      settings: parseSettings({ labels: { enabled: false } }),
      cluster: new SnapshotCluster([{ kind: "Namespace", metadata: { name: "ml", labels: ns } }]),
    });
    expect([off.allowed, off.changes, off.violations, off.warnings]).toEqual([true, [], [], []]);
    expect(check({}, ns).violations).toHaveLength(1);
  });
});
