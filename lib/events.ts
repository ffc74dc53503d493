// Kubernetes Events on the pods the module fixed, where `kubectl describe pod` shows them. They are
// written from Pepr's watcher when a fixed pod appears (capabilities/reports), never from the
// admission path: a pod has no uid before it is stored (describe finds events by uid), and an API
// call there would cost every admission its time. Rate-limited across the cluster; an Event over
// the budget is dropped and counted, never queued without bound.
import { recordedFixes } from "./engine";
import type { KubeObject } from "./pod";
import type { Policy } from "./policy";

export const EVENT_REASON = "AdmissionGuardFixed";
export const EVENT_COMPONENT = "admission-guard";
/** A pod created longer ago than this gets no Event: the watcher is listing what already ran. */
export const EVENT_WINDOW_MS = 5 * 60_000;

export interface CoreEvent {
  apiVersion: "v1";
  kind: "Event";
  metadata: { generateName: string; namespace: string };
  involvedObject: {
    apiVersion: string;
    kind: string;
    name: string;
    namespace: string;
    uid: string;
  };
  reason: string;
  message: string;
  type: "Normal";
  source: { component: string };
  reportingComponent: string;
  reportingInstance: string;
  firstTimestamp: string;
  lastTimestamp: string;
  count: number;
}

/** The Event saying what was fixed on a pod and why, or undefined when the module fixed nothing. */
export function fixedEvent(
  pod: KubeObject,
  policies: readonly Policy[],
  now: Date,
  instance = EVENT_COMPONENT,
): CoreEvent | undefined {
  const meta = pod.metadata ?? {};
  if (pod.kind !== "Pod" || !meta.name || !meta.namespace || !meta.uid) return undefined;
  const fixed = recordedFixes(pod);
  if (!fixed.size) return undefined;
  const why = new Map(policies.map(p => [p.name, p.description]));
  const parts = [...fixed].map(
    ([capability, rules]) =>
      `${capability}: ${rules.join(", ")}${why.has(capability) ? ` (${why.get(capability)})` : ""}`,
  );
  const time = now.toISOString();
  return {
    apiVersion: "v1",
    kind: "Event",
    metadata: { generateName: `${meta.name}.`, namespace: meta.namespace },
    involvedObject: {
      apiVersion: "v1",
      kind: "Pod",
      name: meta.name,
      namespace: meta.namespace,
      uid: String(meta.uid),
    },
    reason: EVENT_REASON,
    // The API server keeps at most 1 KiB of an Event's message; the trace annotation has it all.
    message: `admission-guard fixed ${parts.join("; ")}`.slice(0, 1024),
    type: "Normal",
    source: { component: EVENT_COMPONENT },
    reportingComponent: EVENT_COMPONENT,
    reportingInstance: instance,
    firstTimestamp: time,
    lastTimestamp: time,
    count: 1,
  };
}

/** A token bucket: `perSecond` on average, bursts of up to `burst`. */
export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    private readonly perSecond: number,
    private readonly burst: number,
    private readonly now: () => number = Date.now,
  ) {
    this.tokens = burst;
    this.last = now();
  }

  take(): boolean {
    const t = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) / 1000) * this.perSecond);
    this.last = t;
    if (this.tokens < 1) return false;
    this.tokens--;
    return true;
  }
}

export interface FixEventsOptions {
  perSecond: number;
  write: (event: CoreEvent) => Promise<void>;
  policies: () => readonly Policy[];
  instance?: string;
  now?: () => number;
  log?: { warn: (o: object, m: string) => void };
}

/** Pods already given their Event, kept for the last this many (a watcher re-lists, a pod is MODIFIED). */
const REMEMBERED = 20_000;

export class FixEvents {
  readonly stats = { written: 0, dropped: 0, failed: 0 };
  private readonly bucket: TokenBucket;
  private readonly seen = new Set<string>();
  private readonly now: () => number;

  constructor(private readonly options: FixEventsOptions) {
    this.now = options.now ?? Date.now;
    this.bucket = new TokenBucket(options.perSecond, Math.max(1, options.perSecond * 5), this.now);
  }

  /** A pod appeared (or changed): its Event, once, if the module fixed it and it is new. */
  async onPod(pod: KubeObject): Promise<void> {
    const uid = pod?.metadata?.uid;
    if (!uid || this.seen.has(String(uid))) return;
    const created = Date.parse(String(pod.metadata?.creationTimestamp ?? ""));
    if (!(this.now() - created < EVENT_WINDOW_MS)) return;
    const event = fixedEvent(
      pod,
      this.options.policies(),
      new Date(this.now()),
      this.options.instance,
    );
    if (!event) return;
    this.remember(String(uid));
    if (!this.bucket.take()) {
      this.stats.dropped++;
      return;
    }
    try {
      await this.options.write(event);
      this.stats.written++;
    } catch (e) {
      this.stats.failed++;
      this.options.log?.warn(
        { pod: `${event.involvedObject.namespace}/${event.involvedObject.name}`, error: String(e) },
        "could not write the pod's Event",
      );
    }
  }

  private remember(uid: string): void {
    this.seen.add(uid);
    if (this.seen.size > REMEMBERED) this.seen.delete(this.seen.values().next().value as string);
  }
}
