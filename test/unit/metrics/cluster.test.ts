// The API calls of the admission path (SubjectAccessReviews, ServiceAccount creation)
// and the cluster view's watch caches on /metrics. The API client is a fake: reviews answer, fail
// or never answer; list-watches are fakes whose handlers the tests drive (a list completed, a
// watch failing).
import type { ListWatchHandlers } from "../../../lib/cluster/list-watch";

let mockReviewError: unknown;
let mockStall = false;
let mockApplyError: unknown;
interface MockListWatch {
  model: unknown;
  handlers: ListWatchHandlers<KubernetesObject>;
  synced: boolean;
}
const mockListWatches: MockListWatch[] = [];

jest.mock("../../../lib/cluster/list-watch", () => ({
  ListWatch: class {
    synced = false;
    constructor(
      readonly model: unknown,
      readonly handlers: unknown,
    ) {
      mockListWatches.push(this as unknown as MockListWatch);
    }
    start = async () => undefined;
    stop = () => undefined;
  },
}));

jest.mock("kubernetes-fluent-client", () => {
  const actual = jest.requireActual("kubernetes-fluent-client");
  return {
    ...actual,
    K8s: () => ({
      Create: async (review: object) => {
        if (mockStall) await new Promise(() => {});
        if (mockReviewError) throw mockReviewError;
        return { ...review, status: { allowed: true } };
      },
      Apply: async (obj: object) => {
        if (mockApplyError) throw mockApplyError;
        return obj;
      },
    }),
  };
});

import { GenericKind, kind, type KubernetesObject } from "kubernetes-fluent-client";
import { checkSecretAccess } from "../../../capabilities/service-account/secret-access";
import { AccessReviews, REVIEWS_PER_REQUEST } from "../../../lib/cluster/access-reviews";
import { SnapshotCluster, type ClusterView } from "../../../lib/cluster/view";
import { LiveCluster } from "../../../lib/cluster/live";
import { contextFor } from "../../../lib/engine";
import {
  apiCallDuration,
  apiCalls,
  budgetExhausted,
  cacheAge,
  cacheSynced,
} from "../../../lib/metrics";
import type { KubeObject } from "../../../lib/objects/pod";
import { podTemplateOf } from "../../../lib/workload-kinds/built-in";
import type { PodTarget } from "../../../lib/engine/policy";
import { parseSettings } from "../../../lib/settings";
import { WatchedStore } from "../../../lib/cluster/watched-store";
import { MetricsDelta, valueOf } from "./support";

const CALLS = "admission_guard_api_calls_total";
const DURATION = "admission_guard_api_call_duration_seconds_count";
const BUDGET = "admission_guard_budget_exhausted_total";
const SAR = 'call="subjectaccessreview"';

beforeEach(() => {
  mockReviewError = undefined;
  mockStall = false;
  mockApplyError = undefined;
});
afterEach(() => jest.restoreAllMocks());

const callMetrics = () => MetricsDelta.of(apiCalls, apiCallDuration, budgetExhausted);
const names = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

