// The background scan behind the PolicyReports: judges each object the watcher hands it with the
// engine (a dry run), keeps per object a digest and results, and writes one report per namespace,
// bounded in queue, time slices and writes. Why: docs/adr/0012-list-and-watch-holding-no-objects.md
// This file is the queue and what is kept per object; equal results are shared by interning.ts,
// objects read again to be judged again by rereads.ts, reports written by report-writes.ts.
import { createHash } from "node:crypto";
import { performance } from "node:perf_hooks";
import { answer, madeByController, type EngineDeps } from "../engine";
import { isPod, type KubeObject } from "../objects/pod";
import { isWorkload } from "../workload-kinds/built-in";
import { kindsInForce } from "../workload-kinds/in-force";
import { groupOf } from "../workload-kinds/kind-spec";
import { isIgnoredNamespace } from "../settings";
import { observeWatcherQueue, recordJudged } from "../metrics";
import { ResultInterner } from "./interning";
import {
  buildReport,
  objectResults,
  sameResults,
  type ObjectResults,
  type PolicyReport,
} from "./policy-report";
import { ReportWrites, type ReportStore, type WritesStats } from "./report-writes";
import { Rereads, type Relist } from "./rereads";

export type { ReportStore } from "./report-writes";
export type { Relist } from "./rereads";

/** How an object arrived: from a (re)list of its kind, or a watch event. */
export type ObjectPhase = "LISTED" | "ADDED" | "MODIFIED";

export interface ScannerOptions {
  intervalMs: number;
  maxResults: number;
  /** How long a change waits for others before its namespace is written (default 2 s). */
  debounceMs?: number;
  /** Namespaces written at once at most (default 4). */
  concurrency?: number;
  /** Objects waiting to be judged at most (default MAX_QUEUED); one more waits for room. */
  maxQueued?: number;
  /** How objects are read again to be judged again (rejudge); without it nothing is. */
  relist?: Relist;
  log?: { warn: (o: object, m: string) => void; info: (o: object, m: string) => void };
}

export interface ScannerStats extends WritesStats {
  judged: number;
  unchanged: number;
}

/** Longest run of judging before the scan yields to the event loop. */
export const SLICE_MS = 20;
/** Longest a due write waits for the objects still being judged (or listed). */
export const JUDGING_WAIT_MS = 10_000;
/** Whole objects waiting to be judged at most, by default (~30 KB each for a large pod). */
export const MAX_QUEUED = 256;

/** What is kept of an object: its identity (the map's key), never the object. */
interface Entry {
  /** A digest of what the rules read (uid, labels, annotations, spec): equal means not judged again. */
  digest: string;
  results?: ObjectResults;
  /**
   * When the earliest change of its results that no written report shows yet was first seen
   * (epoch ms): the report lag is measured from it.
   */
  seen?: number;
  /** The count of judgings when it was last judged: a change of context after it means again. */
  judged: number;
  /** The (re)list of its kind that last listed it: the end of a re-list forgets the others. */
  listed?: number;
}

/** An object waiting to be judged: the latest version, trimmed to what the rules read. */
interface Waiting {
  namespace: string;
  key: string;
  obj: KubeObject;
  digest: string;
  /** When the change was first seen (epoch ms), kept when a newer version replaces it. */
  since: number;
  /** Read again to judge again: judged only while it is still the version judged. */
  relisted?: boolean;
  /** Judged even if unchanged (what it is judged with changed). */
  force?: boolean;
  listed?: number;
}

/** What is judged of an object: its status only says whether a pod still runs. */
function kept(obj: KubeObject): KubeObject {
  const { status, ...rest } = obj as KubeObject & { status?: unknown };
  const meta = { ...(obj.metadata ?? {}) };
  delete (meta as Record<string, unknown>).managedFields;
  // A pod's phase says whether it still runs; nothing else of its status is read.
  const phase = (status as { phase?: string } | undefined)?.phase;
  return { ...rest, metadata: meta, ...(phase ? { status: { phase } } : {}) };
}

// A digest, not the text: 10,000 pods' JSON would be ~30 MB of strings kept for one comparison.
const digestOf = (obj: KubeObject) =>
  createHash("sha1")
    // The uid too: a StatefulSet's pod created again under its name is another object to report.
    .update(
      JSON.stringify([
        obj.metadata?.uid,
        obj.metadata?.labels,
        obj.metadata?.annotations,
        obj.spec,
      ]),
    )
    .digest("base64");

const unrefSleep = (ms: number) => new Promise<void>(resolve => setTimeout(resolve, ms).unref?.());

/** A kind as the scan names it (the prefix of its objects' keys): "Pod.", "Job.batch". */
export const scanKindOf = (apiVersion: string, kind: string) => `${kind}.${groupOf(apiVersion)}`;

