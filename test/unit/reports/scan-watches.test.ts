// The watcher's own lists and watches (lib/reports/scan-watches.ts): which kinds it watches for the
// scan and the Events, what each handler passes on (awaited, for the lists' backpressure), the
// namespaces Pepr's watch ignores, the scan's re-reads, and when the watches start. And the one
// Pepr Watch binding left (Namespaces): a namespace's labels changed, its objects judged again.
import type { FixEvents } from "../../../lib/reports/events";
import type { ListWatchHandlers } from "../../../lib/cluster/list-watch";
import type { KubeObject } from "../../../lib/objects/pod";
import {
  BUILT_IN_WATCHED,
  ScanWatches,
  watchIgnoredNamespaces,
  whenListed,
  type WatchedKind,
} from "../../../lib/reports/scan-watches";
import type { ReportScanner } from "../../../lib/reports/scanner";
import { backgroundActions, configureBackground } from "../../../lib/reports/watcher";
import { BUILT_IN_KINDS } from "../../../lib/workload-kinds/table";
import cfg from "../../../package.json";

/** Each call of the scan and the Events, in order. */
function targets() {
  const calls: string[] = [];
  let release: (() => void) | undefined;
  const scanner = {
    offer: async (obj: KubeObject, phase: string) => {
      calls.push(`offer ${phase} ${obj.kind} ${obj.apiVersion} ${obj.metadata?.name}`);
      // A full queue: the offer waits for room until the test releases it.
      if (obj.metadata?.name === "slow") await new Promise<void>(done => (release = done));
    },
    forget: (obj: KubeObject) => void calls.push(`forget ${obj.kind} ${obj.metadata?.name}`),
    listStarted: (kind: string) => void calls.push(`list start ${kind}`),
    listEnded: (kind: string) => void calls.push(`list end ${kind}`),
  };
  const events = {
    onPod: async (pod: KubeObject) => void calls.push(`event ${pod.metadata?.name}`),
  };
  return {
    calls,
    release: () => release?.(),
    scanner: scanner as unknown as ReportScanner,
    events: events as unknown as FixEvents,
  };
}

function fakeWatches() {
  const started = new Map<string, ListWatchHandlers<KubeObject>>();
  const stopped: string[] = [];
  const watch = (what: WatchedKind, handlers: ListWatchHandlers<KubeObject>) => {
    started.set(what.kind, handlers);
    return { start: async () => undefined, stop: () => void stopped.push(what.kind) };
  };
  return { started, stopped, watch };
}

const obj = (kind: string, name: string, namespace = "ml", apiVersion?: string): KubeObject => ({
  ...(apiVersion ? { apiVersion, kind } : {}),
  metadata: { name, namespace },
});

describe("what the watcher lists and watches", () => {
  it("for the scan: Pods and the built-in workload kinds, each once; the ML kinds once served", async () => {
    const fake = fakeWatches();
    const served = new Set(["PyTorchJob"]);
    const watches = new ScanWatches({
      workloadKinds: BUILT_IN_KINDS,
      watch: fake.watch,
      probe: async spec => served.has(spec.kind),
    });
    const { scanner } = targets();
    watches.start({ scanner });
    await new Promise(resolve => setImmediate(resolve));
    expect([...fake.started.keys()]).toEqual([
      "Pod",
      "Deployment",
      "StatefulSet",
      "DaemonSet",
      "Job",
      "CronJob",
      "PyTorchJob",
    ]);
    watches.stop();
    expect(fake.stopped).toHaveLength(7);
  });

  it("for the Events alone: Pods only; for neither: nothing", () => {
    const fake = fakeWatches();
    new ScanWatches({ workloadKinds: BUILT_IN_KINDS, watch: fake.watch }).start({
      events: targets().events,
    });
    expect([...fake.started.keys()]).toEqual(["Pod"]);
    const none = fakeWatches();
    new ScanWatches({ workloadKinds: BUILT_IN_KINDS, watch: none.watch }).start({});
    expect(none.started.size).toBe(0);
  });
});

