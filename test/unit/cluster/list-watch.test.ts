// ListWatch (lib/cluster/list-watch.ts) and WatchedStore on it, against the stand-in API started in this
// process (HTTPS, its kubeconfig as KUBECONFIG: the same config path as in a cluster): lists come in
// pages of pageSize, each object handed over before the next page is asked for; the watch resumes
// from the last resourceVersion (events and bookmarks) after its stream ends or the connection
// drops, and lists again only on 410 Gone, when what the new list no longer shows is deleted; stop()
// leaves no request or timer behind.
import { rmSync } from "node:fs";
import { kind, type KubernetesObject } from "kubernetes-fluent-client";
import {
  ApiStatusError,
  ListWatch,
  listPaged,
  type ListWatchHandlers,
  type ListWatchOptions,
  type ListWatchPhase,
} from "../../../lib/cluster/list-watch";
import type { KubeObject } from "../../../lib/objects/pod";
import { WatchedStore } from "../../../lib/cluster/watched-store";
import { createTestCerts, type TestCerts } from "../../support/certs";
import { startStandIn, type StandInApi } from "../../support/stand-in-api";
import { eventually } from "../../support/wait";

let certs: TestCerts;
let api: StandInApi;
const running: { stop(): void }[] = [];

beforeAll(() => {
  certs = createTestCerts();
});
afterAll(() => rmSync(certs.dir, { recursive: true, force: true }));
beforeEach(async () => {
  api = await startStandIn({ certs });
  process.env.KUBECONFIG = api.kubeconfigPath;
});
afterEach(async () => {
  for (const r of running.splice(0)) r.stop();
  await api.stop();
});

const NS = "team";
const FAST: ListWatchOptions = { retryMinMs: 20, retryMaxMs: 200 };
const configMap = (name: string, data: Record<string, string> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, namespace: NS },
  data,
});
const putAll = (...names: string[]) => names.forEach(n => api.put(configMap(n)));
const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));

/** The list requests (pages) of the namespace's ConfigMaps. */
const pages = () => api.listRequests("configmaps");
/** The watch requests of the namespace's ConfigMaps, as query parameters. */
const watches = () =>
  api.requests
    .filter(r => r.method === "GET" && r.path.includes(`/namespaces/${NS}/configmaps?watch=true`))
    .map(r => new URL(r.path, "https://x").searchParams);

/** A ListWatch of the namespace's ConfigMaps recording what its handlers see. */
function recorded(options: ListWatchOptions = {}, onObject?: (name: string) => Promise<void>) {
  const seen: string[] = [];
  const errors: unknown[] = [];
  const handlers: ListWatchHandlers<KubernetesObject> = {
    onListStart: () => void seen.push("list-start"),
    onListEnd: () => void seen.push("list-end"),
    onObject: async (obj, phase: ListWatchPhase) => {
      seen.push(`${phase} ${obj.metadata?.name}`);
      await onObject?.(obj.metadata?.name ?? "");
    },
    onError: e => void errors.push(e),
  };
  const lw = new ListWatch<KubernetesObject>(kind.ConfigMap, handlers, {
    ...FAST,
    filters: { namespace: NS },
    ...options,
  });
  running.push(lw);
  return { lw, seen, errors };
}

