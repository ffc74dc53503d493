// LiveCluster's ServiceAccount side: created when a namespace appears, remembered, forgotten with
// its namespace, never created on dry run; the API client is replaced by a recording fake.
const applied: { namespace?: string; name?: string }[] = [];
let applyError: Error | undefined;
let applyDelayMs = 0;
let inFlight = 0;
let maxInFlight = 0;

jest.mock("kubernetes-fluent-client", () => {
  const actual = jest.requireActual("kubernetes-fluent-client");
  return {
    ...actual,
    K8s: () => ({
      Apply: async (obj: { metadata: { namespace?: string; name?: string } }) => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        if (applyDelayMs) await new Promise(r => setTimeout(r, applyDelayMs));
        inFlight--;
        if (applyError) throw applyError;
        applied.push({ namespace: obj.metadata.namespace, name: obj.metadata.name });
        return obj;
      },
    }),
  };
});

import type { KubernetesObject } from "kubernetes-fluent-client";
import { serviceAccountForNewNamespace } from "../../capabilities/service-account/rules";
import { BACKGROUND_CONCURRENCY, LiveCluster } from "../../lib/cluster-live";
import { defaultSettings } from "../../lib/settings";

const settings = defaultSettings();
const live = () =>
  new LiveCluster(undefined, {
    serviceAccountFor: ns => serviceAccountForNewNamespace(ns, settings),
  });
const ns = (name: string, createdMsAgo: number, annotations: Record<string, string> = {}) =>
  ({
    apiVersion: "v1",
    kind: "Namespace",
    metadata: {
      name,
      annotations,
      creationTimestamp: new Date(Date.now() - createdMsAgo).toISOString(),
    },
  }) as unknown as KubernetesObject;
const settle = () => new Promise(r => setImmediate(r));

beforeEach(() => {
  applied.length = 0;
  applyError = undefined;
  applyDelayMs = 0;
  maxInFlight = 0;
});

describe("LiveCluster: ServiceAccounts", () => {
  it("creates the dedicated ServiceAccount of a namespace that just appeared, not of old ones", async () => {
    const cluster = live();
    cluster.namespaces.apply(
      ns("fresh", 1000, { "admission-guard.dev/service-account": "trainer" }),
      "ADDED",
    );
    cluster.namespaces.apply(ns("old", 24 * 3600_000), "ADDED");
    cluster.namespaces.apply(ns("kube-system", 1000), "ADDED");
    cluster.namespaces.apply(ns("fresh2", 1000), "MODIFIED");
    await settle();
    expect(applied).toEqual([{ namespace: "fresh", name: "trainer" }]);
    expect(cluster.serviceAccount("fresh", "trainer")).toBeTruthy();
  });

  it("remembers a created ServiceAccount, and forgets it when its namespace is deleted", async () => {
    const cluster = live();
    expect(await cluster.ensureServiceAccount("ml", "workload", false)).toEqual({
      state: "created",
    });
    expect(await cluster.ensureServiceAccount("ml", "workload", false)).toEqual({
      state: "exists",
    });
    expect(applied).toHaveLength(1);
    cluster.namespaces.apply(ns("ml", 1000), "DELETED");
    expect(cluster.serviceAccount("ml", "workload")).toBeUndefined();
    expect(await cluster.ensureServiceAccount("ml", "workload", false)).toEqual({
      state: "created",
    });
    expect(applied).toHaveLength(2);
  });

  it("creates nothing on dry run, and reports a failure with its reason", async () => {
    const cluster = live();
    expect(await cluster.ensureServiceAccount("ml", "workload", true)).toEqual({
      state: "would-create",
    });
    expect(applied).toEqual([]);
    applyError = new Error('serviceaccounts is forbidden: User "x" cannot patch');
    expect(await cluster.ensureServiceAccount("ml", "workload", false)).toEqual({
      state: "failed",
      reason: 'serviceaccounts is forbidden: User "x" cannot patch',
    });
    expect(cluster.serviceAccount("ml", "workload")).toBeUndefined();
  });

  it("creates the ServiceAccounts of a burst of new namespaces a few at a time", async () => {
    const cluster = live();
    applyDelayMs = 20;
    for (let i = 0; i < 30; i++) cluster.namespaces.apply(ns(`burst-${i}`, 1000), "ADDED");
    await new Promise(r => setTimeout(r, 20 * 30));
    expect(applied).toHaveLength(30);
    expect(maxInFlight).toBeGreaterThan(1);
    expect(maxInFlight).toBeLessThanOrEqual(BACKGROUND_CONCURRENCY);
  });
});
