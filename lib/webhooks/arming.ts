// Decides when to arm the module's webhooks (set their failure policy once a Ready replica answers)
// and honours the disarm annotation; lib/webhooks/arm-live.ts applies it.
// Why: docs/adr/0009-webhooks-armed-by-the-controller.md
import * as z from "zod/mini";
import "../objects/zod-messages";
import { DISARM_ANNOTATION } from "../objects/keys";

/** The JSON patch operations the arming writes (RFC 6902). */
export type Operation = { op: "test" | "replace"; path: string; value: unknown };

export const FAILURE_POLICIES = ["Fail", "Ignore"] as const;
export type FailurePolicy = (typeof FAILURE_POLICIES)[number];

/** The webhooks section of the settings (lib/settings composes it). */
export const WebhooksSettingsSchema = z.prefault(
  z.strictObject({
    /**
     * The failure policy the admission controller sets on its webhooks once a replica is
     * Ready behind their Service (they are built and installed with Ignore: see
     * lib/webhooks/arming.ts). Fail: pods are refused while no replica answers.
     */
    failurePolicy: z._default(z.enum(FAILURE_POLICIES), "Fail"),
  }),
  {},
);

/** The parts of a Mutating/ValidatingWebhookConfiguration the arming reads. */
export interface WebhookConfiguration {
  kind?: string;
  metadata?: { name?: string; resourceVersion?: string; annotations?: Record<string, string> };
  webhooks?: {
    name?: string;
    failurePolicy?: string;
    clientConfig?: { url?: string; service?: { name?: string; namespace?: string } };
  }[];
}

/** An EndpointSlice, as far as the arming reads it. */
export interface EndpointSliceLike {
  endpoints?: { conditions?: { ready?: boolean | null } }[] | null;
}

/** The Services a configuration's webhooks call ("namespace/name"), each once. */
export function servicesCalled(
  config: WebhookConfiguration,
): { namespace: string; name: string }[] {
  const seen = new Map<string, { namespace: string; name: string }>();
  for (const w of config.webhooks ?? []) {
    const s = w.clientConfig?.service;
    if (s?.name && s.namespace)
      seen.set(`${s.namespace}/${s.name}`, { namespace: s.namespace, name: s.name });
  }
  return [...seen.values()];
}

/**
 * Whether the API server can reach a replica for a Service: one of its EndpointSlices has an
 * endpoint Ready (kube-proxy routes the Service's ClusterIP to ready endpoints only). A `ready`
 * left unset means ready (the EndpointSlice API says consumers should take it so).
 */
export function anyEndpointReady(slices: EndpointSliceLike[]): boolean {
  return slices.some(s => (s.endpoints ?? []).some(e => e.conditions?.ready !== false));
}

/**
 * The JSON patch that sets every webhook of the configuration to `wanted`, or undefined when all
 * already have it. Guarded by `test` operations (the resourceVersion and each webhook's name):
 * a configuration rewritten meanwhile (a re-deploy) makes the patch fail instead of setting the
 * policy on another webhook than the one read; the next round reads it again.
 */
export function armingPatch(
  config: WebhookConfiguration,
  wanted: FailurePolicy,
): Operation[] | undefined {
  const webhooks = config.webhooks ?? [];
  const ops: Operation[] = [];
  webhooks.forEach((w, i) => {
    if (w.failurePolicy === wanted) return;
    ops.push({ op: "test", path: `/webhooks/${i}/name`, value: w.name });
    ops.push({ op: "replace", path: `/webhooks/${i}/failurePolicy`, value: wanted });
  });
  if (!ops.length) return undefined;
  const rv = config.metadata?.resourceVersion;
  return rv ? [{ op: "test", path: "/metadata/resourceVersion", value: rv }, ...ops] : ops;
}

/**
 * Whether the configuration fails closed: it has webhooks and every one's failurePolicy is Fail
 * (the API server's default when unset).
 */
export function failsClosed(config: WebhookConfiguration): boolean {
  const webhooks = config.webhooks ?? [];
  return webhooks.length > 0 && webhooks.every(w => (w.failurePolicy ?? "Fail") === "Fail");
}

/** Whether an admin disarmed the configuration (DISARM_ANNOTATION "true"). */
export function isDisarmed(config: WebhookConfiguration): boolean {
  return config.metadata?.annotations?.[DISARM_ANNOTATION]?.trim().toLowerCase() === "true";
}

/** What one round found for one configuration, for the log. */
export type ArmingOutcome =
  | { state: "absent" }
  | { state: "armed" }
  /** Disarmed by an admin: Ignore already, or `patch` sets it. */
  | { state: "disarmed"; patch?: Operation[] }
  | { state: "waiting"; why: string }
  | { state: "arm"; patch: Operation[] };

/**
 * One configuration's next step. `served` says, per Service the webhooks call, whether a replica
 * is Ready behind it; a webhook called by URL counts as served (its caller is the process
 * answering it, as under `pepr dev`).
 */
export function nextStep(
  config: WebhookConfiguration | undefined,
  wanted: FailurePolicy,
  served: (service: { namespace: string; name: string }) => boolean,
): ArmingOutcome {
  if (!config) return { state: "absent" };
  if (isDisarmed(config)) return { state: "disarmed", patch: armingPatch(config, "Ignore") };
  const patch = armingPatch(config, wanted);
  if (!patch) return { state: "armed" };
  // Setting Ignore (a deliberate fail-open) never waits for anything.
  if (wanted === "Fail") {
    const unserved = servicesCalled(config).filter(s => !served(s));
    if (unserved.length)
      return {
        state: "waiting",
        why: `no Ready endpoint behind Service ${unserved.map(s => `${s.namespace}/${s.name}`).join(", ")} yet`,
      };
  }
  return { state: "arm", patch };
}