describe("ListWatch: the list", () => {
  it("lists in pages of pageSize (limit + continue), then hands over the watch's events", async () => {
    putAll("a", "b", "c", "d", "e", "f", "g");
    const { lw, seen, errors } = recorded({ pageSize: 2 });
    await lw.start();
    expect(seen).toEqual([
      "list-start",
      ...["a", "b", "c", "d", "e", "f", "g"].map(n => `LISTED ${n}`),
      "list-end",
    ]);
    // 7 objects, 2 a page: 4 pages, each asked with limit=2, all but the first with a continue token.
    const asked = pages().map(r => new URL(r.path, "https://x").searchParams);
    expect(asked.map(p => p.get("limit"))).toEqual(["2", "2", "2", "2"]);
    expect(asked.map(p => !!p.get("continue"))).toEqual([false, true, true, true]);
    expect(lw.synced).toBe(true);

    seen.length = 0;
    api.put(configMap("h"));
    api.put(configMap("a", { changed: "yes" }));
    api.remove("ConfigMap", "b", NS);
    await eventually(() => expect(seen).toEqual(["ADDED h", "MODIFIED a", "DELETED b"]));
    // The watch starts where the list's snapshot ends, with bookmarks and a server-side timeout.
    const [watch] = watches();
    expect(watch.get("allowWatchBookmarks")).toBe("true");
    expect(watch.get("timeoutSeconds")).toBe("300");
    expect(Number(watch.get("resourceVersion"))).toBeGreaterThan(0);
    expect(pages()).toHaveLength(4);
    expect(errors).toEqual([]);
  });

  it("gives listed objects their kind and apiVersion, as watch events' objects have them", async () => {
    putAll("a");
    const objects: KubernetesObject[] = [];
    const lw = new ListWatch<KubernetesObject>(
      kind.ConfigMap,
      { onObject: obj => void objects.push(obj) },
      { filters: { namespace: NS } },
    );
    running.push(lw);
    await lw.start();
    expect(objects.map(o => [o.apiVersion, o.kind, o.metadata?.name])).toEqual([
      ["v1", "ConfigMap", "a"],
    ]);
  });

  it("backpressure: the next page is asked for only once the page's objects were handed over", async () => {
    putAll("a", "b", "c", "d", "e");
    const pagesAtHandOver: number[] = [];
    const { lw } = recorded({ pageSize: 2 }, async () => {
      pagesAtHandOver.push(pages().length);
      await sleep(30); // a slow consumer
    });
    await lw.start();
    // Objects 0-1 came with page 1, 2-3 with page 2, 4 with page 3: never a page ahead.
    expect(pagesAtHandOver).toEqual([1, 1, 2, 2, 3]);
  });

  it("a continue token that expired (410) starts the list over", async () => {
    putAll("a", "b", "c", "d", "e");
    let compacted = false;
    const { lw, seen, errors } = recorded({ pageSize: 2 }, async () => {
      if (compacted) return;
      compacted = true;
      api.compact(); // as etcd compacts while a list is paged: its continue token is gone
    });
    await lw.start();
    const all = ["a", "b", "c", "d", "e"].map(n => `LISTED ${n}`);
    expect(seen).toEqual(["list-start", "LISTED a", "LISTED b", "list-start", ...all, "list-end"]);
    // The first attempt's page 1, its refused continue, then 3 pages.
    expect(pages()).toHaveLength(5);
    expect(errors).toEqual([]);
  });

  it("a list that fails (API server down) is retried with backoff; start() resolves once it completed", async () => {
    putAll("a");
    api.setDown(true);
    const { lw, seen, errors } = recorded();
    let started = false;
    void lw.start().then(() => (started = true));
    await eventually(() => expect(errors.length).toBeGreaterThanOrEqual(2));
    expect(started).toBe(false);
    expect(lw.synced).toBe(false);
    api.setDown(false);
    await eventually(() => expect(started).toBe(true));
    expect(seen).toContain("LISTED a");
    expect(lw.synced).toBe(true);
  });

  it("a page over maxPageBytes (tenants write the objects) is asked for again with half the limit", async () => {
    // Four objects of ~3 KB: a page of 4 or 2 is over 5,000 bytes, a page of 1 is not.
    for (const n of ["a", "b", "c", "d"]) api.put(configMap(n, { blob: "x".repeat(3000) }));
    const { lw, seen, errors } = recorded({ pageSize: 4, maxPageBytes: 5000 });
    await lw.start();
    expect(seen).toEqual([
      "list-start",
      "LISTED a",
      "LISTED b",
      "LISTED c",
      "LISTED d",
      "list-end",
    ]);
    expect(errors).toEqual([]);
    const limits = pages().map(r => new URL(r.path, "https://x").searchParams.get("limit"));
    // 4 and 2 refused (not read past the cap), then four pages of one.
    expect(limits).toEqual(["4", "2", "1", "1", "1", "1"]);
  });

  it("one object over maxPageBytes is an error, retried: never read whole, never a crash", async () => {
    api.put(configMap("big", { blob: "x".repeat(20_000) }));
    const { lw, errors } = recorded({ maxPageBytes: 5000 });
    void lw.start().catch(() => undefined);
    await eventually(() => expect(errors.length).toBeGreaterThanOrEqual(2));
    expect(String(errors[0])).toContain("one object longer than 5000 bytes");
    expect(lw.synced).toBe(false);
  });

  it("listPaged: one paged list, no watch; a kind not served rejects with its status", async () => {
    putAll("a", "b", "c");
    const names: string[] = [];
    await listPaged<KubernetesObject>(kind.ConfigMap, o => void names.push(o.metadata!.name!), {
      pageSize: 2,
      filters: { namespace: NS },
    });
    expect(names).toEqual(["a", "b", "c"]);
    expect(pages()).toHaveLength(2);
    expect(watches()).toHaveLength(0);
    const missing = listPaged(kind.ConfigMap, () => undefined, {
      filters: { kindOverride: { group: "example.com", version: "v1", kind: "Widget" } },
    });
    await expect(missing).rejects.toBeInstanceOf(ApiStatusError);
    await expect(missing).rejects.toMatchObject({ status: 404 });
  });
});

