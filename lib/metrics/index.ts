// Every metric of the module, in one place: what docs/operations.md explains, the PrometheusRule
// alerts on and the dashboard draws (scripts/overlay/monitoring.ts checks both against METRIC_NAMES).
// Prometheus' idiom: counters end in _total, durations are seconds in histograms, and every label
// has a bounded set of values (BoundedLabel for those a request supplies). No namespace, pod or
// image name is ever a label: a tenant could otherwise grow the series without end.
//
// Our registry is served on the controller's /metrics after Pepr's own (lib/pepr/metrics-serve.ts).
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { BoundedLabel, OTHER } from "./bounded-label";
import type { ExemptionsNamespaceState } from "../exemptions";

export const registry = new Registry();

/** Admission review buckets: 1 ms to the webhook's 10 s timeout. */
export const REVIEW_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 7.5, 10,
];
/** Registry reads and API calls: 5 ms to the 10 s lookup timeout. */
const CALL_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Report lag: from a change seen by the watcher to its report written. */
const LAG_BUCKETS = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

// Values from requests: the kinds the webhook is sent are bounded by its rules, rules by the
// capabilities; the caps only guard against what nobody planned for.
const kinds = new BoundedLabel(64);
const rules = new BoundedLabel(256);
const capabilities = new BoundedLabel(64);
const OPERATIONS = new Set(["CREATE", "UPDATE", "DELETE", "CONNECT"]);

// ---- admission (the admission controller) ----

const admissionRequests = new Counter({
  name: "admission_guard_admission_requests_total",
  help: "Admission reviews answered, by step (mutate, validate), kind, operation and outcome (allowed, patched, denied, error, unauthorized)",
  labelNames: ["step", "kind", "operation", "outcome"] as const,
  registers: [registry],
});

const reviewDuration = new Histogram({
  name: "admission_guard_admission_review_duration_seconds",
  help: "Time from a review's arrival to its answer sent, body parsing included, by step (mutate, validate)",
  labelNames: ["step"] as const,
  buckets: REVIEW_BUCKETS,
  registers: [registry],
});

const decisions = new Counter({
  name: "admission_guard_decisions_total",
  help: "Decisions by capability, rule and outcome (fixed, allowed, denied, allowed-warn, allowed-audit, exempted)",
  labelNames: ["capability", "rule", "outcome"] as const,
  registers: [registry],
});

export const budgetExhausted = new Counter({
  name: "admission_guard_budget_exhausted_total",
  help: "Requests answered without a lookup they wanted because the request's deadline (images.budgetMs) had passed, by what was left out (image-lookup, access-review)",
  labelNames: ["what"] as const,
  registers: [registry],
});

// ---- image reads ----

export const imageLookups = new Counter({
  name: "admission_guard_image_lookups_total",
  help: "Image config lookups by outcome: hit (answered from the cache), fetched (read from the registry), or why a registry read failed (unreadable, invalid, timeout, egress, busy, credentials, other)",
  labelNames: ["outcome"] as const,
  registers: [registry],
});

export const registryCredentialRefreshes = new Counter({
  name: "admission_guard_registry_credential_refreshes_total",
  help: "Registry credentials fetched from the controller's cloud identity (images.cloudCredentials), by provider (ecr, gcp, acr) and result (success, failure)",
  labelNames: ["provider", "result"] as const,
  registers: [registry],
});

export const imageLookupDuration = new Histogram({
  name: "admission_guard_image_lookup_duration_seconds",
  help: "Duration of image config reads from registries (cache hits not included)",
  buckets: CALL_BUCKETS,
  registers: [registry],
});

export const imageEgressRefused = new Counter({
  name: "admission_guard_image_egress_refused_total",
  help: "Registry connections refused by the egress policy (a private, loopback or blocked address, or plain HTTP to a host not in images.plainHttp)",
  registers: [registry],
});

/**
 * A gauge by cache, set at scrape time from what `values` reads then (a cache whose value is
 * undefined gets no series).
 */
