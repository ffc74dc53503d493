// The watcher on /metrics: the scan's queue, the objects it judges, its PolicyReport
// writes and how long a change takes to reach one, and the fix Events. The real scanner over a
// snapshot with the module's policies, reports to a list (as test/unit/reports/reports.test.ts
// does).
import { policies } from "../../../capabilities";
import { SnapshotCluster } from "../../../lib/cluster/view";
import type { EngineDeps } from "../../../lib/engine";
import { FixEvents } from "../../../lib/reports/events";
import {
  fixEvents,
  reportLag,
  reportWrites,
  watcherObjectsJudged,
  watcherQueueDepth,
} from "../../../lib/metrics";
import type { KubeObject } from "../../../lib/objects/pod";
import type { PolicyReport } from "../../../lib/reports/policy-report";
import { ReportScanner, type ReportStore } from "../../../lib/reports/scanner";
import { ScannerOverApi } from "../reports/support";
import { defaultSettings } from "../../../lib/settings";
import { eventually } from "../../support/wait";
import { MetricsDelta, valueOf } from "./support";

const NS = "ml";
const JUDGED = "admission_guard_watcher_objects_judged_total";
const WRITES = "admission_guard_report_writes_total";
const LAG = "admission_guard_report_lag_seconds";

const pod = (name: string, namespace = NS, privileged = true): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace, uid: `uid-${name}` },
  spec: {
    containers: [{ name: "c", image: "ghcr.io/org/app:1", securityContext: { privileged } }],
  },
  status: { phase: "Running" },
});
const deployment = (name: string): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name, namespace: NS, uid: `uid-${name}` },
  spec: {
    selector: { matchLabels: { app: name } },
    template: {
      metadata: { labels: { app: name } },
      spec: { containers: [{ name: "c", image: "ghcr.io/org/app:1" }] },
    },
  },
});

class ListStore implements ReportStore {
  readonly stored = new Map<string, PolicyReport>();
  failing = false;
  async read(namespace: string) {
    return this.stored.get(namespace);
  }
  async write(report: PolicyReport) {
    if (this.failing) throw new Error("policyreports is forbidden");
    this.stored.set(report.metadata.namespace, structuredClone(report));
  }
  async remove(namespace: string) {
    if (this.failing) throw new Error("policyreports is forbidden");
    this.stored.delete(namespace);
  }
}

function setup(options: { intervalMs?: number; debounceMs?: number } = {}) {
  const deps: EngineDeps = {
    settings: defaultSettings(),
    cluster: new SnapshotCluster(
      ["ml", "team-b"].map(name => ({ apiVersion: "v1", kind: "Namespace", metadata: { name } })),
    ),
    policies,
  };
  const store = new ListStore();
  // A long debounce: nothing is written by a timer during a test; flushPending writes.
  // Judging again reads the objects again: from those the test handed over (report-scan-support).
  const scanner = new ScannerOverApi(() => deps, store, {
    intervalMs: options.intervalMs ?? 0,
    maxResults: 1000,
    debounceMs: options.debounceMs ?? 60_000,
  });
  return { deps, store, scanner };
}
const written = async (scanner: ReportScanner) => {
  scanner.flushPending();
  await scanner.idle();
};

afterEach(() => jest.restoreAllMocks());

describe("the scan on /metrics", () => {
  it("the queue: what waits to be judged, read at scrape time", async () => {
    const { scanner } = setup();
    const all = Array.from({ length: 20 }, (_, i) => scanner.observe(pod(`p-${i}`)));
    // The first is taken at once; the others wait behind it.
    expect(await valueOf(watcherQueueDepth)).toBe(19);
    await Promise.all(all);
    expect(await valueOf(watcherQueueDepth)).toBe(0);
  });

  it("each object judged counts by its kind; an unchanged version or one not reported is not judged", async () => {
    const { scanner } = setup();
    const delta = await MetricsDelta.of(watcherObjectsJudged);
    await scanner.observe(pod("a"));
    await scanner.observe(pod("b"));
    await scanner.observe(deployment("web"));
    // A status update: same spec, not judged again.
    await scanner.observe({ ...pod("a"), status: { phase: "Running", podIP: "10.0.0.1" } });
    // A Deployment's ReplicaSet: its owner is reported, not it.
    await scanner.observe({
      apiVersion: "apps/v1",
      kind: "ReplicaSet",
      metadata: {
        name: "web-1",
        namespace: NS,
        ownerReferences: [
          { apiVersion: "apps/v1", kind: "Deployment", name: "web", uid: "u", controller: true },
        ],
      },
      spec: deployment("web").spec,
    });
    expect(await delta.moved()).toEqual({
      [`${JUDGED}{kind="Pod"}`]: 2,
      [`${JUDGED}{kind="Deployment"}`]: 1,
    });
    // Judged again (what they are judged with changed): counted again.
    await scanner.rejudge();
    expect(await delta.moved()).toEqual({
      [`${JUDGED}{kind="Pod"}`]: 4,
      [`${JUDGED}{kind="Deployment"}`]: 2,
    });
  });

  it("each report written or removed counts ok, a failed one error; an unchanged one is no write", async () => {
    const { scanner, store } = setup();
    const delta = await MetricsDelta.of(reportWrites);
    await scanner.observe(pod("a"));
    await scanner.observe(pod("b", "team-b"));
    await written(scanner);
    expect(await delta.moved()).toEqual({ [`${WRITES}{outcome="ok"}`]: 2 });
    await scanner.rejudge();
    await written(scanner);
    expect(await delta.moved()).toEqual({ [`${WRITES}{outcome="ok"}`]: 2 });

    store.failing = true;
    await scanner.observe(pod("c"));
    await written(scanner);
    expect(await delta.moved()).toEqual({
      [`${WRITES}{outcome="ok"}`]: 2,
      [`${WRITES}{outcome="error"}`]: 1,
    });
    store.failing = false;
    scanner.forget(pod("b", "team-b")); // team-b has nothing left: its report is removed
    await written(scanner);
    expect(store.stored.has("team-b")).toBe(false);
    expect(await delta.moved()).toEqual({
      [`${WRITES}{outcome="ok"}`]: 4,
      [`${WRITES}{outcome="error"}`]: 1,
    });
  });
});