describe("ListWatch: the watch", () => {
  it("a stream that ends (the server's timeout) is reopened from the last resourceVersion, without a list", async () => {
    putAll("a");
    const { lw, seen } = recorded({ watchTimeoutSeconds: 1 });
    await lw.start();
    api.put(configMap("b"));
    await eventually(() => expect(seen).toContain("ADDED b"));
    const rvOfB = api.get("ConfigMap", "b", NS)!.metadata!.resourceVersion;
    // The stand-in ends each stream after timeoutSeconds=1: the next opens where the last left off.
    await eventually(() => expect(watches().length).toBeGreaterThanOrEqual(2), 5000);
    expect(watches()[0].get("timeoutSeconds")).toBe("1");
    expect(Number(watches()[1].get("resourceVersion"))).toBeGreaterThanOrEqual(Number(rvOfB));
    api.put(configMap("c"));
    await eventually(() => expect(seen).toContain("ADDED c"));
    expect(pages()).toHaveLength(1);
    expect(seen.filter(s => s === "ADDED b")).toHaveLength(1); // not replayed
  });

  it("bookmarks move the resourceVersion: a reopened watch starts after changes of other kinds", async () => {
    putAll("a");
    const { lw } = recorded();
    await lw.start();
    await eventually(() => expect(api.watching("ConfigMap")).toBe(1));
    const listed = Number(watches()[0].get("resourceVersion"));
    // Changes the watch does not see (another kind): only a bookmark tells the client of them.
    for (let i = 0; i < 3; i++)
      api.put({ apiVersion: "v1", kind: "Namespace", metadata: { name: `ns-${i}` } });
    const now = Number(api.get("Namespace", "ns-2")!.metadata!.resourceVersion);
    expect(now).toBeGreaterThan(listed);
    // The stand-in sends a bookmark at the current resourceVersion when a watch opens: the first
    // reopen is from the list's, the one after from the bookmark's.
    api.endWatches("ConfigMap");
    await eventually(() => expect(watches()).toHaveLength(2));
    expect(Number(watches()[1].get("resourceVersion"))).toBe(listed);
    await eventually(() => expect(api.watching("ConfigMap")).toBe(1));
    api.endWatches("ConfigMap");
    await eventually(() => expect(watches()).toHaveLength(3));
    expect(Number(watches()[2].get("resourceVersion"))).toBe(now);
    expect(pages()).toHaveLength(1);
  });

  it("periodic bookmarks move it while the watch stays open", async () => {
    await api.stop();
    api = await startStandIn({ certs, bookmarkIntervalMs: 50 });
    process.env.KUBECONFIG = api.kubeconfigPath;
    const { lw } = recorded();
    await lw.start();
    await eventually(() => expect(api.watching("ConfigMap")).toBe(1));
    const other = api.put({ apiVersion: "v1", kind: "Namespace", metadata: { name: "x" } });
    await sleep(200); // a few bookmarks
    api.endWatches("ConfigMap");
    await eventually(() => expect(watches()).toHaveLength(2));
    expect(watches()[1].get("resourceVersion")).toBe(other.metadata!.resourceVersion);
  });

  it("an ERROR 410 in the watch lists again (onListStart, LISTED, onListEnd), then watches from the new list", async () => {
    putAll("a", "b", "c");
    const { lw, seen, errors } = recorded({ pageSize: 2 });
    await lw.start();
    await eventually(() => expect(api.watching("ConfigMap")).toBe(1));
    seen.length = 0;
    api.expireWatches("ConfigMap");
    await eventually(() =>
      expect(seen).toEqual(["list-start", "LISTED a", "LISTED b", "LISTED c", "list-end"]),
    );
    expect(pages()).toHaveLength(4); // 2 pages, twice
    await eventually(() => expect(api.watching("ConfigMap")).toBe(1));
    api.put(configMap("d"));
    await eventually(() => expect(seen).toContain("ADDED d"));
    expect(errors).toEqual([]); // a 410 is routine, not an error
  });

  it("a dropped connection is retried with backoff (onError, not synced meanwhile), then resumes without a list", async () => {
    putAll("a");
    const { lw, seen, errors } = recorded();
    await lw.start();
    await eventually(() => expect(api.watching("ConfigMap")).toBe(1));
    api.setDown(true);
    await eventually(() => expect(errors.length).toBeGreaterThanOrEqual(2));
    expect(lw.synced).toBe(false);
    api.setDown(false);
    await eventually(() => expect(api.watching("ConfigMap")).toBe(1));
    expect(lw.synced).toBe(true);
    api.put(configMap("b"));
    await eventually(() => expect(seen).toContain("ADDED b"));
    expect(pages()).toHaveLength(1);
  });

  it("an event longer than maxEventBytes is an error, not unbounded memory; the watch goes on trying", async () => {
    putAll("a");
    const { lw, errors } = recorded({ maxEventBytes: 2000 });
    await lw.start();
    await eventually(() => expect(api.watching("ConfigMap")).toBe(1));
    api.put(configMap("big", { blob: "x".repeat(5000) }));
    await eventually(() =>
      expect(String(errors[0])).toContain("a watch event longer than 2000 bytes"),
    );
    await eventually(() => expect(errors.length).toBeGreaterThanOrEqual(2)); // retried
  });

  it("stop() ends the request in flight and every timer: nothing is left open", async () => {
    const baseline = resources();
    putAll("a");
    const { lw } = recorded({ watchTimeoutSeconds: 60 });
    await lw.start();
    await eventually(() => expect(api.watching("ConfigMap")).toBe(1));
    expect(beyond(baseline)).not.toEqual({});
    lw.stop();
    await eventually(() => expect(api.watching("ConfigMap")).toBe(0));
    await eventually(() => expect(beyond(baseline)).toEqual({}));
    // And one stopped while it waits to retry (the API server down): start() resolves.
    api.setDown(true);
    const down = recorded();
    const started = down.lw.start();
    await eventually(() => expect(down.errors.length).toBeGreaterThanOrEqual(1));
    down.lw.stop();
    await expect(started).resolves.toBeUndefined();
    api.setDown(false);
    await eventually(() => expect(beyond(baseline)).toEqual({}));
  });
});

