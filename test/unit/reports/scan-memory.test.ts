// The report scan's memory follows what it reports, not the objects. It keeps per object
// a digest, its results and two marks, never the object; it reads objects again to judge them
// again; at most maxQueued whole objects wait, and one more waits for room (the list that awaits it
// slows down); the end of a re-list forgets what it no longer listed.
import { policies } from "../../../capabilities";
import { SnapshotCluster } from "../../../lib/cluster/view";
import * as engine from "../../../lib/engine";
import type { EngineDeps } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import type { PolicyReport } from "../../../lib/reports/policy-report";
import { RELIST_NAMESPACES } from "../../../lib/reports/rereads";
import { ReportScanner, type ReportStore, type ScannerOptions } from "../../../lib/reports/scanner";
import { defaultSettings } from "../../../lib/settings";
import { eventually } from "../../support/wait";
import { ScannerOverApi } from "./support";

// The engine's answer, held at a gate when a test closes it: judging then waits, objects pile up.
jest.mock("../../../lib/engine", () => {
  const actual = jest.requireActual("../../../lib/engine");
  return {
    ...actual,
    answer: jest.fn(async (...args: Parameters<typeof actual.answer>) => {
      await mockGate.wait();
      return actual.answer(...args);
    }),
  };
});
const mockGate = {
  closed: undefined as Promise<void> | undefined,
  open: () => undefined as void,
  wait(): Promise<void> {
    return this.closed ?? Promise.resolve();
  },
  close(): void {
    this.closed = new Promise<void>(resolve => (this.open = resolve));
  },
  release(): void {
    this.open();
    this.closed = undefined;
  },
};
afterEach(() => mockGate.release());

const NS = "ml";

function pod(name: string, namespace = NS, privileged = true, extra = ""): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace,
      uid: `uid-${namespace}-${name}`,
      labels: { "app.kubernetes.io/component": "trainer", app: name },
      managedFields: [{ manager: "only-in-managed-fields", operation: "Update" }],
    },
    spec: {
      // What only the object holds: a kept object would carry it into the scan's state.
      volumes: [{ name: "cache-volume-only-in-spec", emptyDir: {} }],
      containers: [
        {
          name: "c",
          image: "ghcr.io/org/trainer:1",
          env: [{ name: "MARKER", value: `only-in-the-spec${extra}` }],
          securityContext: { privileged },
        },
      ],
    },
    status: { phase: "Running", podIP: "10.0.0.1", conditions: [{ type: "Ready" }] },
  };
}

const deployment = (name: string, namespace = NS): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name, namespace, uid: `uid-${name}` },
  spec: {
    selector: { matchLabels: { app: name } },
    template: {
      metadata: { labels: { app: name, "app.kubernetes.io/component": "serve" } },
      spec: { containers: [{ name: "s", image: "ghcr.io/org/serve:1" }] },
    },
  },
});

class ListStore implements ReportStore {
  readonly stored = new Map<string, PolicyReport>();
  writes = 0;
  async read(namespace: string) {
    return this.stored.get(namespace);
  }
  async write(report: PolicyReport) {
    this.writes++;
    this.stored.set(report.metadata.namespace, structuredClone(report));
  }
  async remove(namespace: string) {
    this.stored.delete(namespace);
  }
}

function setup(options: Partial<Omit<ScannerOptions, "relist">> = {}, namespaces = [NS]) {
  const deps: EngineDeps = {
    settings: defaultSettings(),
    cluster: new SnapshotCluster(
      namespaces.map(name => ({ apiVersion: "v1", kind: "Namespace", metadata: { name } })),
    ),
    policies,
  };
  const store = new ListStore();
  const scanner = new ScannerOverApi(() => deps, store, {
    intervalMs: 0,
    maxResults: 1000,
    debounceMs: 60_000,
    ...options,
  });
  return { deps, store, scanner, api: scanner.api };
}

/** The scan's private state: what it holds per object, and what waits to be judged. */
const stateOf = (scanner: ReportScanner) =>
  scanner as unknown as {
    objects: Map<string, Map<string, Record<string, unknown>>>;
    toJudge: Map<string, unknown>;
  };

const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms));

const written = async (scanner: ReportScanner) => {
  scanner.flushPending();
  await scanner.idle();
};

const judgedNames = (report: PolicyReport | undefined) =>
  [...new Set((report?.results ?? []).map(r => r.resources[0].name))].sort();

