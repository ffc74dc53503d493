// The webhooks' arming (lib/webhooks): installed failing open, set to the configured failure
// policy by the admission controller once a replica is Ready behind their Service.
import {
  anyEndpointReady,
  armingPatch,
  nextStep,
  type EndpointSliceLike,
  type Operation,
  type WebhookConfiguration,
} from "../../../lib/webhooks/arming";
import { WebhookArming, type ArmingApi, WEBHOOK_KINDS } from "../../../lib/webhooks/arm-live";
import { applyPatch } from "fast-json-patch";
import { eventually } from "../../support/wait";
import { DISARM_ANNOTATION } from "../../../lib/objects/keys";

const NAME = "pepr-4473f691-a31f-4e7a-acc9-f7166d266bae";
const service = { name: NAME, namespace: "pepr-system", path: "/mutate/abc", port: 443 };
const config = (
  kind: string,
  policies: string[],
  clientConfig: object = { service },
): WebhookConfiguration => ({
  kind,
  metadata: { name: NAME, resourceVersion: "41" },
  webhooks: policies.map((p, i) => ({ name: `w${i}.pepr.dev`, failurePolicy: p, clientConfig })),
});
const ready = (r?: boolean | null): EndpointSliceLike => ({
  endpoints: [{ conditions: r === undefined ? {} : { ready: r } }],
});

describe("armingPatch", () => {
  it("nothing to do when every webhook already has the policy", () => {
    expect(armingPatch(config("M", ["Fail", "Fail"]), "Fail")).toBeUndefined();
  });

  it("sets only the webhooks that differ, each guarded by its name, the whole by resourceVersion", () => {
    const c = config("M", ["Fail", "Ignore"]);
    const ops = armingPatch(c, "Fail")!;
    expect(ops).toEqual([
      { op: "test", path: "/metadata/resourceVersion", value: "41" },
      { op: "test", path: "/webhooks/1/name", value: "w1.pepr.dev" },
      { op: "replace", path: "/webhooks/1/failurePolicy", value: "Fail" },
    ]);
    const patched = applyPatch(structuredClone(c), ops, true).newDocument;
    expect(patched.webhooks!.map(w => w.failurePolicy)).toEqual(["Fail", "Fail"]);
  });

  it("a configuration rewritten since it was read (another resourceVersion) fails the patch", () => {
    const ops = armingPatch(config("M", ["Ignore"]), "Fail")!;
    const rewritten = {
      ...config("M", ["Ignore"]),
      metadata: { name: NAME, resourceVersion: "42" },
    };
    expect(() => applyPatch(rewritten, ops, true)).toThrow();
  });
});

describe("anyEndpointReady", () => {
  it.each([
    ["no slice", [], false],
    ["a slice with no endpoints (no replica yet)", [{ endpoints: null }], false],
    ["an endpoint not ready (starting, or terminating)", [ready(false)], false],
    ["an endpoint ready", [ready(true)], true],
    ["ready unset: the API says to take it as ready", [ready()], true],
    ["one of several slices ready", [ready(false), ready(true)], true],
  ])("%s", (_, slices, expected) => {
    expect(anyEndpointReady(slices as EndpointSliceLike[])).toBe(expected);
  });
});

