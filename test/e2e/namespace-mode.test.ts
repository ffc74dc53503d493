// Namespace modes reach the controller through its watch on namespaces (lib/cluster-live.ts):
// a label set on the Namespace in the stand-in arrives as a watch event, and the next request
// follows it. Also: the controller keeps answering from its caches while the API is down, and
// picks up changes once it is back.
import type { KubeObject } from "../../lib/pod";
import { NS_KEYS } from "../../lib/settings";
import { admit } from "../support/admission";
import { startController, type Controller } from "../support/controller";
import { checkParity } from "../support/parity";
import { startStandIn, type StandInApi } from "../support/stand-in-api";
import { cachesSynced, eventually } from "../support/wait";
import { DEMO_NS, deniedDemoPod } from "./cases";

let api: StandInApi;
let controller: Controller;

const namespace = (labels: Record<string, string> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Namespace",
  metadata: { name: DEMO_NS, labels },
});

beforeAll(async () => {
  api = await startStandIn({ objects: [namespace()] });
  controller = await startController({ api });
  await cachesSynced(api);
}, 60_000);

afterAll(async () => {
  await controller?.stop();
  await api?.stop();
});

/** Waits until the controller's verdict on the deny-label pod is `allowed`. */
const verdictBecomes = (allowed: boolean) =>
  eventually(async () => {
    const result = await admit(controller, deniedDemoPod());
    if (result.allowed !== allowed) throw new Error(`still allowed=${result.allowed}`);
    return result;
  });

describe("namespace mode label, through the watch", () => {
  it("enforce (no label): denied", async () => {
    expect((await admit(controller, deniedDemoPod())).allowed).toBe(false);
  });

  it("warn: allowed, the violation returned as a warning; parity holds", async () => {
    api.put(namespace({ [NS_KEYS.mode]: "warn" }));
    const result = await verdictBecomes(true);
    expect(result.warnings).toContainEqual(
      expect.stringMatching(/^admission-guard\/hello-pepr: .*Fix: remove the label/),
    );
    const report = await checkParity(controller, deniedDemoPod(), { objects: api.objects() });
    expect(report.differences).toEqual([]);
  });

  it("off: allowed, not mutated", async () => {
    api.put(namespace({ [NS_KEYS.mode]: "off" }));
    await eventually(async () => {
      const result = await admit(controller, deniedDemoPod());
      expect(result.allowed).toBe(true);
      expect(result.warnings).toEqual([]);
      expect(
        result.patched.metadata?.labels?.["hello.admission-guard.dev/greeted"],
      ).toBeUndefined();
    });
  });

  it("an unknown mode value enforces and says so", async () => {
    api.put(namespace({ [NS_KEYS.mode]: "bogus" }));
    const result = await verdictBecomes(false);
    expect(result.warnings.join("\n")).toContain(`${NS_KEYS.mode}="bogus"`);
  });

  it("label removed: enforce again", async () => {
    api.put(namespace({ [NS_KEYS.mode]: "warn" }));
    await verdictBecomes(true);
    api.put(namespace());
    await verdictBecomes(false);
  });
});

describe("API server outage", () => {
  it("answers from its caches while the API is down, and catches up once it is back", async () => {
    api.put(namespace({ [NS_KEYS.mode]: "warn" }));
    await verdictBecomes(true);
    api.setDown(true);
    try {
      // A change the controller cannot see yet: its cache still says warn.
      api.put(namespace({ [NS_KEYS.mode]: "enforce" }));
      const during = await admit(controller, deniedDemoPod());
      expect(during.allowed).toBe(true);
      expect(api.watching("Namespace")).toBe(0);
    } finally {
      api.setDown(false);
    }
    // The watch reconnects (list, then watch) and the change arrives.
    await eventually(async () => {
      expect((await admit(controller, deniedDemoPod())).allowed).toBe(false);
    }, 30_000);
  }, 60_000);
});