describe("each object, handed over", () => {
  it("listed or changed: offered to the scan (a Pod to the Events too); deleted: forgotten", async () => {
    const fake = fakeWatches();
    const t = targets();
    new ScanWatches({ workloadKinds: [], watch: fake.watch }).start(t);
    const pods = fake.started.get("Pod")!;
    const deployments = fake.started.get("Deployment")!;
    await pods.onListStart?.();
    // A list's items carry no kind or apiVersion: given those of the kind listed.
    await pods.onObject(obj("", "a"), "LISTED");
    await pods.onListEnd?.();
    await pods.onObject(obj("Pod", "a", "ml", "v1"), "MODIFIED");
    await pods.onObject(obj("Pod", "a", "ml", "v1"), "DELETED");
    await deployments.onObject(obj("Deployment", "web", "ml", "apps/v1"), "ADDED");
    expect(t.calls).toEqual([
      "list start Pod.",
      "offer LISTED Pod v1 a",
      "event a",
      "list end Pod.",
      "offer MODIFIED Pod v1 a",
      "event a",
      "forget Pod a",
      "offer ADDED Deployment apps/v1 web",
    ]);
  });

  it("the handler waits for the scan: a full queue holds the list back", async () => {
    const fake = fakeWatches();
    const t = targets();
    new ScanWatches({ workloadKinds: [], watch: fake.watch }).start({ scanner: t.scanner });
    let handed = false;
    const handing = Promise.resolve(
      fake.started.get("Pod")!.onObject(obj("Pod", "slow", "ml", "v1"), "LISTED"),
    ).then(() => (handed = true));
    await new Promise(resolve => setTimeout(resolve, 20));
    expect(handed).toBe(false);
    t.release();
    await handing;
    expect(handed).toBe(true);
  });

  it("objects in the namespaces Pepr's watch ignores are not handed over (as its bindings never did)", async () => {
    const fake = fakeWatches();
    const t = targets();
    new ScanWatches({
      workloadKinds: [],
      watch: fake.watch,
      ignoredNamespaces: ["kube-system"],
    }).start(t);
    await fake.started.get("Pod")!.onObject(obj("Pod", "coredns", "kube-system", "v1"), "ADDED");
    await fake.started.get("Pod")!.onObject(obj("Pod", "coredns", "kube-system", "v1"), "DELETED");
    expect(t.calls).toEqual([]);
  });

  it("the ignored namespaces: package.json's, as Pepr reads them, and PEPR_ADDITIONAL_IGNORED_NAMESPACES", () => {
    expect(watchIgnoredNamespaces(cfg.pepr, {})).toEqual(cfg.pepr.alwaysIgnore.namespaces);
    expect(
      watchIgnoredNamespaces(
        { watch: { alwaysIgnore: { namespaces: ["a"] } } },
        { PEPR_ADDITIONAL_IGNORED_NAMESPACES: " b, c ,," },
      ),
    ).toEqual(["a", "b", "c"]);
    expect(
      watchIgnoredNamespaces({
        alwaysIgnore: { namespaces: ["x"] },
        watch: { alwaysIgnore: { namespaces: ["a"] } },
      }),
    ).toEqual(["x"]);
  });
});

describe("the scan's re-read", () => {
  it("lists every kind watched for the scan, in that namespace, each object awaited", async () => {
    const fake = fakeWatches();
    const lists: string[] = [];
    const watches = new ScanWatches({
      workloadKinds: BUILT_IN_KINDS,
      ignoredNamespaces: ["kube-system"],
      watch: fake.watch,
      probe: async spec => spec.kind === "RayCluster",
      list: async (what, namespace, onObject) => {
        lists.push(`${what.kind} ${namespace ?? "(all)"}`);
        if (what.kind === "Pod") {
          await onObject(obj("", "a", namespace));
          await onObject(obj("", "dns", "kube-system"));
        }
      },
    });
    watches.start({ scanner: targets().scanner });
    await new Promise(resolve => setImmediate(resolve));
    const seen: string[] = [];
    await watches.relist(
      "ml",
      async o => void seen.push(`${o.kind} ${o.apiVersion} ${o.metadata?.name}`),
    );
    expect(lists).toEqual([...BUILT_IN_WATCHED.map(k => `${k.kind} ml`), "RayCluster ml"]);
    expect(seen).toEqual(["Pod v1 a"]);
    lists.length = 0;
    await watches.relist(undefined, async () => undefined);
    expect(lists).toContain("Pod (all)");
  });
});

describe("when the watches start", () => {
  const cache = (synced = false) => ({ synced, listListeners: [] as (() => void)[] });

  it("once every cache has listed", async () => {
    const caches = [cache(true), cache(), cache()];
    let started = false;
    void whenListed(caches, 60_000).then(() => (started = true));
    const listed = (c: ReturnType<typeof cache>) => {
      c.synced = true;
      for (const l of c.listListeners) l();
    };
    listed(caches[1]);
    await new Promise(resolve => setImmediate(resolve));
    expect(started).toBe(false);
    listed(caches[2]);
    await new Promise(resolve => setImmediate(resolve));
    expect(started).toBe(true);
  });

  it("or after the timeout (a cache that cannot list does not stop the reports)", async () => {
    const begun = Date.now();
    await whenListed([cache()], 50);
    expect(Date.now() - begun).toBeGreaterThanOrEqual(45);
  });
});

describe("the Namespace binding's action (the one Pepr Watch binding)", () => {
  it("a namespace whose labels or annotations changed is judged again; a status update is not", () => {
    const asked: (string | undefined)[] = [];
    const scanner = { rejudgeSoon: (ns?: string) => void asked.push(ns) };
    configureBackground({ scanner: scanner as unknown as ReportScanner });
    const { onNamespace } = backgroundActions();
    const ns = (labels: Record<string, string>, phase?: string): KubeObject => ({
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: "ml", labels },
      ...(phase ? { status: { phase } } : {}),
    });
    onNamespace(ns({}), "ADDED");
    onNamespace(ns({}, "Active"), "MODIFIED");
    onNamespace(ns({ "admission-guard.dev/mode": "audit" }), "MODIFIED");
    onNamespace(ns({ "admission-guard.dev/mode": "audit" }), "MODIFIED");
    expect(asked).toEqual(["ml", "ml"]);
    // Deleted, then made again: judged as new.
    onNamespace(ns({ "admission-guard.dev/mode": "audit" }), "DELETED");
    onNamespace(ns({ "admission-guard.dev/mode": "audit" }), "ADDED");
    expect(asked).toEqual(["ml", "ml", "ml"]);
    configureBackground({});
  });
});