describe("what the scan keeps of an object", () => {
  it("after 2,000 pods: a digest, the results and its marks for each, never the object", async () => {
    const { scanner, store } = setup({ maxResults: 100_000 }, ["ml", "team-b"]);
    const pods = Array.from({ length: 2000 }, (_, i) =>
      pod(`p-${i}`, i % 2 ? "ml" : "team-b", i % 3 === 0),
    );
    for (const p of pods) await scanner.offer(p, "LISTED");
    await scanner.idle();
    expect(scanner.stats.judged).toBe(2000);
    const { objects, toJudge } = stateOf(scanner);
    expect(toJudge.size).toBe(0);
    const entries = [...objects.values()].flatMap(inNs => [...inNs.values()]);
    expect(entries).toHaveLength(2000);
    for (const entry of entries) {
      expect(
        Object.keys(entry).every(k =>
          ["digest", "results", "seen", "judged", "listed"].includes(k),
        ),
      ).toBe(true);
      expect(typeof entry.digest).toBe("string");
      expect(Object.keys(entry.results as object).sort()).toEqual(["findings", "judgedBy", "ref"]);
    }
    // Nothing of the spec, the status or the managed fields is held, in any form.
    const held = JSON.stringify(
      entries.map(e => ({ ...e, results: { ...(e.results as object), judgedBy: [] } })),
    );
    for (const part of [
      "only-in-the-spec",
      "cache-volume-only-in-spec",
      "10.0.0.1",
      "only-in-managed-fields",
      "conditions",
    ])
      expect(held).not.toContain(part);
    // Equal findings (a template's pods find the same) are held once: one list per content.
    const lists = entries.map(e => (e.results as { findings: unknown[] }).findings);
    expect(new Set(lists).size).toBe(new Set(lists.map(l => JSON.stringify(l))).size);
    expect(new Set(lists).size).toBeLessThan(10);
    // The tables that share them hold long keys (a finding's text) as digests, not as themselves.
    const tables = (
      scanner as unknown as { interner: Record<string, { table: Map<string, unknown> }> }
    ).interner;
    for (const name of ["findings", "findingLists"]) {
      const keys = [...tables[name].table.keys()];
      expect(keys.length).toBeGreaterThan(0);
      expect(Math.max(...keys.map(k => k.length))).toBeLessThanOrEqual(64);
    }
    // And the reports are complete.
    await written(scanner);
    expect(judgedNames(store.stored.get("ml"))).toHaveLength(1000);
    expect(judgedNames(store.stored.get("team-b"))).toHaveLength(1000);
  });

  it("a version whose labels, annotations and spec did not change is dropped before it waits", async () => {
    const { scanner } = setup();
    await scanner.observe(pod("a"));
    await scanner.observe(pod("b"));
    const judged = scanner.stats.judged;
    for (const name of ["a", "b"]) {
      const update = { ...pod(name), status: { phase: "Running", podIP: "10.0.0.9" } };
      void scanner.offer(update, "MODIFIED");
      // Not even queued: nothing waits to be judged.
      expect(stateOf(scanner).toJudge.size).toBe(0);
    }
    await scanner.idle();
    expect(scanner.stats.unchanged).toBe(2);
    expect(scanner.stats.judged).toBe(judged);
  });
});

describe("the queue's bound", () => {
  it("at most maxQueued objects wait; the next offer waits for room, and so does the list awaiting it", async () => {
    const { scanner } = setup({ maxQueued: 4 });
    mockGate.close();
    let offered = 0;
    let most = 0;
    // As a ListWatch hands over a list: each object awaited before the next.
    const list = (async () => {
      for (let i = 0; i < 20; i++) {
        await scanner.offer(pod(`p-${i}`), "LISTED");
        offered++;
        most = Math.max(most, stateOf(scanner).toJudge.size);
      }
    })();
    await new Promise(resolve => setTimeout(resolve, 50));
    // One is being judged (held at the gate), four wait: the sixth offer waits for room.
    expect(stateOf(scanner).toJudge.size).toBe(4);
    expect(offered).toBe(5);
    mockGate.release();
    await list;
    await scanner.idle();
    expect(offered).toBe(20);
    expect(most).toBeLessThanOrEqual(4);
    expect(scanner.stats.judged).toBe(20);
  });

  it("many offers at once (a benchmark's burst): never more than maxQueued wait, every one judged", async () => {
    const { scanner } = setup({ maxQueued: 8 });
    let most = 0;
    const sample = setInterval(() => (most = Math.max(most, stateOf(scanner).toJudge.size)), 1);
    const all = Array.from({ length: 300 }, (_, i) => scanner.observe(pod(`p-${i}`)));
    most = Math.max(most, stateOf(scanner).toJudge.size);
    await Promise.all(all);
    clearInterval(sample);
    expect(most).toBe(8);
    expect(scanner.stats.judged).toBe(300);
    expect(scanner.size()).toBe(300);
  });

  it("a newer version of an object waiting replaces it: no second place in the queue", async () => {
    const { scanner, store } = setup({ maxQueued: 2 });
    mockGate.close();
    void scanner.offer(pod("first"), "ADDED"); // being judged
    void scanner.offer(pod("a"), "ADDED");
    void scanner.offer(pod("a", NS, false), "MODIFIED");
    expect(stateOf(scanner).toJudge.size).toBe(1);
    mockGate.release();
    await scanner.idle();
    await written(scanner);
    expect(
      store.stored.get(NS)!.results.filter(r => r.resources[0].name === "a" && r.result === "fail"),
    ).not.toContainEqual(expect.objectContaining({ rule: "privileged" }));
  });
});