function perCacheGauge(
  name: string,
  help: string,
  values: () => Iterable<readonly [cache: string, value: number | undefined]>,
): Gauge<"cache"> {
  return new Gauge({
    name,
    help,
    labelNames: ["cache"] as const,
    registers: [registry],
    collect() {
      for (const [cache, value] of values()) if (value !== undefined) this.set({ cache }, value);
    },
  });
}

type ImageCacheSizes = Record<string, { entries: number; bytes: number }>;
let imageCaches: (() => ImageCacheSizes) | undefined;
/** The image inspector of this process reports its cache sizes (read at scrape time). */
export function observeImageCaches(sizes: () => ImageCacheSizes): void {
  imageCaches = sizes;
}

// Each gauge reads the sizes itself (a few numbers the caches keep): either is right read alone.
const imageCacheSize = (of: "entries" | "bytes") => () =>
  Object.entries(imageCaches?.() ?? {}).map(([cache, size]) => [cache, size[of]] as const);

export const imageCacheEntries = perCacheGauge(
  "admission_guard_image_cache_entries",
  "Entries held by each image cache (configs, resolved tags, remembered failures)",
  imageCacheSize("entries"),
);

export const imageCacheBytes = perCacheGauge(
  "admission_guard_image_cache_bytes",
  "Bytes held by each image cache, as counted against its byte cap",
  imageCacheSize("bytes"),
);

// ---- API calls and the cluster view ----

export const apiCalls = new Counter({
  name: "admission_guard_api_calls_total",
  help: "Kubernetes API calls made on the admission path, by call (subjectaccessreview, serviceaccount-create) and outcome (ok, error, skipped)",
  labelNames: ["call", "outcome"] as const,
  registers: [registry],
});

export const apiCallDuration = new Histogram({
  name: "admission_guard_api_call_duration_seconds",
  help: "Duration of Kubernetes API calls made on the admission path, by call",
  labelNames: ["call"] as const,
  buckets: CALL_BUCKETS,
  registers: [registry],
});

interface CacheState {
  synced(): boolean;
  /** When the cache last listed in full (epoch ms), undefined before its first list. */
  lastSyncMs(): number | undefined;
}
const caches = new Map<string, CacheState>();
/** A watch cache of the cluster view reports its state (read at scrape time). */
export function observeCache(cache: string, state: CacheState): void {
  caches.set(cache, state);
}

export const cacheSynced = perCacheGauge(
  "admission_guard_cache_synced",
  "1 when the watch cache has listed and is watching, else 0 (rules that read it answer 'not checked' meanwhile)",
  () => [...caches].map(([cache, state]) => [cache, state.synced() ? 1 : 0] as const),
);

export const cacheAge = perCacheGauge(
  "admission_guard_cache_age_seconds",
  "Seconds since the watch cache last listed in full (absent before its first list)",
  () => {
    const now = Date.now();
    return [...caches].map(([cache, state]) => {
      const last = state.lastSyncMs();
      return [cache, last === undefined ? undefined : Math.max(0, (now - last) / 1000)] as const;
    });
  },
);

let exemptionsNamespace: (() => ExemptionsNamespaceState | undefined) | undefined;
/** The live cluster view reports whether its Exemptions namespace is the install's own (read at scrape time). */
export function observeExemptionsNamespace(
  state: () => ExemptionsNamespaceState | undefined,
): void {
  exemptionsNamespace = state;
}

export const exemptionsNamespaceOwnership = new Gauge({
  name: "admission_guard_exemptions_namespace",
  help: "1 for the Exemptions namespace's state: owned (it carries the install's ownership label: its Exemptions count), not-owned or absent (no Exemption counts); no series before the namespaces are listed",
  labelNames: ["state"] as const,
  registers: [registry],
  collect() {
    this.reset();
    const state = exemptionsNamespace?.();
    if (state !== undefined) this.set({ state }, 1);
  },
});

