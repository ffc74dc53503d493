// The background scan behind the PolicyReports: Pepr's watcher hands it every Pod and workload as
// it appears, changes and goes (capabilities/reports); it judges each with the engine — the same
// answer() as the validating webhook, as a dry run that creates nothing — and keeps one report per
// namespace up to date.
//
// Bounded on both sides (measured in docs/bench.md, 10,000 pods):
//  - judging: objects wait in a queue (the latest version of each, once) and are judged in slices
//    of SLICE_MS, yielding between slices, so the first list of 10,000 pods never blocks the
//    watcher's health checks and watch streams for seconds; an object whose labels, annotations
//    and spec did not change (a status update, the most frequent event) is not judged again;
//  - writing: a change waits `debounceMs` for its neighbours, a namespace is written at most once
//    per interval (a change during a write waits for the next), never when its report did not
//    change, and a few namespaces at a time.
import { createHash } from "node:crypto";
import { performance } from "node:perf_hooks";
import { answer, madeByController, type EngineDeps } from "../engine";
import { isPod, isWorkload, type KubeObject } from "../pod";
import { kindsInForce } from "../workload-kinds/in-force";
import { groupOf } from "../workload-kinds/kind-spec";
import { isIgnoredNamespace } from "../settings";
import { observeWatcherQueue, recordJudged, reportLag, reportWrites } from "../metrics";
import {
  buildReport,
  objectResults,
  reportContent,
  sameResults,
  type ObjectResults,
  type PolicyReport,
} from "./policy-report";

/** Where reports go: the API server in the watcher, a list in tests and the benchmark. */
export interface ReportStore {
  /** The report stored for a namespace (its content decides whether to write), undefined if none. */
  read(namespace: string): Promise<PolicyReport | undefined>;
  write(report: PolicyReport): Promise<void>;
  remove(namespace: string): Promise<void>;
}

export interface ScannerOptions {
  intervalMs: number;
  maxResults: number;
  /** How long a change waits for others before its namespace is written (default 2 s). */
  debounceMs?: number;
  /** Namespaces written at once at most (default 4). */
  concurrency?: number;
  log?: { warn: (o: object, m: string) => void; info: (o: object, m: string) => void };
}

export interface ScannerStats {
  judged: number;
  unchanged: number;
  writes: number;
  unchangedReports: number;
  removals: number;
  failures: number;
}

/** Longest run of judging before the scan yields to the event loop. */
export const SLICE_MS = 20;
/** Longest a due write waits for the objects still being judged. */
export const JUDGING_WAIT_MS = 10_000;

interface Entry {
  obj: KubeObject;
  /** A digest of what the rules read (labels, annotations, spec): equal means not judged again. */
  digest: string;
  results?: ObjectResults;
  /**
   * When the earliest change of its results that no written report shows yet was first seen
   * (epoch ms): the report lag is measured from it.
   */
  seen?: number;
}

/** What is kept of an object: enough to judge it again (a namespace label or an Exemption changed). */
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

// A report's content is ~400 KB at maxResults: its digest is what is kept to compare.
const contentDigest = (report: PolicyReport) =>
  createHash("sha1").update(reportContent(report)).digest("base64");

const unrefSleep = (ms: number) => new Promise<void>(resolve => setTimeout(resolve, ms).unref?.());

// The API group too: a Volcano Job and a batch Job of one name are two objects.
const keyOf = (obj: KubeObject) =>
  `${obj.kind}.${groupOf(String(obj.apiVersion ?? ""))}/${obj.metadata?.name ?? ""}`;

export class ReportScanner {
  readonly stats: ScannerStats = {
    judged: 0,
    unchanged: 0,
    writes: 0,
    unchangedReports: 0,
    removals: 0,
    failures: 0,
  };
  /** namespace → object key → the object as kept, its digest and its results. */
  private readonly objects = new Map<string, Map<string, Entry>>();
  /**
   * What waits to be judged, one item per object ("namespace\0key"): a version received from the
   * watch (the latest replaces the one before), or a kept entry to judge again; `since` is when
   * the change was first seen (epoch ms), kept when a newer version replaces a waiting one.
   */
  private readonly toJudge = new Map<
    string,
    { namespace: string; received?: KubeObject; entry?: Entry; since: number }
  >();
  private judging?: Promise<void>;

  /** namespace → a digest of the content last written (or read), "" when it has no report. */
  private readonly written = new Map<string, string>();
  private readonly lastWrite = new Map<string, number>();
  /** Namespaces with a change no started write includes yet. */
  private readonly dirty = new Set<string>();
  private readonly timers = new Map<string, ReturnType<typeof setTimeout>>();
  private readonly queue = new Set<string>();
  private readonly flushing = new Set<string>();
  private idleWaiters: (() => void)[] = [];