describe("SubjectAccessReviews", () => {
  it("each review made counts ok and is timed; an answer reused from memory is no call", async () => {
    const reviews = new AccessReviews();
    const delta = await callMetrics();
    await reviews.secretAccess("ml", "workload", ["a", "b", "a"]);
    await reviews.secretAccess("ml", "workload", ["a", "b"]);
    expect(await delta.moved()).toEqual({
      [`${CALLS}{${SAR},outcome="ok"}`]: 2,
      [`${DURATION}{${SAR}}`]: 2,
    });
  });

  it("a review that fails counts error, timed", async () => {
    mockReviewError = new Error("connect ECONNREFUSED");
    const delta = await callMetrics();
    await new AccessReviews().secretAccess("ml", "workload", ["a"]);
    expect(await delta.moved()).toEqual({
      [`${CALLS}{${SAR},outcome="error"}`]: 1,
      [`${DURATION}{${SAR}}`]: 1,
    });
  });

  it("the deadline: the reviews cut count error, those never started skipped, the request once as budget exhausted", async () => {
    mockStall = true; // an API server that never answers
    const delta = await callMetrics();
    const answer = await new AccessReviews().secretAccess(
      "ml",
      "workload",
      names(10, "s"),
      Date.now() + 100,
    );
    expect(answer?.allowed.size).toBe(0);
    expect(await delta.moved()).toEqual({
      [`${CALLS}{${SAR},outcome="error"}`]: REVIEWS_PER_REQUEST,
      [`${DURATION}{${SAR}}`]: REVIEWS_PER_REQUEST,
      [`${CALLS}{${SAR},outcome="skipped"}`]: 10 - REVIEWS_PER_REQUEST,
      [`${BUDGET}{what="access-review"}`]: 1,
    });
  });

  it("reviews all started and cut by the deadline: errors, and the request once as budget exhausted", async () => {
    mockStall = true;
    const delta = await callMetrics();
    await new AccessReviews().secretAccess("ml", "workload", ["x", "y"], Date.now() + 50);
    expect(await delta.moved()).toEqual({
      [`${CALLS}{${SAR},outcome="error"}`]: 2,
      [`${DURATION}{${SAR}}`]: 2,
      [`${BUDGET}{what="access-review"}`]: 1,
    });
  });

  it("a review whose process-wide slot came only after its deadline is skipped, not made", async () => {
    mockStall = true;
    const delta = await callMetrics();
    // Four questions hold the process's 16 slots until their deadline...
    const holders = Array.from({ length: 4 }, (_, i) =>
      new AccessReviews().secretAccess("ml", `holder-${i}`, names(4, "h"), Date.now() + 100),
    );
    // ...while this one waits for a slot; by the time one is freed, its own deadline has passed.
    const late = new AccessReviews().secretAccess("ml", "late", ["l"], Date.now() + 10_000);
    await new Promise(r => setImmediate(r)); // the holders' reviews have started
    jest.spyOn(Date, "now").mockReturnValue(Date.now() + 60_000);
    await Promise.all([...holders, late]);
    expect(await delta.moved()).toEqual({
      [`${CALLS}{${SAR},outcome="error"}`]: 16,
      [`${DURATION}{${SAR}}`]: 16,
      [`${CALLS}{${SAR},outcome="skipped"}`]: 1,
      [`${BUDGET}{what="access-review"}`]: 5,
    });
  });

  it("a deadline already passed: every review skipped, none made", async () => {
    const delta = await callMetrics();
    await new AccessReviews().secretAccess("ml", "workload", names(3, "p"), Date.now() - 1);
    expect(await delta.moved()).toEqual({
      [`${CALLS}{${SAR},outcome="skipped"}`]: 3,
      [`${BUDGET}{what="access-review"}`]: 1,
    });
  });

  describe("the per-object cap (serviceAccount.maxSecretReviews)", () => {
    const settings = parseSettings({ serviceAccount: { maxSecretReviews: 3 } });
    const podNaming = (secrets: string[]): KubeObject => ({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "fanout", namespace: "ml" },
      spec: {
        serviceAccountName: "workload",
        containers: [{ name: "c", envFrom: secrets.map(name => ({ secretRef: { name } })) }],
      },
    });
    const asPod = (pod: KubeObject): PodTarget => ({
      object: pod,
      template: podTemplateOf(pod)!,
      isTemplate: false,
    });

    it("the secrets past the cap count skipped, once each across a workload's roles", async () => {
      const cluster = new LiveCluster();
      const delta = await callMetrics();
      const pod = podNaming(names(5, "one"));
      await checkSecretAccess(pod, asPod(pod), contextFor(pod, { settings, cluster }));
      expect(await delta.moved()).toEqual({
        [`${CALLS}{${SAR},outcome="ok"}`]: 3,
        [`${DURATION}{${SAR}}`]: 3,
        [`${CALLS}{${SAR},outcome="skipped"}`]: 2,
      });

      // Two roles of one object share the cap: 3 asked, the 4 others left out once each.
      const roles = await callMetrics();
      const job: KubeObject = { ...podNaming([]), kind: "Job", apiVersion: "batch/v1" };
      const ctx = contextFor(job, { settings, cluster });
      const role = (secrets: string[]): PodTarget => ({
        object: job,
        template: { ...podTemplateOf(podNaming(secrets))!, path: "spec.template" },
        isTemplate: true,
      });
      await checkSecretAccess(job, role(names(5, "two")), ctx);
      await checkSecretAccess(job, role([...names(5, "two"), "two-5", "two-6"]), ctx);
      expect(await roles.moved()).toEqual({
        [`${CALLS}{${SAR},outcome="ok"}`]: 3,
        [`${DURATION}{${SAR}}`]: 3,
        [`${CALLS}{${SAR},outcome="skipped"}`]: 4,
      });
    });

    it("a snapshot (check, tests) makes no API call: nothing counted", async () => {
      const cluster: ClusterView = new SnapshotCluster([
        { apiVersion: "v1", kind: "Namespace", metadata: { name: "ml" } },
      ]);
      const delta = await callMetrics();
      const pod = podNaming(names(5, "snap"));
      await checkSecretAccess(pod, asPod(pod), contextFor(pod, { settings, cluster }));
      expect(await delta.moved()).toEqual({});
    });
  });
});

