// The webhooks' arming on /metrics: whether each configuration fails closed, as this
// replica last read or wrote it, and the changes it made. Against a fake API server holding the
// two configurations, as test/unit/webhooks/arming.test.ts does.
import { applyPatch } from "fast-json-patch";
import { webhookArming, webhookFailClosed } from "../../../lib/metrics";
import { DISARM_ANNOTATION } from "../../../lib/objects/keys";
import { WEBHOOK_KINDS, WebhookArming, type ArmingApi } from "../../../lib/webhooks/arm-live";
import {
  failsClosed,
  type EndpointSliceLike,
  type FailurePolicy,
  type WebhookConfiguration,
} from "../../../lib/webhooks/arming";
import { MetricsDelta, valueOf } from "./support";

const NAME = "pepr-metrics-test";
const [M, V] = WEBHOOK_KINDS;
const ARMING = "admission_guard_webhook_arming_total";
const service = { name: NAME, namespace: "pepr-system" };
const config = (kind: string, policies: string[]): WebhookConfiguration => ({
  kind,
  metadata: { name: NAME, resourceVersion: "1" },
  webhooks: policies.map((p, i) => ({
    name: `w${i}.pepr.dev`,
    failurePolicy: p,
    clientConfig: { service },
  })),
});
const disarmed = (c: WebhookConfiguration): WebhookConfiguration => ({
  ...c,
  metadata: { ...c.metadata, annotations: { [DISARM_ANNOTATION]: "true" } },
});

function fakeApi(initial: Partial<Record<string, WebhookConfiguration>>) {
  const stored: Record<string, WebhookConfiguration | undefined> = { ...initial };
  let slices: EndpointSliceLike[] = [];
  let rv = 1;
  let failPatch = false;
  const api: ArmingApi = {
    get: async kind => stored[kind] && structuredClone(stored[kind]),
    async patch(kind, _name, ops) {
      if (failPatch) throw new Error("the object has been modified");
      const next = applyPatch(structuredClone(stored[kind]!), ops, true).newDocument;
      next.metadata!.resourceVersion = String(++rv);
      stored[kind] = next;
    },
    endpointSlices: async () => slices,
  };
  return {
    api,
    stored,
    ready: (r: boolean) => (slices = [{ endpoints: [{ conditions: { ready: r } }] }]),
    failPatches: (f: boolean) => (failPatch = f),
  };
}

const log = { info: () => undefined, warn: () => undefined };
const arming = (api: ArmingApi, wanted: FailurePolicy = "Fail") =>
  new WebhookArming({ name: NAME, wanted, log, api });
const failClosed = async () => ({
  mutating: await valueOf(webhookFailClosed, { webhook: "mutating" }),
  validating: await valueOf(webhookFailClosed, { webhook: "validating" }),
});

describe("failsClosed", () => {
  it("every webhook Fail (unset is the API's default Fail); none, or one Ignore, is not", () => {
    expect(failsClosed(config(M, ["Fail", "Fail"]))).toBe(true);
    expect(failsClosed({ webhooks: [{ name: "w" }] })).toBe(true);
    expect(failsClosed(config(M, ["Fail", "Ignore"]))).toBe(false);
    expect(failsClosed(config(M, []))).toBe(false);
  });
});

describe("the arming on /metrics", () => {
  it("what a round reads sets the gauge; each arm it writes counts once and sets it to 1", async () => {
    const f = fakeApi({ [M]: config(M, ["Ignore"]), [V]: config(V, ["Fail"]) });
    const a = arming(f.api);
    const delta = await MetricsDelta.of(webhookArming);
    await a.round(); // nothing Ready: read only
    expect(await failClosed()).toEqual({ mutating: 0, validating: 1 });
    expect(await delta.moved()).toEqual({});

    f.ready(true);
    await a.round(); // Ready once: waits a round
    await a.round(); // Ready twice: armed
    expect(await failClosed()).toEqual({ mutating: 1, validating: 1 });
    expect(await delta.moved()).toEqual({ [`${ARMING}{action="arm"}`]: 1 });
    await a.round(); // armed: nothing written
    expect(await delta.moved()).toEqual({ [`${ARMING}{action="arm"}`]: 1 });

    // A re-deploy writes Ignore back; read while no replica is Ready, it is 0 again.
    f.stored[V] = config(V, ["Ignore"]);
    f.ready(false);
    await a.round();
    expect(await failClosed()).toEqual({ mutating: 1, validating: 0 });
    expect(await delta.moved()).toEqual({ [`${ARMING}{action="arm"}`]: 1 });
  });

  it("the break-glass: a disarm written counts once and sets 0; one already Ignore writes nothing", async () => {
    const f = fakeApi({ [M]: disarmed(config(M, ["Fail"])), [V]: disarmed(config(V, ["Ignore"])) });
    const a = arming(f.api);
    f.ready(true);
    const delta = await MetricsDelta.of(webhookArming);
    for (let i = 0; i < 3; i++) await a.round();
    expect(await failClosed()).toEqual({ mutating: 0, validating: 0 });
    expect(await delta.moved()).toEqual({ [`${ARMING}{action="disarm"}`]: 1 });
  });

  it("a patch that fails counts nothing: the gauge says what was read", async () => {
    const f = fakeApi({ [M]: config(M, ["Ignore"]), [V]: config(V, ["Ignore"]) });
    const a = arming(f.api);
    f.ready(true);
    f.failPatches(true);
    const delta = await MetricsDelta.of(webhookArming);
    await a.round();
    await expect(a.round()).rejects.toThrow(/modified/);
    expect(await failClosed()).toEqual({ mutating: 0, validating: 0 });
    expect(await delta.moved()).toEqual({});
  });

  it("webhooks.failurePolicy Ignore: setting it is this replica's arm, to 0", async () => {
    const f = fakeApi({ [M]: config(M, ["Fail"]), [V]: config(V, ["Ignore"]) });
    const delta = await MetricsDelta.of(webhookArming);
    await arming(f.api, "Ignore").round();
    expect(await failClosed()).toEqual({ mutating: 0, validating: 0 });
    expect(await delta.moved()).toEqual({ [`${ARMING}{action="arm"}`]: 1 });
  });

  it("no configuration under the name: nothing fails closed", async () => {
    const f = fakeApi({ [M]: config(M, ["Fail"]), [V]: config(V, ["Fail"]) });
    await arming(f.api).round();
    expect(await failClosed()).toEqual({ mutating: 1, validating: 1 });
    await arming(fakeApi({}).api).round();
    expect(await failClosed()).toEqual({ mutating: 0, validating: 0 });
  });
});
