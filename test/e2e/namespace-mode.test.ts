// Namespace modes reach the controller through its watch on namespaces (lib/cluster/live.ts):
// a label set on the Namespace in the stand-in arrives as a watch event, and the next request
// follows it. Also: the controller keeps answering from its caches while the API is down, and
// picks up changes once it is back.
import type { KubeObject } from "../../lib/objects/pod";
import { startEnvironment, useEnvironment } from "../support/environment";
import { NS_KEYS } from "../../lib/settings";
import { admit } from "../support/admission";
import { checkParity, settingsEnv } from "../support/parity";
import { eventually } from "../support/wait";
import { DEMO_NS, deniedDemoPod } from "./cases";

const namespace = (labels: Record<string, string> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Namespace",
  metadata: { name: DEMO_NS, labels },
});

const env = useEnvironment({ objects: [namespace()] });

/** Waits until the controller's verdict on the deny-label pod is `allowed`. */
const verdictBecomes = (allowed: boolean) =>
  eventually(async () => {
    const result = await admit(env.controller, deniedDemoPod());
    if (result.allowed !== allowed) throw new Error(`still allowed=${result.allowed}`);
    return result;
  });

describe("namespace mode label, through the watch", () => {
  it("enforce (no label): denied", async () => {
    expect((await admit(env.controller, deniedDemoPod())).allowed).toBe(false);
  });

  it("warn: allowed, the violation returned as a warning; parity holds", async () => {
    env.api.put(namespace({ [NS_KEYS.mode]: "warn" }));
    const result = await verdictBecomes(true);
    expect(result.warnings).toContainEqual(
      expect.stringMatching(/^admission-guard\/hello-pepr: .*Fix: remove the label/),
    );
    const report = await checkParity(env.controller, deniedDemoPod(), {
      objects: env.api.objects(),
    });
    expect(report.differences).toEqual([]);
  });

  it("off: allowed, not mutated", async () => {
    env.api.put(namespace({ [NS_KEYS.mode]: "off" }));
    await eventually(async () => {
      const result = await admit(env.controller, deniedDemoPod());
      expect(result.allowed).toBe(true);
      expect(result.warnings).toEqual([]);
      expect(
        result.patched.metadata?.labels?.["hello.admission-guard.dev/greeted"],
      ).toBeUndefined();
    });
  });

  it("an unknown mode value enforces and says so", async () => {
    env.api.put(namespace({ [NS_KEYS.mode]: "bogus" }));
    const result = await verdictBecomes(false);
    expect(result.warnings.join("\n")).toContain(`${NS_KEYS.mode}="bogus"`);
  });

  it("label removed: enforce again", async () => {
    env.api.put(namespace({ [NS_KEYS.mode]: "warn" }));
    await verdictBecomes(true);
    env.api.put(namespace());
    await verdictBecomes(false);
  });
});

describe("API server outage", () => {
  it("answers from its caches while the API is down, and catches up once it is back", async () => {
    env.api.put(namespace({ [NS_KEYS.mode]: "warn" }));
    await verdictBecomes(true);
    env.api.setDown(true);
    try {
      // A change the controller cannot see yet: its cache still says warn.
      env.api.put(namespace({ [NS_KEYS.mode]: "enforce" }));
      const during = await admit(env.controller, deniedDemoPod());
      expect(during.allowed).toBe(true);
      expect(env.api.watching("Namespace")).toBe(0);
    } finally {
      env.api.setDown(false);
    }
    // The watch reconnects (list, then watch) and the change arrives.
    await eventually(async () => {
      expect((await admit(env.controller, deniedDemoPod())).allowed).toBe(false);
    }, 30_000);
  }, 60_000);
});

describe("settings through the controller's environment", () => {
  it("mode=warn by default: allowed with the violation as a warning, parity holds", async () => {
    const settings = { mode: "warn" as const };
    const warn = await startEnvironment({ objects: [namespace()], env: settingsEnv(settings) });
    try {
      const report = await checkParity(warn.controller, deniedDemoPod(), {
        objects: warn.api.objects(),
        settings,
      });
      expect(report.e2e.allowed).toBe(true);
      expect(report.e2e.warnings.join("\n")).toContain("admission-guard/hello-pepr:");
      expect(report.differences).toEqual([]);
    } finally {
      await warn.stop();
    }
  }, 60_000);

  it("a bad setting stops start-up with a message naming it", async () => {
    // zod's own words, in English: the bundle sets zod/mini's locale (lib/objects/zod-messages.ts).
    await expect(
      startEnvironment({ objects: [namespace()], env: { ADMISSION_GUARD_MODE: "sometimes" } }),
    ).rejects.toThrow(
      /exited during start-up[\s\S]*mode \(ADMISSION_GUARD_MODE\): Invalid option: expected one of \\?"enforce\\?"\|\\?"warn\\?"/,
    );
  }, 60_000);
});