describe("nextStep", () => {
  const never = () => false;
  it("absent: nothing registered under the name (a stand-in, a cluster without the module)", () => {
    expect(nextStep(undefined, "Fail", never)).toEqual({ state: "absent" });
  });

  it("waits while nothing is Ready behind the Service, naming it", () => {
    const step = nextStep(config("M", ["Ignore"]), "Fail", never);
    expect(step).toEqual({
      state: "waiting",
      why: `no Ready endpoint behind Service pepr-system/${NAME} yet`,
    });
  });

  it("arms once the Service is served", () => {
    expect(nextStep(config("M", ["Ignore"]), "Fail", () => true).state).toBe("arm");
  });

  it("a webhook called by URL (pepr dev) is answered by the process that arms it", () => {
    const step = nextStep(
      config("M", ["Ignore"], { url: "https://host:3000/mutate/abc" }),
      "Fail",
      never,
    );
    expect(step.state).toBe("arm");
  });

  it("webhooks.failurePolicy Ignore (a deliberate fail-open) is set without waiting", () => {
    expect(nextStep(config("M", ["Fail"]), "Ignore", never).state).toBe("arm");
  });

  it("disarmed by an admin's annotation: set to Ignore, never armed, whatever is Ready", () => {
    const step = nextStep(disarmed(config("M", ["Fail", "Ignore"])), "Fail", () => true);
    expect(step.state).toBe("disarmed");
    const patched = applyPatch(
      structuredClone(disarmed(config("M", ["Fail", "Ignore"]))),
      (step as { patch: Operation[] }).patch,
      true,
    ).newDocument;
    expect(patched.webhooks!.map(w => w.failurePolicy)).toEqual(["Ignore", "Ignore"]);
    // Already Ignore: nothing to write.
    expect(nextStep(disarmed(config("M", ["Ignore"])), "Fail", () => true)).toEqual({
      state: "disarmed",
      patch: undefined,
    });
    // Only "true" disarms; another value is no break-glass.
    expect(nextStep(disarmed(config("M", ["Ignore"]), "no"), "Fail", () => true).state).toBe("arm");
  });
});

/** The break-glass annotation set on a configuration. */
function disarmed(c: WebhookConfiguration, value = "true"): WebhookConfiguration {
  return { ...c, metadata: { ...c.metadata, annotations: { [DISARM_ANNOTATION]: value } } };
}

/** An API server holding the two configurations and the Service's EndpointSlices, recording calls. */
function fakeApi(initial: Partial<Record<string, WebhookConfiguration>>) {
  const stored: Record<string, WebhookConfiguration | undefined> = { ...initial };
  const calls: string[] = [];
  let slices: EndpointSliceLike[] = [];
  let rv = 41;
  const api: ArmingApi = {
    async get(kind) {
      calls.push(`get ${kind}`);
      return stored[kind] && structuredClone(stored[kind]);
    },
    async patch(kind, _name, ops: Operation[]) {
      calls.push(`patch ${kind}`);
      const next = applyPatch(structuredClone(stored[kind]!), ops, true).newDocument;
      next.metadata!.resourceVersion = String(++rv);
      stored[kind] = next;
    },
    async endpointSlices() {
      calls.push("endpointslices");
      return slices;
    },
  };
  return {
    api,
    calls,
    stored,
    setSlices: (s: EndpointSliceLike[]) => (slices = s),
    policies: (kind: string) => stored[kind]?.webhooks?.map(w => w.failurePolicy),
  };
}

