// Judging again what the objects are judged with changed (a namespace's labels, an Exemption, a
// cache that just synced): the scan keeps no object, so it reads them again (its relist), one
// re-read at a time, a burst of changes joined into one. Why: docs/adr/0012-list-and-watch-holding-no-objects.md
import type { KubeObject } from "../objects/pod";

/** Judging again more namespaces than this reads every namespace once instead of each in turn. */
export const RELIST_NAMESPACES = 16;
/** A re-read that failed is tried again after this long. */
export const RELIST_RETRY_MS = 30_000;

/**
 * Reads the watched objects again, those of one namespace (every namespace: undefined), each handed
 * to onObject and awaited (pages, not the cluster at once). The watcher lists every watched kind.
 */
export type Relist = (
  namespace: string | undefined,
  onObject: (obj: KubeObject) => Promise<void>,
) => Promise<void>;

/** What a re-read needs of the scan (scanner.ts). */
export interface RereadScan {
  /** Judgings started so far: what was judged at or before the count a change saw is stale. */
  judgings(): number;
  /** Of `wanted` (all: undefined), the namespaces holding an object judged at or before `cause`. */
  staleNamespaces(wanted: Set<string> | undefined, cause: number): string[];
  /** Whether anything of the namespace (any namespace: undefined) was judged. */
  holds(namespace?: string): boolean;
  /** A version read again: judged again if it is what was judged before `cause`. */
  offerAgain(obj: KubeObject, cause: number, since: number): Promise<void>;
  /** The judging under way, if any: a re-read resolves once it ends. */
  judging(): Promise<void> | undefined;
}

export interface RereadOptions {
  relist?: Relist;
  debounceMs?: number;
  log?: { warn: (o: object, m: string) => void };
}

/** A re-read to come: the namespaces (all: undefined), judged before `cause`, seen at `since`. */
interface WaitingReread {
  wanted?: Set<string>;
  cause: number;
  since: number;
  done: Promise<void>;
}

export class Rereads {
  /** Judging again (re-reading objects): one at a time, in order. */
  private rejudging?: Promise<void>;
  /** The re-read not started yet (another runs): later rejudge() calls join it. */
  private rejudgeWaiting?: WaitingReread;
  private rejudgeTimer?: ReturnType<typeof setTimeout>;
  private rejudgeAll = false;
  private readonly rejudgeNamespaces = new Set<string>();

  constructor(
    private readonly scan: RereadScan,
    private readonly options: RereadOptions,
  ) {}

  /** The re-read under way (or waiting), if any. */
  running(): Promise<void> | undefined {
    return this.rejudging;
  }

  /**
   * Judges again every object of these namespaces (all: undefined) judged so far, read again
   * through `relist`, even if unchanged; `since`: when the cause was seen. Resolves once judged.
   */
  rejudge(namespaces?: Iterable<string>, since = Date.now()): Promise<void> {
    const cause = this.scan.judgings();
    // One re-read runs at a time, and at most one more waits: a change while it waits joins it
    // (its namespaces, its later cause, its earlier time), so a burst of namespace or Exemption
    // changes during a long re-read costs one more re-read, not one each.
    const waiting = this.rejudgeWaiting;
    if (waiting) {
      if (namespaces === undefined) waiting.wanted = undefined;
      else if (waiting.wanted) for (const ns of namespaces) waiting.wanted.add(ns);
      waiting.cause = cause;
      waiting.since = Math.min(waiting.since, since);
      return waiting.done.then(() => this.scan.judging());
    }
    const next: WaitingReread = {
      wanted: namespaces === undefined ? undefined : new Set(namespaces),
      cause,
      since,
      done: Promise.resolve(),
    };
    this.rejudgeWaiting = next;
    const run = () => {
      if (this.rejudgeWaiting === next) this.rejudgeWaiting = undefined;
      return this.readAgain(next.wanted, next.cause, next.since);
    };
    const done = (this.rejudging ?? Promise.resolve()).then(run);
    next.done = done;
    const mine = (this.rejudging = done.finally(() => {
      if (this.rejudging === mine) this.rejudging = undefined;
    }));
    return mine.then(() => this.scan.judging());
  }

  private async readAgain(
    wanted: Set<string> | undefined,
    cause: number,
    since: number,
  ): Promise<void> {
    const relist = this.options.relist;
    if (!relist) return;
    // The namespaces with an object judged before the cause: the others have nothing to redo.
    const stale = this.scan.staleNamespaces(wanted, cause);
    if (!stale.length) return;
    // Many namespaces: every object read once (what is not stale is skipped as it comes).
    const scopes: (string | undefined)[] = stale.length > RELIST_NAMESPACES ? [undefined] : stale;
    for (const namespace of scopes)
      try {
        await relist(namespace, obj =>
          !wanted || wanted.has(obj.metadata?.namespace ?? "")
            ? this.scan.offerAgain(obj, cause, since)
            : Promise.resolve(),
        );
      } catch (e) {
        this.options.log?.warn(
          { namespace: namespace ?? "(all)", error: e instanceof Error ? e.message : String(e) },
          "could not read the objects again to judge them again; retrying later",
        );
        const retry = setTimeout(() => this.rejudgeSoon(namespace), RELIST_RETRY_MS);
        retry.unref?.();
      }
  }

  /**
   * What the objects are judged with changed (a namespace's labels, an Exemption, a cache that just
   * synced): judge them again shortly, once for a burst of such changes.
   */
  rejudgeSoon(namespace?: string): void {
    // Nothing judged (yet: a cache's first list, the Exemptions as they are listed, at a start)
    // is nothing to judge again.
    if (namespace === undefined && this.scan.holds()) this.rejudgeAll = true;
    else if (namespace !== undefined && this.scan.holds(namespace))
      this.rejudgeNamespaces.add(namespace);
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
}