describe("ServiceAccount creation", () => {
  it("counts ok or error, timed; a dry run or an account that exists is no call", async () => {
    const cluster = new LiveCluster();
    const delta = await callMetrics();
    expect(await cluster.ensureServiceAccount("ml", "workload", false)).toEqual({
      state: "created",
    });
    expect(await cluster.ensureServiceAccount("ml", "workload", false)).toEqual({
      state: "exists",
    });
    expect(await cluster.ensureServiceAccount("ml", "other", true)).toEqual({
      state: "would-create",
    });
    mockApplyError = new Error("forbidden");
    expect((await cluster.ensureServiceAccount("ml", "third", false)).state).toBe("failed");
    expect(await delta.moved()).toEqual({
      [`${CALLS}{call="serviceaccount-create",outcome="ok"}`]: 1,
      [`${CALLS}{call="serviceaccount-create",outcome="error"}`]: 1,
      [`${DURATION}{call="serviceaccount-create"}`]: 2,
    });
  });
});

describe("the cluster view's watch caches", () => {
  const CACHES = ["namespaces", "quotas", "limitranges", "nodes", "serviceaccounts", "exemptions"];
  const synced = async () =>
    Object.fromEntries(
      await Promise.all(CACHES.map(async cache => [cache, await valueOf(cacheSynced, { cache })])),
    );
  const watchOf = (model: unknown) => mockListWatches.find(w => w.model === model)!;
  /** What a ListWatch does on a complete list, and then its watch opens. */
  const list = async (w: MockListWatch) => {
    await w.handlers.onListStart?.();
    await w.handlers.onListEnd?.();
    w.synced = true;
  };

  it("only a started (live) view reports them: synced once listed, 0 while the watch fails, aged from the last list", async () => {
    // Stores of tests, never started, report nothing.
    const idle = new LiveCluster(undefined, { exemptionsNamespace: "pepr-system" });
    for (const [, store] of idle.caches()) store.synced = true;
    expect(await synced()).toEqual(Object.fromEntries(CACHES.map(c => [c, undefined])));

    const cluster = new LiveCluster(undefined, {
      exemptionsNamespace: "pepr-system",
      readVersion: async () => ({ gitVersion: "v1.32.0" }),
    });
    cluster.start();
    expect(mockListWatches).toHaveLength(CACHES.length);
    expect(await synced()).toEqual(Object.fromEntries(CACHES.map(c => [c, 0])));
    expect(await valueOf(cacheAge, { cache: "nodes" })).toBeUndefined();

    const listedAt = Date.now();
    const clock = jest.spyOn(Date, "now").mockReturnValue(listedAt);
    await list(watchOf(kind.Namespace));
    await list(watchOf(kind.Node));
    expect(await synced()).toEqual({
      ...Object.fromEntries(CACHES.map(c => [c, 0])),
      namespaces: 1,
      nodes: 1,
    });
    clock.mockReturnValue(listedAt + 5000);
    expect(await valueOf(cacheAge, { cache: "nodes" })).toBe(5);
    expect(await valueOf(cacheAge, { cache: "quotas" })).toBeUndefined();

    // An idle store set synced by a test changes nothing of the live ones'.
    expect(await valueOf(cacheSynced, { cache: "quotas" })).toBe(0);

    // A watch that fails no longer keeps its cache up to date: not synced, until it lists (or
    // watches) again; the error is the store's lastError until then.
    const nodes = watchOf(kind.Node);
    nodes.synced = false;
    nodes.handlers.onError?.(new Error("connect ECONNREFUSED"));
    expect(await valueOf(cacheSynced, { cache: "nodes" })).toBe(0);
    expect(await valueOf(cacheAge, { cache: "nodes" })).toBe(5);
    expect(cluster.nodeStore.lastError).toBe("connect ECONNREFUSED");
    clock.mockReturnValue(listedAt + 8000);
    await list(nodes);
    expect(await valueOf(cacheSynced, { cache: "nodes" })).toBe(1);
    expect(await valueOf(cacheAge, { cache: "nodes" })).toBe(0);
    expect(cluster.nodeStore.lastError).toBeUndefined();

    // The Exemptions' watch (a custom kind) is its own cache.
    const exemptions = mockListWatches.filter(w => w.model === GenericKind);
    expect(exemptions).toHaveLength(1);
    await list(exemptions[0]);
    expect(await valueOf(cacheSynced, { cache: "exemptions" })).toBe(1);
  });

  it("a store of its own (a test's, the watcher's workload kinds) registers only when asked", async () => {
    const store = new WatchedStore(kind.Pod, "pods");
    store.synced = true;
    expect(await valueOf(cacheSynced, { cache: "pods" })).toBeUndefined();
    store.observe("pods");
    expect(await valueOf(cacheSynced, { cache: "pods" })).toBe(1);
  });
});
