// The trace the mutating webhook leaves (lib/objects/fix-trace.ts), read back as the validating
// webhook, the Events and the reports read it: parsed once per value, the same answer every time.
import { recordedFixes, recordFixes } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import { NS_KEYS } from "../../../lib/settings";

const traced = (value: string): KubeObject => ({
  kind: "Pod",
  metadata: { annotations: { [NS_KEYS.fixed]: value } },
});

describe("the fix trace read back", () => {
  it("groups rules by capability, skipping malformed entries, the same for every object with that value", () => {
    const value = "labels/component, security-context/runAsUser,bad,/x,y/,security-context/seccomp";
    const first = recordedFixes(traced(value));
    expect([...first]).toEqual([
      ["labels", ["component"]],
      ["security-context", ["runAsUser", "seccomp"]],
    ]);
    expect([...recordedFixes(traced(value))]).toEqual([...first]);
    expect(recordedFixes({ kind: "Pod" }).size).toBe(0);
    expect(recordedFixes(traced("labels/component")).get("security-context")).toBeUndefined();
  });

  it("a value longer than any real trace is still read in full", () => {
    const many = Array.from({ length: 300 }, (_, i) => `area-${i}/rule`).join(",");
    expect(many.length).toBeGreaterThan(2048);
    const read = recordedFixes(traced(many));
    expect(read.size).toBe(300);
    expect(read.get("area-299")).toEqual(["rule"]);
  });

  it("a fix recorded later is read, not an earlier reading of the object", () => {
    const pod: KubeObject = { kind: "Pod", metadata: {} };
    recordFixes(pod, [{ capability: "labels", rule: "component", message: "" }]);
    expect(recordedFixes(pod).get("labels")).toEqual(["component"]);
    recordFixes(pod, [{ capability: "security-context", rule: "runAsUser", message: "" }]);
    expect(recordedFixes(pod).get("security-context")).toEqual(["runAsUser"]);
    expect(recordedFixes(pod).get("labels")).toEqual(["component"]);
  });
});