// The API group too: a Volcano Job and a batch Job of one name are two objects.
const keyOf = (obj: KubeObject) =>
  `${scanKindOf(String(obj.apiVersion ?? ""), String(obj.kind))}/${obj.metadata?.name ?? ""}`;

export class ReportScanner {
  readonly stats: ScannerStats = {
    judged: 0,
    unchanged: 0,
    writes: 0,
    unchangedReports: 0,
    removals: 0,
    failures: 0,
  };
  /** namespace → object key → its digest, results and lag (what is kept of it). */
  private readonly objects = new Map<string, Map<string, Entry>>();
  /** What waits to be judged, one item per object ("namespace\0key"), at most maxQueued. */
  private readonly toJudge = new Map<string, Waiting>();
  /** Offers waiting for room in toJudge, first come first served. */
  private readonly roomWaiters: (() => void)[] = [];
  private judging?: Promise<void>;
  /** Judgings started so far: an entry judged at or before a change of context is judged again. */
  private judgings = 0;
  /** Kinds ("Pod.") whose (re)list is under way → its number (entries listed by it carry it). */
  private readonly listing = new Map<string, number>();
  private lists = 0;
  private readonly interner = new ResultInterner();
  private readonly writes: ReportWrites;
  private readonly rereads: Rereads;

  constructor(
    private readonly deps: () => EngineDeps,
    store: ReportStore,
    private readonly options: ScannerOptions,
  ) {
    this.writes = new ReportWrites(store, options, this.stats, {
      reportOf: namespace => this.reportOf(namespace),
      takeSeen: namespace => this.takeSeen(namespace),
      putBackSeen: (namespace, shown) => this.putBackSeen(namespace, shown),
      settled: () => this.settled(),
      removed: namespace => {
        if (!this.objects.get(namespace)?.size) this.objects.delete(namespace);
      },
    });
    this.rereads = new Rereads(
      {
        judgings: () => this.judgings,
        staleNamespaces: (wanted, cause) => this.staleNamespaces(wanted, cause),
        holds: namespace =>
          namespace === undefined ? this.objects.size > 0 : this.objects.has(namespace),
        offerAgain: (obj, cause, since) => this.offerAgain(obj, cause, since),
        judging: () => this.judging,
      },
      options,
    );
    observeWatcherQueue(() => this.toJudge.size);
  }

  /** Whether the scan reports on this object at all: running Pods and the workloads people write. */
  private reportable(obj: KubeObject): boolean {
    if (!obj?.metadata?.namespace) return false;
    if (isPod(obj)) {
      const phase = (obj.status as { phase?: string } | undefined)?.phase;
      return phase !== "Succeeded" && phase !== "Failed";
    }
    // A Deployment's ReplicaSet, a CronJob's Job: their owner is reported, with their template.
    // One whose controller is of a kind not judged (or a made-up one) is reported itself.
    const kinds = kindsInForce(this.deps().settings.workloads);
    return isWorkload(obj, kinds) && !madeByController(obj, kinds);
  }

  /**
   * A Pod or workload was added or changed. Resolves once it (and whatever waited before it) is
   * judged; its report is written later (see the header).
   */
  observe(received: KubeObject): Promise<void> {
    return this.offer(received).then(() => this.judging);
  }

  /**
   * A Pod or workload from a watch or a list ("LISTED": the (re)list of its kind under way has it).
   * Resolves once it waits to be judged (or was dropped, unchanged): while the queue is full it
   * waits for room, and so does the list that awaits it. Nothing of it is kept after judging.
   */
  async offer(received: KubeObject, phase?: ObjectPhase): Promise<void> {
    if (!this.reportable(received)) return this.forget(received);
    const namespace = received.metadata!.namespace!;
    const key = keyOf(received);
    const id = `${namespace}\0${key}`;
    const listed =
      phase === "LISTED"
        ? this.listing.get(scanKindOf(String(received.apiVersion ?? ""), String(received.kind)))
        : undefined;
    const digest = digestOf(received);
    const since = Date.now();
    for (;;) {
      const held = this.objects.get(namespace)?.get(key);
      if (listed !== undefined && held) held.listed = listed;
      const waiting = this.toJudge.get(id);
      if (waiting) {
        // The latest version replaces the one waiting; its change was first seen then.
        waiting.obj = kept(received);
        waiting.digest = digest;
        waiting.relisted = false;
        if (listed !== undefined) waiting.listed = listed;
        return;
      }
      if (held?.digest === digest) {
        this.stats.unchanged++;
        return;
      }
      if (this.toJudge.size < this.maxQueued()) {
        const obj = kept(received);
        this.toJudge.set(id, {
          namespace,
          key,
          obj,
          digest,
          since,
          listed: listed ?? held?.listed,
        });
        void this.startJudging();
        return;
      }
      await this.room();
    }
  }