/** Open handles of this process that would keep it alive: sockets and timers. */
function resources(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of process.getActiveResourcesInfo())
    if (r === "TLSWrap" || r === "TCPSocketWrap" || r === "Timeout")
      counts[r] = (counts[r] ?? 0) + 1;
  return counts;
}

/** The handles open now beyond those of `baseline` (an earlier test's may still be closing). */
function beyond(baseline: Record<string, number>): Record<string, number> {
  return Object.fromEntries(
    Object.entries(resources())
      .map(([r, n]) => [r, n - (baseline[r] ?? 0)] as const)
      .filter(([, n]) => n > 0),
  );
}

describe("WatchedStore on ListWatch", () => {
  const store = (options: ListWatchOptions = {}) => {
    const s = new WatchedStore<KubernetesObject>(
      kind.ConfigMap,
      "configmaps",
      undefined,
      undefined,
      { namespace: NS },
      { ...FAST, pageSize: 2, ...options },
    );
    const events: string[] = [];
    let lists = 0;
    s.listeners.push((obj, phase) => events.push(`${phase} ${obj.metadata?.name}`));
    s.listListeners.push(() => lists++);
    running.push(s);
    return { s, events, lists: () => lists };
  };
  const held = (s: WatchedStore<KubernetesObject>) => [...s.items.keys()].sort();

  it("lists into the store (ADDED), synced once listed; watch events follow", async () => {
    putAll("a", "b", "c");
    const { s, events, lists } = store();
    expect(s.synced).toBe(false);
    await s.start();
    expect(s.synced).toBe(true);
    expect(lists()).toBe(1);
    expect(s.lastSyncMs).toBeGreaterThan(0);
    expect(events).toEqual(["ADDED a", "ADDED b", "ADDED c"]);
    expect(held(s)).toEqual([`${NS}/a`, `${NS}/b`, `${NS}/c`]);
    api.remove("ConfigMap", "a", NS);
    await eventually(() => expect(held(s)).toEqual([`${NS}/b`, `${NS}/c`]));
    expect(s.inNamespace(NS).map(o => o.metadata?.name)).toEqual(["b", "c"]);
  });

  it("after an outage whose changes the watch missed (410 on resume), a re-list deletes what is gone and tells listeners", async () => {
    putAll("a", "b", "c");
    const { s, events, lists } = store();
    await s.start();
    await eventually(() => expect(api.watching("ConfigMap")).toBe(1));
    events.length = 0;
    api.setDown(true);
    await eventually(() => expect(s.lastError).toBeDefined());
    // While the watch is down: b deleted, c changed, d created, a untouched; the change log is
    // then compacted, so the watch cannot resume from where it was.
    api.remove("ConfigMap", "b", NS);
    api.put(configMap("c", { changed: "yes" }));
    api.put(configMap("d"));
    api.compact();
    api.setDown(false);
    await eventually(() => expect(lists()).toBe(2));
    expect(held(s)).toEqual([`${NS}/a`, `${NS}/c`, `${NS}/d`]);
    // As kubernetes-fluent-client's Watcher told them: a changed object MODIFIED, a new one ADDED,
    // an unchanged one nothing, and what the list no longer shows DELETED once it completed.
    expect(events).toEqual(["MODIFIED c", "ADDED d", "DELETED b"]);
    expect((s.items.get(`${NS}/c`) as KubeObject).data).toEqual({ changed: "yes" });
    expect(s.lastError).toBeUndefined();
  });

  it("the projection (keep) is applied to listed and watched objects", async () => {
    putAll("a");
    const s = new WatchedStore<KubernetesObject>(
      kind.ConfigMap,
      "configmaps",
      undefined,
      obj => ({ metadata: { namespace: obj.metadata?.namespace, name: obj.metadata?.name } }),
      { namespace: NS },
      FAST,
    );
    running.push(s);
    await s.start();
    api.put(configMap("b", { big: "x".repeat(100) }));
    await eventually(() => expect(s.items.size).toBe(2));
    for (const obj of s.all()) expect(Object.keys(obj)).toEqual(["metadata"]);
  });
});
