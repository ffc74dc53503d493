// The scan's writes: one PolicyReport per namespace, after a debounce and at most once an interval,
// a few namespaces at a time, never an unchanged one (compared by digest, the stored one read once).
import { createHash } from "node:crypto";
import { reportLag, reportWrites } from "../metrics";
import { reportContent, type PolicyReport } from "./policy-report";

/** Where reports go: the API server in the watcher, a list in tests and the benchmark. */
export interface ReportStore {
  /** The report stored for a namespace (its content decides whether to write), undefined if none. */
  read(namespace: string): Promise<PolicyReport | undefined>;
  write(report: PolicyReport): Promise<void>;
  remove(namespace: string): Promise<void>;
}

/** What the writes read from the scan (scanner.ts): the report, and the changes it shows. */
export interface WritesSource {
  /** The report a namespace has now (undefined: nothing to report). */
  reportOf(namespace: string): PolicyReport | undefined;
  /** The changes (object key, first seen) the report about to be written shows: taken off them. */
  takeSeen(namespace: string): [string, number][];
  /** A failed write's changes wait for the next one, their first sighting kept. */
  putBackSeen(namespace: string, shown: [string, number][]): void;
  /** Resolves once nothing is judged or listed (within bounds): a report is written complete. */
  settled(): Promise<void>;
  /** The namespace's report was removed: nothing of it need be held. */
  removed(namespace: string): void;
}

export interface WritesOptions {
  intervalMs: number;
  debounceMs?: number;
  concurrency?: number;
  log?: { warn: (o: object, m: string) => void };
}

/** The counts the writes keep (the scan's ScannerStats). */
export interface WritesStats {
  writes: number;
  unchangedReports: number;
  removals: number;
  failures: number;
}

// A report's content is ~400 KB at maxResults: its digest is what is kept to compare.
const contentDigest = (report: PolicyReport) =>
  createHash("sha1").update(reportContent(report)).digest("base64");

export class ReportWrites {
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
    private readonly store: ReportStore,
    private readonly options: WritesOptions,
    private readonly stats: WritesStats,
    private readonly scan: WritesSource,
  ) {}

  /** A namespace's report must be written: after the debounce, and the interval since its last write. */
  schedule(namespace: string): void {
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

  /**
   * Writes a namespace's report if it changed, or removes it when there is nothing to report. On
   * /metrics each write or removal is a report write (ok, or error when the flush failed), and each
   * change it shows a report lag.
   */
  private async flush(namespace: string): Promise<void> {
    this.flushing.add(namespace);
    let shown: [string, number][] = [];
    try {
      // Objects still waiting to be judged or listed (the first list of a large cluster): the
      // report waits for them, within bounds, instead of being written half done and again an
      // interval later.
      await this.scan.settled();
      this.dirty.delete(namespace);
      this.lastWrite.set(namespace, Date.now());
      if (!this.written.has(namespace)) {
        const stored = await this.store.read(namespace);
        this.written.set(namespace, stored ? contentDigest(stored) : "");
      }
      const report = this.scan.reportOf(namespace);
      // Taken with the report built (a change judged during the write waits for the next one).
      shown = this.scan.takeSeen(namespace);
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
        this.scan.removed(namespace);
      }
      this.written.set(namespace, content);
      reportWrites.inc({ outcome: "ok" });
      const now = Date.now();
      for (const [, seen] of shown) reportLag.observe(Math.max(0, now - seen) / 1000);
    } catch (e) {
      this.stats.failures++;
      reportWrites.inc({ outcome: "error" });
      // The changes it would have shown wait for the next write (their first sighting kept).
      this.scan.putBackSeen(namespace, shown);
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

  /** Whether a write is queued or running (one waiting for its timer is not). */
  busy(): boolean {
    return this.flushing.size > 0 || this.queue.size > 0;
  }

  /** Resolves once no write is queued or running. */
  drained(): Promise<void> {
    if (!this.busy()) return Promise.resolve();
    return new Promise<void>(done => this.idleWaiters.push(done));
  }

  /** Writes every namespace waiting for its timer now (tests and the benchmark). */
  flushPending(): void {
    for (const [namespace, timer] of this.timers) {
      clearTimeout(timer);
      this.timers.delete(namespace);
      this.enqueue(namespace);
    }
  }
}