  constructor(
    private readonly deps: () => EngineDeps,
    private readonly store: ReportStore,
    private readonly options: ScannerOptions,
  ) {
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
    if (!this.reportable(received)) {
      this.forget(received);
      return Promise.resolve();
    }
    // Nothing else here: Pepr hands over a whole list at once, in one synchronous loop.
    const namespace = received.metadata!.namespace!;
    const id = `${namespace}\0${keyOf(received)}`;
    const since = this.toJudge.get(id)?.since ?? Date.now();
    this.toJudge.set(id, { namespace, received, since });
    return this.startJudging();
  }

  /** A received version: kept, and judged unless what the rules read is unchanged. */
  private async receive(namespace: string, received: KubeObject, since: number): Promise<void> {
    const obj = kept(received);
    const digest = digestOf(obj);
    let inNs = this.objects.get(namespace);
    if (!inNs) this.objects.set(namespace, (inNs = new Map()));
    const key = keyOf(obj);
    const before = inNs.get(key);
    if (before && before.digest === digest) {
      before.obj = obj;
      this.stats.unchanged++;
      return;
    }
    const entry: Entry = { obj, digest, results: before?.results, seen: before?.seen };
    inNs.set(key, entry);
    await this.judge(namespace, entry, since);
  }

  /** A Pod or workload went (or no longer runs). */
  forget(obj: KubeObject): void {
    const namespace = obj?.metadata?.namespace ?? "";
    const key = keyOf(obj);
    this.toJudge.delete(`${namespace}\0${key}`);
    if (this.objects.get(namespace)?.delete(key)) this.schedule(namespace);
  }

  /** Judges every object of these namespaces (all: undefined) again; `since`: when the cause was seen. */
  rejudge(namespaces?: Iterable<string>, since = Date.now()): Promise<void> {
    for (const namespace of namespaces ?? [...this.objects.keys()])
      for (const [key, entry] of this.objects.get(namespace) ?? []) {
        const id = `${namespace}\0${key}`;
        const waiting = this.toJudge.get(id);
        // A newer version waiting is judged anyway.
        if (!waiting?.received)
          this.toJudge.set(id, { namespace, entry, since: waiting?.since ?? since });
      }
    return this.startJudging();
  }

  private rejudgeTimer?: ReturnType<typeof setTimeout>;
  private rejudgeAll = false;
  private readonly rejudgeNamespaces = new Set<string>();

  /**
   * What the objects are judged with changed (a namespace's labels, an Exemption, a cache that just
   * synced): judge them again shortly, once for a burst of such changes.
   */
  rejudgeSoon(namespace?: string): void {
    if (namespace === undefined) this.rejudgeAll = true;
    else if (this.objects.has(namespace)) this.rejudgeNamespaces.add(namespace);
    else return;
    if (this.rejudgeTimer) return;
    // The first change of a burst is when its objects' change was seen.
    const since = Date.now();
    this.rejudgeTimer = setTimeout(() => {
      this.rejudgeTimer = undefined;
      const some = [...this.rejudgeNamespaces];
      const all = this.rejudgeAll;
      this.rejudgeAll = false;
      this.rejudgeNamespaces.clear();
      void this.rejudge(all ? undefined : some, since);
    }, this.options.debounceMs ?? 2000);
    this.rejudgeTimer.unref?.();
  }

  private startJudging(): Promise<void> {
    this.judging ??= this.judgeWaiting().finally(() => (this.judging = undefined));
    return this.judging;
  }