describe("WebhookArming", () => {
  const [M, V] = WEBHOOK_KINDS;
  const logs: string[] = [];
  const log = {
    info: (_: object, m: string) => logs.push(m),
    warn: (_: object, m: string) => logs.push(m),
  };
  const arming = (api: ArmingApi) => new WebhookArming({ name: NAME, wanted: "Fail", log, api });
  beforeEach(() => logs.splice(0));

  it("never arms while no replica is Ready (an image that cannot be pulled): pods stay admitted", async () => {
    const f = fakeApi({ [M]: config(M, ["Ignore"]), [V]: config(V, ["Ignore"]) });
    const a = arming(f.api);
    for (let i = 0; i < 5; i++) expect(await a.round()).toBe(false);
    expect(f.policies(M)).toEqual(["Ignore"]);
    expect(f.calls.filter(c => c.startsWith("patch"))).toEqual([]);
    // Said once, not every round.
    expect(logs.filter(m => m.includes("not armed yet"))).toHaveLength(2);
  });

  it("arms both on the second round that sees a Ready endpoint (kube-proxy has had a round)", async () => {
    const f = fakeApi({ [M]: config(M, ["Ignore"]), [V]: config(V, ["Ignore", "Ignore"]) });
    const a = arming(f.api);
    f.setSlices([ready(true)]);
    expect(await a.round()).toBe(false);
    expect(f.policies(M)).toEqual(["Ignore"]);
    expect(await a.round()).toBe(true);
    expect([f.policies(M), f.policies(V)]).toEqual([["Fail"], ["Fail", "Fail"]]);
    expect(logs).toContainEqual(`${M} ${NAME} armed: failurePolicy Fail`);
  });

  it("a Ready endpoint that went away before the second round does not arm", async () => {
    const f = fakeApi({ [M]: config(M, ["Ignore"]) });
    const a = arming(f.api);
    f.setSlices([ready(true)]);
    await a.round();
    f.setSlices([ready(false)]);
    await a.round();
    f.setSlices([ready(true)]);
    await a.round();
    expect(f.policies(M)).toEqual(["Ignore"]);
  });

  it("once armed, a round reads the configurations only; a re-deploy's Ignore is armed again", async () => {
    const f = fakeApi({ [M]: config(M, ["Ignore"]), [V]: config(V, ["Ignore"]) });
    const a = arming(f.api);
    f.setSlices([ready(true)]);
    await a.round();
    await a.round();
    f.calls.splice(0);
    expect(await a.round()).toBe(true);
    expect(f.calls.sort()).toEqual([`get ${M}`, `get ${V}`]);
    // `pepr deploy` (server-side apply, forced) writes the configuration back as built.
    f.stored[V] = config(V, ["Ignore"]);
    await a.round();
    await a.round();
    expect(f.policies(V)).toEqual(["Fail"]);
  });

  it("the break-glass: a manual Ignore with the disarm annotation is not re-armed by a Ready replica; removing it re-arms", async () => {
    const f = fakeApi({ [M]: config(M, ["Ignore"]), [V]: config(V, ["Ignore"]) });
    const a = arming(f.api);
    f.setSlices([ready(true)]);
    await a.round();
    await a.round();
    expect([f.policies(M), f.policies(V)]).toEqual([["Fail"], ["Fail"]]);
    // The admin: annotate the validating configuration only (kubectl annotate ... disarm=true).
    f.stored[V] = disarmed(f.stored[V]!);
    for (let i = 0; i < 4; i++) await a.round();
    expect([f.policies(M), f.policies(V)]).toEqual([["Fail"], ["Ignore"]]);
    expect(logs).toContainEqual(
      `${V} ${NAME} disarmed by its annotation ${DISARM_ANNOTATION}=true: failurePolicy Ignore, not armed while it is there`,
    );
    f.stored[V] = { ...f.stored[V]!, metadata: { ...f.stored[V]!.metadata, annotations: {} } };
    // Armed as after an install: on the second round that sees the replica Ready.
    await a.round();
    await a.round();
    expect(f.policies(V)).toEqual(["Fail"]);
  });

  it("nothing registered under the name: nothing read beyond the two gets, nothing patched", async () => {
    const f = fakeApi({});
    expect(await arming(f.api).round()).toBe(true);
    expect(f.calls.sort()).toEqual([`get ${M}`, `get ${V}`]);
  });

  it("a failed call fails the round, not the process; start() keeps going", async () => {
    const f = fakeApi({ [M]: config(M, ["Ignore"]) });
    let failures = 1;
    const flaky: ArmingApi = {
      ...f.api,
      get: async (kind, name) => {
        if (failures-- > 0) throw new Error("connect ECONNREFUSED");
        return f.api.get(kind, name);
      },
    };
    f.setSlices([ready(true)]);
    const a = new WebhookArming({
      name: NAME,
      wanted: "Fail",
      log,
      api: flaky,
      intervalMs: { waiting: 5, armed: 1000 },
    });
    a.start();
    try {
      await eventually(() => expect(f.policies(M)).toEqual(["Fail"]), 3000, 5);
    } finally {
      a.stop();
    }
    expect(logs).toContainEqual("webhook arming: connect ECONNREFUSED");
  });
});