  /** A version read again (rejudge): judged again if it is what was judged before `cause`. */
  private async offerAgain(obj: KubeObject, cause: number, since: number): Promise<void> {
    if (!this.reportable(obj)) return; // its watch brings the change (a finished pod) to forget it
    const namespace = obj.metadata!.namespace!;
    const key = keyOf(obj);
    const id = `${namespace}\0${key}`;
    let digest: string | undefined;
    for (;;) {
      const held = this.objects.get(namespace)?.get(key);
      // Not judged yet (its list brings it), or judged since the cause: nothing to judge again.
      if (!held || held.judged > cause) return;
      // Another version than the one judged: older (the watch went on) or newer (the watch
      // brings it): either way not this one.
      digest ??= digestOf(obj);
      if (held.digest !== digest) return;
      const waiting = this.toJudge.get(id);
      if (waiting) {
        waiting.force = true;
        return;
      }
      if (this.toJudge.size < this.maxQueued()) {
        this.toJudge.set(id, {
          namespace,
          key,
          obj: kept(obj),
          digest,
          since,
          relisted: true,
          force: true,
          listed: held.listed,
        });
        void this.startJudging();
        return;
      }
      await this.room();
    }
  }

  private maxQueued(): number {
    return Math.max(1, this.options.maxQueued ?? MAX_QUEUED);
  }

  private room(): Promise<void> {
    return new Promise<void>(resolve => this.roomWaiters.push(resolve));
  }

  /** One item left the queue: the longest waiting offer may take its place. */
  private freed(): void {
    this.roomWaiters.shift()?.();
  }

  /** A waiting version, judged: kept as its digest and results. */
  private async take(w: Waiting): Promise<void> {
    let inNs = this.objects.get(w.namespace);
    const before = inNs?.get(w.key);
    // Read again, but no longer the version judged (or gone): not judged from this read.
    if (w.relisted && before?.digest !== w.digest) return;
    if (before && before.digest === w.digest) {
      if (w.listed !== undefined) before.listed = w.listed;
      if (!w.force) {
        this.stats.unchanged++;
        return;
      }
      return this.judge(w.namespace, w.key, before, w.obj, w.since);
    }
    if (!inNs) this.objects.set(w.namespace, (inNs = new Map()));
    const entry: Entry = {
      digest: w.digest,
      results: before?.results,
      seen: before?.seen,
      judged: 0,
      listed: w.listed ?? before?.listed,
    };
    inNs.set(w.key, entry);
    await this.judge(w.namespace, w.key, entry, w.obj, w.since);
  }

  /** A Pod or workload went (or no longer runs). */
  forget(obj: KubeObject): void {
    const namespace = obj?.metadata?.namespace ?? "";
    const key = keyOf(obj);
    if (this.toJudge.delete(`${namespace}\0${key}`)) this.freed();
    if (this.objects.get(namespace)?.delete(key)) this.writes.schedule(namespace);
  }

  /** A (re)list of a kind ("Pod.", see scanKindOf) begins: what it lists is marked. */
  listStarted(kind: string): void {
    this.listing.set(kind, ++this.lists);
  }

  /**
   * The (re)list of a kind completed: its objects held (or waiting) that it did not list are gone
   * (deleted while the watch was away).
   */
  listEnded(kind: string): void {
    const list = this.listing.get(kind);
    if (list === undefined) return;
    this.listing.delete(kind);
    const prefix = `${kind}/`;
    for (const [id, w] of this.toJudge)
      if (w.key.startsWith(prefix) && w.listed !== list) {
        this.toJudge.delete(id);
        this.freed();
      }
    for (const [namespace, inNs] of this.objects) {
      let gone = false;
      for (const [key, entry] of inNs)
        if (key.startsWith(prefix) && entry.listed !== list) gone = inNs.delete(key) || gone;
      if (gone) this.writes.schedule(namespace);
    }
  }

  /**
   * Judges again every object of these namespaces (all: undefined) judged so far, read again
   * through `relist`, even if unchanged; `since`: when the cause was seen. Resolves once judged.
   */
  rejudge(namespaces?: Iterable<string>, since = Date.now()): Promise<void> {
    return this.rereads.rejudge(namespaces, since);
  }

  /**
   * What the objects are judged with changed (a namespace's labels, an Exemption, a cache that just
   * synced): judge them again shortly, once for a burst of such changes.
   */
  rejudgeSoon(namespace?: string): void {
    this.rereads.rejudgeSoon(namespace);
  }

