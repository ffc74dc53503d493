// Kubernetes Events on the pods the module fixed, written from the watcher, rate-limited, with no
// text a user wrote. Why: docs/adr/0014-events-from-the-watcher.md
import { recordedFixes } from "../objects/fix-trace";
import { fixEvents } from "../metrics";
import type { KubeObject } from "../objects/pod";
import type { Policy } from "../engine/policy";

export const EVENT_REASON = "AdmissionGuardFixed";
export const EVENT_COMPONENT = "admission-guard";
/** A pod created longer ago than this gets no Event: the watcher is listing what already ran. */
export const EVENT_WINDOW_MS = 5 * 60_000;
/** At most this many capability/rule entries of a trace are told (a real trace has about 20). */
export const EVENT_MAX_ENTRIES = 32;
/** A rule name as the module writes them (runAsNonRoot, component-from-app): nothing else is told. */
const RULE_NAME = /^[A-Za-z][A-Za-z0-9-]{0,47}$/;

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
  const why = new Map(policies.map(p => [p.name, p.description]));
  const fixed = toldFixes(recordedFixes(pod), why);
  if (!fixed.size) return undefined;
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

/**
 * The entries of a trace an Event may tell: a capability of the module, a rule-like name, at most
 * EVENT_MAX_ENTRIES in all. Anything else in the annotation was not written by the module.
 */
function toldFixes(
  fixed: ReadonlyMap<string, readonly string[]>,
  capabilities: ReadonlyMap<string, string>,
): Map<string, string[]> {
  const told = new Map<string, string[]>();
  let entries = 0;
  for (const [capability, rules] of fixed) {
    if (!capabilities.has(capability)) continue;
    const kept = rules.filter(rule => RULE_NAME.test(rule)).slice(0, EVENT_MAX_ENTRIES - entries);
    entries += kept.length;
    if (kept.length) told.set(capability, kept);
    if (entries >= EVENT_MAX_ENTRIES) break;
  }
  return told;
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
  /** Across the cluster (settings events.perSecond); bursts of 5 seconds' worth. */
  perSecond: number;
  /** Per namespace (settings events.perNamespacePerSecond); absent: no per-namespace budget. */
  perNamespacePerSecond?: number;
  write: (event: CoreEvent) => Promise<void>;
  policies: () => readonly Policy[];
  instance?: string;
  now?: () => number;
  log?: { warn: (o: object, m: string) => void };
}

/**
 * Pods already given their Event, kept for the last this many (a watcher re-lists, a pod is
 * MODIFIED): the one thing kept per pod, bounded whatever the cluster's size (~1.5 MB).
 */
export const REMEMBERED = 20_000;
/** Namespaces whose budget is kept, the most recently used; one forgotten starts again full. */
export const NAMESPACE_BUCKETS = 5_000;

export class FixEvents {
  /** dropped: over either budget; of them, throttledNamespace: over its namespace's. */
  readonly stats = { written: 0, dropped: 0, throttledNamespace: 0, failed: 0 };
  private readonly bucket: TokenBucket;
  private readonly namespaceBuckets = new Map<string, TokenBucket>();
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
    // Its namespace's budget first: a namespace over it spends nothing of everyone's.
    if (!this.namespaceBudget(event.involvedObject.namespace)) {
      this.stats.throttledNamespace++;
      this.stats.dropped++;
      fixEvents.inc({ outcome: "dropped" });
      return;
    }
    if (!this.bucket.take()) {
      this.stats.dropped++;
      fixEvents.inc({ outcome: "dropped" });
      return;
    }
    try {
      await this.options.write(event);
      this.stats.written++;
      fixEvents.inc({ outcome: "sent" });
    } catch (e) {
      this.stats.failed++;
      fixEvents.inc({ outcome: "failed" });
      this.options.log?.warn(
        { pod: `${event.involvedObject.namespace}/${event.involvedObject.name}`, error: String(e) },
        "could not write the pod's Event",
      );
    }
  }

  /** Whether the namespace may have one more Event now (true without a per-namespace budget). */
  private namespaceBudget(namespace: string): boolean {
    const perSecond = this.options.perNamespacePerSecond;
    if (!perSecond) return true;
    let bucket = this.namespaceBuckets.get(namespace);
    if (bucket)
      this.namespaceBuckets.delete(namespace); // re-inserted: the most recently used
    else bucket = new TokenBucket(perSecond, Math.max(1, perSecond * 5), this.now);
    this.namespaceBuckets.set(namespace, bucket);
    if (this.namespaceBuckets.size > NAMESPACE_BUCKETS)
      this.namespaceBuckets.delete(this.namespaceBuckets.keys().next().value as string);
    return bucket.take();
  }

  private remember(uid: string): void {
    this.seen.add(uid);
    if (this.seen.size > REMEMBERED) this.seen.delete(this.seen.values().next().value as string);
  }
}