describe("judging again reads the objects again", () => {
  it("rejudgeSoon(namespace): that namespace re-read, each object judged again though unchanged", async () => {
    const { deps, scanner, store, api } = setup({ debounceMs: 10 }, ["ml", "team-b"]);
    for (const name of ["a", "b", "c"]) await scanner.observe(pod(name, "ml"));
    for (const name of ["d", "e"]) await scanner.observe(pod(name, "team-b"));
    await written(scanner);
    const judged = scanner.stats.judged;
    const before = store.stored.get("team-b");
    // What they are judged with changed: security-context no longer judges.
    deps.policies = policies.filter(p => p.name !== "security-context");
    scanner.rejudgeSoon("ml");
    await eventually(() => expect(api.relists).toEqual(["ml"]), 5000, 10);
    await scanner.idle();
    expect(scanner.stats.judged).toBe(judged + 3);
    await written(scanner);
    expect(store.stored.get("ml")!.results.some(r => r.policy === "security-context")).toBe(false);
    expect(store.stored.get("team-b")).toEqual(before);
  });

  it("rejudgeSoon() before anything was judged (caches listing at a start) reads nothing again", async () => {
    const { scanner, api } = setup({ debounceMs: 100 }, ["ml"]);
    scanner.rejudgeSoon();
    scanner.rejudgeSoon("ml");
    // The watches start meanwhile: the object is judged with the caches as they are now.
    await scanner.observe(pod("a", "ml"));
    await sleep(300);
    expect(api.relists).toEqual([]);
    // Once something was judged, a change is judged again.
    scanner.rejudgeSoon();
    await eventually(() => expect(api.relists).toEqual(["ml"]), 5000, 10);
  });

  it("every namespace: each re-read in turn, or all at once past RELIST_NAMESPACES", async () => {
    const many = Array.from({ length: RELIST_NAMESPACES + 1 }, (_, i) => `ns-${i}`);
    const few = setup({}, ["ml", "team-b"]);
    await few.scanner.observe(pod("a", "ml"));
    await few.scanner.observe(pod("b", "team-b"));
    await few.scanner.rejudge();
    expect(few.api.relists.sort()).toEqual(["ml", "team-b"]);
    expect(few.scanner.stats.judged).toBe(4);

    const lots = setup({}, many);
    for (const ns of many) await lots.scanner.observe(pod("a", ns));
    await lots.scanner.rejudge();
    expect(lots.api.relists).toEqual([undefined]);
    expect(lots.scanner.stats.judged).toBe(2 * many.length);
  });

  it("only the version judged is judged from a re-read: another comes (or came) by the watch", async () => {
    const { scanner, api } = setup();
    await scanner.observe(pod("a"));
    await scanner.observe(pod("b"));
    // The API server has a newer "a" the watch has not delivered yet, and a "c" it never did.
    api.put(pod("a", NS, false));
    api.put(pod("c"));
    const judged = scanner.stats.judged;
    await scanner.rejudge();
    expect(scanner.stats.judged).toBe(judged + 1); // "b" only
    expect(scanner.size()).toBe(2);
  });

  it("what was judged after the change is not judged again", async () => {
    const { scanner, api } = setup();
    await scanner.observe(pod("old"));
    // A re-read that takes a while: an object arrives and is judged meanwhile.
    let release!: () => void;
    api.paused = new Promise<void>(resolve => (release = resolve));
    const again = scanner.rejudge();
    await scanner.observe(pod("new"));
    const judged = scanner.stats.judged;
    release();
    await again;
    expect(api.relists).toEqual([NS]);
    expect(scanner.stats.judged).toBe(judged + 1); // "old" only
  });

  it("changes during a long re-read join one more re-read, not one each", async () => {
    const { scanner, api } = setup({}, ["ml", "team-b"]);
    await scanner.observe(pod("a", "ml"));
    await scanner.observe(pod("b", "team-b"));
    const { rereads } = scanner as unknown as { rereads: { readAgain: () => Promise<void> } };
    const reads = jest.spyOn(rereads, "readAgain");
    let release!: () => void;
    api.paused = new Promise<void>(resolve => (release = resolve));
    const first = scanner.rejudge(["ml"]);
    await eventually(() => expect(reads).toHaveBeenCalledTimes(1));
    // 50 changes while the first waits on the API server: namespace by namespace, then all.
    const later = Array.from({ length: 50 }, (_, i) =>
      scanner.rejudge(i === 49 ? undefined : [i % 2 ? "ml" : "team-b"]),
    );
    release();
    await Promise.all([first, ...later]);
    // The first re-read, then one for all the 50 asked (team-b: ml's object was judged by the
    // first after they asked), where each would have scanned every object held, and re-read
    // whatever changed meanwhile.
    expect(reads).toHaveBeenCalledTimes(2);
    expect(api.relists).toEqual(["ml", "team-b"]);
    expect(scanner.stats.judged).toBe(2 + 2);
  });

  it("a re-read that fails is said, and nothing is judged from it", async () => {
    const warnings: string[] = [];
    const deps: EngineDeps = {
      settings: defaultSettings(),
      cluster: new SnapshotCluster([
        { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
      ]),
      policies,
    };
    const scanner = new ReportScanner(() => deps, new ListStore(), {
      intervalMs: 0,
      maxResults: 100,
      relist: async () => {
        throw new Error("the API server is away");
      },
      log: { info: () => undefined, warn: (_o, m) => warnings.push(m) },
    });
    await scanner.observe(pod("a"));
    await scanner.rejudge();
    expect(warnings).toEqual([
      "could not read the objects again to judge them again; retrying later",
    ]);
    expect(scanner.stats.judged).toBe(1);
  });
});

describe("a re-list of a kind", () => {
  it("forgets, at its end, the objects of that kind it did not list (deleted while the watch was away)", async () => {
    const { scanner, store } = setup();
    for (const name of ["a", "b", "gone"]) await scanner.observe(pod(name));
    await scanner.observe(deployment("web"));
    await written(scanner);
    expect(judgedNames(store.stored.get(NS))).toEqual(["a", "b", "gone", "web"]);
    scanner.listStarted("Pod.");
    await scanner.offer(pod("a"), "LISTED");
    await scanner.offer(pod("b", NS, false), "LISTED"); // changed meanwhile, listed too
    scanner.listEnded("Pod.");
    await scanner.idle();
    // The Deployment is not of the kind re-listed: kept.
    expect(scanner.size()).toBe(3);
    await written(scanner);
    expect(judgedNames(store.stored.get(NS))).toEqual(["a", "b", "web"]);
  });

  it("drops what waits to be judged and was not listed; keeps what was", async () => {
    const { scanner } = setup({ maxQueued: 8 });
    mockGate.close();
    void scanner.offer(pod("judging"), "ADDED");
    void scanner.offer(pod("waiting"), "ADDED");
    void scanner.offer(pod("listed"), "ADDED");
    scanner.listStarted("Pod.");
    void scanner.offer(pod("listed"), "LISTED");
    scanner.listEnded("Pod.");
    expect(stateOf(scanner).toJudge.size).toBe(1);
    mockGate.release();
    await scanner.idle();
    expect(scanner.size()).toBe(1);
  });

  it("a report waits while its kind is being listed (within bounds), then is written complete", async () => {
    const { scanner, store } = setup();
    scanner.listStarted("Pod.");
    await scanner.offer(pod("a"), "LISTED");
    await scanner.idle();
    scanner.flushPending(); // its write is due
    await new Promise(resolve => setTimeout(resolve, 100));
    expect(store.writes).toBe(0);
    await scanner.offer(pod("b"), "LISTED");
    scanner.listEnded("Pod.");
    await eventually(() => expect(store.writes).toBe(1), 5000, 10);
    expect(judgedNames(store.stored.get(NS))).toEqual(["a", "b"]);
  });
});

test("the engine is the one the scan calls (the gate above holds it)", () => {
  expect(jest.isMockFunction(engine.answer)).toBe(true);
});