  /** Of `wanted` (all: undefined), the namespaces with an object judged at or before `cause`. */
  private staleNamespaces(wanted: Set<string> | undefined, cause: number): string[] {
    const stale: string[] = [];
    for (const [namespace, inNs] of this.objects) {
      if (wanted && !wanted.has(namespace)) continue;
      for (const entry of inNs.values())
        if (entry.judged <= cause) {
          stale.push(namespace);
          break;
        }
    }
    return stale;
  }

  private startJudging(): Promise<void> {
    if (!this.judging && this.toJudge.size) this.judging = this.judgeWaiting();
    return this.judging ?? Promise.resolve();
  }

  private async judgeWaiting(): Promise<void> {
    try {
      let sliceStart = performance.now();
      while (this.toJudge.size) {
        const [id, waiting] = this.toJudge.entries().next().value!;
        this.toJudge.delete(id);
        this.freed();
        try {
          await this.take(waiting);
        } catch (e) {
          this.options.log?.warn(
            {
              namespace: waiting.namespace,
              object: waiting.key,
              error: e instanceof Error ? e.message : String(e),
            },
            "could not judge an object for its namespace's PolicyReport",
          );
        }
        if (performance.now() - sliceStart > SLICE_MS) {
          await new Promise(resolve => setImmediate(resolve));
          sliceStart = performance.now();
        }
      }
    } finally {
      // Cleared as the loop ends, in the same turn: an object offered now starts a new run.
      this.judging = undefined;
    }
  }

  private async judge(
    namespace: string,
    key: string,
    entry: Entry,
    obj: KubeObject,
    since: number,
  ): Promise<void> {
    // Replaced or forgotten while it waited: the newer version is judged instead (or none).
    if (this.objects.get(namespace)?.get(key) !== entry) return;
    const deps = this.deps();
    this.stats.judged++;
    entry.judged = ++this.judgings;
    recordJudged(obj.kind);
    let results: ObjectResults | undefined;
    if (!isIgnoredNamespace(namespace, deps.settings)) {
      const request = { object: obj, operation: "CREATE" as const, dryRun: true, scan: true };
      const found = await answer(request, deps, deps.policies);
      if (found.handled) results = this.interner.compact(objectResults(obj, namespace, found));
    }
    const changed = results ? !sameResults(entry.results, results) : !!entry.results;
    entry.results = results;
    if (changed) {
      entry.seen ??= since;
      this.writes.schedule(namespace);
    }
  }

  /** The report a namespace has now (undefined: nothing to report). */
  reportOf(namespace: string, seconds = Math.floor(Date.now() / 1000)): PolicyReport | undefined {
    const results = [...(this.objects.get(namespace)?.values() ?? [])].flatMap(e =>
      e.results ? [e.results] : [],
    );
    if (!results.length) return undefined;
    return buildReport(namespace, results, this.options.maxResults, seconds);
  }

  /** The changes of a namespace's objects the report about to be written shows: taken off them. */
  private takeSeen(namespace: string): [string, number][] {
    const shown: [string, number][] = [];
    for (const [key, entry] of this.objects.get(namespace) ?? [])
      if (entry.seen !== undefined) {
        shown.push([key, entry.seen]);
        entry.seen = undefined;
      }
    return shown;
  }

  /** A failed write's changes wait for the next one (their first sighting kept). */
  private putBackSeen(namespace: string, shown: [string, number][]): void {
    for (const [key, seen] of shown) {
      const entry = this.objects.get(namespace)?.get(key);
      if (entry) entry.seen = Math.min(entry.seen ?? seen, seen);
    }
  }

  private busy(): boolean {
    return !!this.judging || this.listing.size > 0 || !!this.rereads.running();
  }

  /** Resolves once nothing is judged, listed or read again, or after JUDGING_WAIT_MS. */
  private async settled(): Promise<void> {
    if (!this.busy()) return;
    let late = false;
    const limit = unrefSleep(JUDGING_WAIT_MS).then(() => (late = true));
    // Between two pages of a list nothing may be judging: looked at again shortly.
    while (this.busy() && !late) await Promise.race([this.judging ?? unrefSleep(50), limit]);
  }

  /**
   * Resolves once nothing waits to be judged or read again and no write is queued or running; a
   * write waiting for its interval does not count (tests and the benchmark use flushPending).
   */
  async idle(): Promise<void> {
    for (;;) {
      const rereading = this.rereads.running();
      if (this.judging) await this.judging;
      else if (rereading) await rereading;
      else if (this.writes.busy()) await this.writes.drained();
      else return;
    }
  }

  /** Writes every namespace waiting for its timer now (tests and the benchmark). */
  flushPending(): void {
    this.writes.flushPending();
  }

  /** How many objects are judged, across namespaces. */
  size(): number {
    let n = 0;
    for (const inNs of this.objects.values()) n += inNs.size;
    return n;
  }
}
