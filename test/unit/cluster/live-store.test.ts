// The watched caches the admission path reads: per-namespace lookups and the all-items array must
// follow every watch event (add, modify, move between namespaces, delete) without rescanning.
import { kind, type KubernetesObject } from "kubernetes-fluent-client";
import { describeError } from "../../../lib/cluster/api-calls";
import { LiveCluster } from "../../../lib/cluster/live";
import { WatchedStore } from "../../../lib/cluster/watched-store";

const obj = (namespace: string, name: string, rv = "1"): KubernetesObject => ({
  metadata: { namespace, name, resourceVersion: rv },
});
const names = (list: KubernetesObject[]) => list.map(o => o.metadata?.name).sort();

describe("WatchedStore", () => {
  it("answers per namespace and follows modify, delete and a changed namespace", () => {
    const store = new WatchedStore(kind.ResourceQuota, "resourcequotas");
    store.apply(obj("a", "q1"), "ADDED");
    store.apply(obj("a", "q2"), "ADDED");
    store.apply(obj("b", "q1"), "ADDED");
    expect(names(store.inNamespace("a"))).toEqual(["q1", "q2"]);
    expect(names(store.inNamespace("b"))).toEqual(["q1"]);
    expect(store.inNamespace("c")).toEqual([]);

    store.apply(obj("a", "q1", "2"), "MODIFIED");
    expect(
      store.inNamespace("a").find(o => o.metadata?.name === "q1")?.metadata?.resourceVersion,
    ).toBe("2");

    store.apply(obj("a", "q2"), "DELETED");
    expect(names(store.inNamespace("a"))).toEqual(["q1"]);
    expect(store.items.size).toBe(2);
  });

  it("returns the same all() array until something changes", () => {
    const store = new WatchedStore(kind.Node, "nodes");
    store.apply(obj("", "n1"), "ADDED");
    const first = store.all();
    expect(store.all()).toBe(first);
    store.apply(obj("", "n2"), "ADDED");
    const second = store.all();
    expect(second).not.toBe(first);
    expect(names(second)).toEqual(["n1", "n2"]);
    store.apply(obj("", "n1"), "DELETED");
    expect(names(store.all())).toEqual(["n2"]);
  });

  it("a change the projection drops (a heartbeat) notes the resourceVersion only: no rebuild, no event", () => {
    const heartbeat = (rv: string, at: string) => ({
      metadata: { name: "gpu-1", resourceVersion: rv },
      status: { conditions: [{ type: "Ready", lastHeartbeatTime: at }] },
    });
    // As the node cache keeps nodes: without their conditions.
    const store = new WatchedStore<KubernetesObject>(kind.Node, "nodes", undefined, o => ({
      metadata: o.metadata,
    }));
    const events: string[] = [];
    store.listeners.push((o, phase) => events.push(`${phase} ${o.metadata?.resourceVersion}`));
    store.apply(heartbeat("1", "t1"), "ADDED");
    const before = store.all();
    store.apply(heartbeat("2", "t2"), "MODIFIED");
    expect(store.all()).toBe(before);
    expect(store.all()[0].metadata?.resourceVersion).toBe("2");
    expect(events).toEqual(["ADDED 1"]);
    // A change it keeps is one.
    store.apply(
      { metadata: { name: "gpu-1", resourceVersion: "3", labels: { a: "b" } } },
      "MODIFIED",
    );
    expect(store.all()).not.toBe(before);
    expect(events).toEqual(["ADDED 1", "MODIFIED 3"]);
  });

  it("reports no data before the first list, then the cache", () => {
    const live = new LiveCluster();
    expect(live.nodes()).toBeUndefined();
    expect(live.resourceQuotas("a")).toBeUndefined();
    live.nodeStore.apply(obj("", "n1") as never, "ADDED");
    live.nodeStore.synced = true;
    expect(names(live.nodes()!)).toEqual(["n1"]);
  });
});

describe("describeError", () => {
  it("adds the cause that fetch hides", () => {
    const cause = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), {
      code: "ECONNREFUSED",
    });
    expect(describeError(new Error("fetch failed", { cause }))).toBe(
      "fetch failed: ECONNREFUSED connect ECONNREFUSED 127.0.0.1:1",
    );
    expect(describeError("plain")).toBe("plain");
  });
});

describe("a namespace before the watch has listed is unknown, not unlabelled (LiveCluster.settle)", () => {
  const labelled = (name: string, labels: Record<string, string>) =>
    ({ apiVersion: "v1", kind: "Namespace", metadata: { name, labels } }) as never;
  /** What the watch does on its first list: the objects, then the list listeners. */
  const list = (live: LiveCluster, ...namespaces: never[]) => {
    for (const ns of namespaces) live.namespaces.apply(ns, "ADDED");
    live.namespaces.synced = true;
    for (const listener of live.namespaces.listListeners) listener();
  };

  it("waits for the first list when it comes within the wait", async () => {
    const reads: string[] = [];
    const live = new LiveCluster(undefined, {
      readNamespace: async name => (reads.push(name), undefined),
    });
    expect(live.namespace("lab")).toBeUndefined();
    const settled = live.settle("lab");
    setTimeout(() => list(live, labelled("lab", { "admission-guard.dev/mode": "warn" })), 50);
    await settled;
    expect(live.namespace("lab")?.labels).toEqual({ "admission-guard.dev/mode": "warn" });
    expect(reads).toEqual([]);
  });

  it("reads the namespace once through the API when the list is late, until the list comes", async () => {
    const reads: string[] = [];
    const live = new LiveCluster(undefined, {
      readNamespace: async name => (
        reads.push(name),
        labelled(name, { "admission-guard.dev/mode": "off" })
      ),
    });
    await live.settle("lab");
    await live.settle("lab");
    expect(reads).toEqual(["lab"]);
    expect(live.namespace("lab")?.labels).toEqual({ "admission-guard.dev/mode": "off" });
    list(live, labelled("lab", { "admission-guard.dev/mode": "enforce" }));
    expect(live.namespace("lab")?.labels).toEqual({ "admission-guard.dev/mode": "enforce" });
  });

  it("a read that fails leaves it unknown and is logged, never thrown", async () => {
    const warned: string[] = [];
    const live = new LiveCluster(
      { info: () => undefined, warn: (_o, m) => void warned.push(m) },
      { readNamespace: async () => Promise.reject(new Error("connection refused")) },
    );
    await expect(live.settle("lab")).resolves.toBeUndefined();
    expect(live.namespace("lab")).toBeUndefined();
    expect(warned).toEqual([
      "namespace not known yet (the watch has not listed, and reading it failed): judged as unlabelled",
    ]);
  });
});