describe("the report lag", () => {
  /** Date.now() as the test says (the scan reads it when it sees a change and when it writes). */
  const clock = () => {
    const start = Date.now();
    const spy = jest.spyOn(Date, "now").mockReturnValue(start);
    return (ms: number) => spy.mockReturnValue(start + ms);
  };

  it("from each changed object's first sighting to the write of the report that shows it", async () => {
    const { scanner } = setup();
    const at = clock();
    const delta = await MetricsDelta.of(reportLag);
    const ahead = scanner.observe(pod("z")); // judged at once: the others wait behind it
    const a = scanner.observe(pod("a"));
    at(1000);
    // A newer version of "a" before it was judged: its change was still first seen at 0.
    const a2 = scanner.observe(pod("a", NS, false));
    await Promise.all([ahead, a, a2]);
    at(7000);
    await written(scanner);
    expect(await delta.moved()).toEqual({ [`${LAG}_count`]: 2 });
    expect(await delta.sum(LAG)).toBeCloseTo(14, 6);

    // An object whose results did not change adds no sample; nor does a report not written.
    await scanner.observe({ ...pod("z"), status: { phase: "Running", podIP: "10.0.0.2" } });
    await written(scanner);
    expect(await delta.moved()).toEqual({ [`${LAG}_count`]: 2 });
  });

  it("a failed write: measured to the write that succeeds, from the first change not yet shown", async () => {
    const { scanner, store } = setup();
    const at = clock();
    const delta = await MetricsDelta.of(reportLag);
    await scanner.observe(pod("a"));
    store.failing = true;
    at(2000);
    await written(scanner);
    expect(await delta.moved()).toEqual({});
    // Changed again before any report showed the first change: still measured from 0.
    at(4000);
    await scanner.observe(pod("a", NS, false));
    store.failing = false;
    at(9000);
    await written(scanner);
    expect(await delta.moved()).toEqual({ [`${LAG}_count`]: 1 });
    expect(await delta.sum(LAG)).toBeCloseTo(9, 6);
  });

  it("judged again: from when the cause was seen (rejudgeSoon), for the objects whose results changed", async () => {
    // A short debounce for the rejudge; the writes wait for the interval (flushPending writes).
    const { deps, scanner } = setup({ intervalMs: 600_000, debounceMs: 20 });
    await scanner.observe(pod("a"));
    await scanner.observe(pod("b", NS, false));
    await written(scanner);
    const judged = scanner.stats.judged;
    const at = clock();
    const delta = await MetricsDelta.of(reportLag);
    // What they are judged with changed: the security-context policy is gone.
    deps.policies = policies.filter(p => p.name !== "security-context");
    scanner.rejudgeSoon();
    at(3000);
    scanner.rejudgeSoon(); // the same burst
    await eventually(() => expect(scanner.stats.judged).toBe(judged + 2), 5000, 10);
    await scanner.idle();
    at(5000);
    await written(scanner);
    expect(await delta.moved()).toEqual({ [`${LAG}_count`]: 2 });
    expect(await delta.sum(LAG)).toBeCloseTo(10, 6);
  });
});

describe("fix Events on /metrics", () => {
  const NOW = Date.parse("2026-11-30T12:00:00Z");
  const fixed = (name: string, namespace = NS): KubeObject => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace,
      uid: `uid-${namespace}-${name}`,
      creationTimestamp: new Date(NOW - 1000).toISOString() as unknown as Date,
      annotations: { "admission-guard.dev/fixed": "security-context/runAsNonRoot" },
    },
    spec: { containers: [{ name: "c", image: "x" }] },
  });
  const EVENTS = "admission_guard_events_total";

  it("sent, dropped by either rate limit, failed: once each per pod", async () => {
    const events = new FixEvents({
      perSecond: 2, // bursts of 10
      perNamespacePerSecond: 1, // bursts of 5
      write: async () => undefined,
      policies: () => policies,
      now: () => NOW,
    });
    const delta = await MetricsDelta.of(fixEvents);
    for (let i = 0; i < 8; i++) await events.onPod(fixed(`p-${i}`)); // 5 sent, 3 over ml's budget
    await events.onPod(fixed("p-0")); // already told: nothing
    await events.onPod({
      ...fixed("plain"),
      metadata: { ...fixed("plain").metadata, annotations: {} },
    });
    for (let i = 0; i < 7; i++) await events.onPod(fixed(`q-${i}`, `ns-${i}`)); // 5 sent, 2 over the cluster's
    expect(await delta.moved()).toEqual({
      [`${EVENTS}{outcome="sent"}`]: 10,
      [`${EVENTS}{outcome="dropped"}`]: 5,
    });
    expect(events.stats).toMatchObject({ written: 10, dropped: 5 });

    const failing = await MetricsDelta.of(fixEvents);
    const fresh = new FixEvents({
      perSecond: 10,
      write: async () => {
        throw new Error("forbidden");
      },
      policies: () => policies,
      now: () => NOW,
    });
    await fresh.onPod(fixed("r"));
    expect(await failing.moved()).toEqual({ [`${EVENTS}{outcome="failed"}`]: 1 });
  });
});