// ---- arming ----

export const webhookFailClosed = new Gauge({
  name: "admission_guard_webhook_fail_closed",
  help: "1 when the webhook configuration's failurePolicy is Fail (armed), 0 when Ignore, by webhook (mutating, validating)",
  labelNames: ["webhook"] as const,
  registers: [registry],
});

export const webhookArming = new Counter({
  name: "admission_guard_webhook_arming_total",
  help: "Changes of the webhooks' failurePolicy made by this replica, by action (arm, disarm)",
  labelNames: ["action"] as const,
  registers: [registry],
});

// ---- the watcher ----

let queueDepth: (() => number) | undefined;
/** The report scanner reports its queue (read at scrape time). */
export function observeWatcherQueue(depth: () => number): void {
  queueDepth = depth;
}

export const watcherQueueDepth = new Gauge({
  name: "admission_guard_watcher_queue_depth",
  help: "Objects waiting to be judged for the reports",
  registers: [registry],
  collect() {
    if (queueDepth) this.set(queueDepth());
  },
});

export const watcherObjectsJudged = new Counter({
  name: "admission_guard_watcher_objects_judged_total",
  help: "Stored objects judged for the reports, by kind",
  labelNames: ["kind"] as const,
  registers: [registry],
});

export const reportWrites = new Counter({
  name: "admission_guard_report_writes_total",
  help: "PolicyReport writes, by outcome (ok, error)",
  labelNames: ["outcome"] as const,
  registers: [registry],
});

export const reportLag = new Histogram({
  name: "admission_guard_report_lag_seconds",
  help: "Time from a change seen by the watcher to the report that shows it written",
  buckets: LAG_BUCKETS,
  registers: [registry],
});

export const fixEvents = new Counter({
  name: "admission_guard_events_total",
  help: "Kubernetes Events about fixes, by outcome (sent, dropped by the rate limits, failed)",
  labelNames: ["outcome"] as const,
  registers: [registry],
});

/** Every metric name the module exports (histograms as their base name). */
export const METRIC_NAMES: readonly string[] = registry
  .getMetricsAsArray()
  .map(m => (m as unknown as { name: string }).name);

// ---- recording helpers for the admission path ----

/** One decision of a capability's rule, as the engine's events say (lib/engine/types.ts). */
export function recordDecision(capability: string, outcome: string, count = 1, rule = ""): void {
  decisions.inc(
    { capability: capabilities.of(capability), rule: rule && rules.of(rule), outcome },
    count,
  );
}

/** One admission review answered (lib/pepr/metrics-serve.ts measures it). */
export function recordReview(
  step: "mutate" | "validate",
  review: { kind?: unknown; operation?: unknown; outcome: string; seconds: number },
): void {
  // Not a review: a caller without the API path names no label and moves no latency alerts read.
  if (review.outcome === "unauthorized") {
    admissionRequests.inc({ step, kind: OTHER, operation: OTHER, outcome: review.outcome });
    return;
  }
  const operation =
    typeof review.operation === "string" && OPERATIONS.has(review.operation)
      ? review.operation
      : OTHER;
  admissionRequests.inc({ step, kind: kinds.of(review.kind), operation, outcome: review.outcome });
  reviewDuration.observe({ step }, review.seconds);
}

/** A stored object judged for the reports. */
export function recordJudged(kind: unknown): void {
  watcherObjectsJudged.inc({ kind: kinds.of(kind) });
}

/** An API call on the admission path, made and timed from `startMs` (Date.now()). */
export function recordApiCall(call: string, outcome: "ok" | "error", startMs: number): void {
  apiCalls.inc({ call, outcome });
  apiCallDuration.observe({ call }, (Date.now() - startMs) / 1000);
}

/** `n` API calls on the admission path left out (a cap, a deadline); none made, none timed. */
export function recordSkipped(call: string, n: number): void {
  if (n > 0) apiCalls.inc({ call, outcome: "skipped" }, n);
}