  private async judgeWaiting(): Promise<void> {
    let sliceStart = performance.now();
    while (this.toJudge.size) {
      const [id, { namespace, received, entry, since }] = this.toJudge.entries().next().value!;
      this.toJudge.delete(id);
      try {
        if (received) await this.receive(namespace, received, since);
        else if (entry) await this.judge(namespace, entry, since);
      } catch (e) {
        this.options.log?.warn(
          {
            namespace,
            object: id.split("\0")[1],
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
  }

  private async judge(namespace: string, entry: Entry, since: number): Promise<void> {
    // Replaced or forgotten while it waited: the newer version is judged instead (or none).
    if (this.objects.get(namespace)?.get(keyOf(entry.obj)) !== entry) return;
    const deps = this.deps();
    this.stats.judged++;
    recordJudged(entry.obj.kind);
    let results: ObjectResults | undefined;
    if (!isIgnoredNamespace(namespace, deps.settings)) {
      const request = { object: entry.obj, operation: "CREATE" as const, dryRun: true, scan: true };
      const found = await answer(request, deps, deps.policies);
      if (found.handled) results = objectResults(entry.obj, namespace, found);
    }
    const changed = results ? !sameResults(entry.results, results) : !!entry.results;
    entry.results = results;
    if (changed) {
      entry.seen ??= since;
      this.schedule(namespace);
    }
  }

  /** A namespace's report must be written: after the debounce, and the interval since its last write. */
  private schedule(namespace: string): void {
    this.dirty.add(namespace);
    // A write waiting or running already: it reads the latest state, or (running) re-schedules.
    if (this.timers.has(namespace) || this.queue.has(namespace) || this.flushing.has(namespace))
      return;
    const since = Date.now() - (this.lastWrite.get(namespace) ?? -Infinity);
    const delay = Math.max(this.options.debounceMs ?? 2000, this.options.intervalMs - since);
    const timer = setTimeout(() => {
      this.timers.delete(namespace);
      this.enqueue(namespace);
    }, delay);
    timer.unref?.();
    this.timers.set(namespace, timer);
  }

  private enqueue(namespace: string): void {
    this.queue.add(namespace);
    this.drain();
  }

  private drain(): void {
    while (this.flushing.size < (this.options.concurrency ?? 4) && this.queue.size) {
      const namespace: string = this.queue.values().next().value!;
      this.queue.delete(namespace);
      void this.flush(namespace).finally(() => {
        this.drain();
        if (!this.flushing.size && !this.queue.size)
          for (const done of this.idleWaiters.splice(0)) done();
      });
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

  /**
   * Writes a namespace's report if it changed, or removes it when there is nothing to report. On
   * /metrics each write or removal is a report write (ok, or error when the flush failed), and each
   * change it shows a report lag.
   */
  private async flush(namespace: string): Promise<void> {
    this.flushing.add(namespace);
    let shown: [string, number][] = [];
    try {
      // Objects still waiting to be judged (the first list of a large cluster): the report waits
      // for them, within bounds, instead of being written half done and again an interval later.
      if (this.judging) await Promise.race([this.judging, unrefSleep(JUDGING_WAIT_MS)]);
      this.dirty.delete(namespace);
      this.lastWrite.set(namespace, Date.now());
      if (!this.written.has(namespace)) {
        const stored = await this.store.read(namespace);
        this.written.set(namespace, stored ? contentDigest(stored) : "");
      }
      const report = this.reportOf(namespace);
      // Taken with the report built (a change judged during the write waits for the next one).
      shown = this.takeSeen(namespace);
      const content = report ? contentDigest(report) : "";
      if (content === this.written.get(namespace)) {
        this.stats.unchangedReports++;
        return;
      }
      if (report) {
        await this.store.write(report);
        this.stats.writes++;
      } else {
        await this.store.remove(namespace);
        this.stats.removals++;
        if (!this.objects.get(namespace)?.size) this.objects.delete(namespace);
      }
      this.written.set(namespace, content);
      reportWrites.inc({ outcome: "ok" });
      const now = Date.now();
      for (const [, seen] of shown) reportLag.observe(Math.max(0, now - seen) / 1000);
    } catch (e) {
      this.stats.failures++;
      reportWrites.inc({ outcome: "error" });
      // The changes it would have shown wait for the next write (their first sighting kept).
      for (const [key, seen] of shown) {
        const entry = this.objects.get(namespace)?.get(key);
        if (entry) entry.seen = Math.min(entry.seen ?? seen, seen);
      }
      // Forget what is stored: the next try reads it again, after the interval.
      this.written.delete(namespace);
      this.dirty.add(namespace);
      this.options.log?.warn(
        { namespace, error: e instanceof Error ? e.message : String(e) },
        "could not write the namespace's PolicyReport; retrying after the interval",
      );
    } finally {
      this.flushing.delete(namespace);
      // Changed while it was written (or the write failed): once more, after the interval.
      if (this.dirty.has(namespace)) this.schedule(namespace);
    }
  }

  /**
   * Resolves once nothing waits to be judged and no write is queued or running; a write waiting
   * for its interval does not count (tests and the benchmark use flushPending for those).
   */
  async idle(): Promise<void> {
    for (;;) {
      if (this.judging) await this.judging;
      else if (this.flushing.size || this.queue.size)
        await new Promise<void>(done => this.idleWaiters.push(done));
      else return;
    }
  }

  /** Writes every namespace waiting for its timer now (tests and the benchmark). */
  flushPending(): void {
    for (const [namespace, timer] of this.timers) {
      clearTimeout(timer);
      this.timers.delete(namespace);
      this.enqueue(namespace);
    }
  }

  /** How many objects are judged, across namespaces. */
  size(): number {
    let n = 0;
    for (const inNs of this.objects.values()) n += inNs.size;
    return n;
  }
}
