// A cache of one kind of object, kept up to date by a watch in the admission process itself
// (list-watch.ts: a paged list, then a watch from its resourceVersion; reconnects on errors, lists
// again on 410 Gone). Each object is reduced by `keep` as it arrives: the cache holds what its
// readers read, never the list or the whole object. Before the first list completes it has no data
// (`synced` false): readers treat that as "not checked", never as "none exist".
//
// Events to listeners are those kubernetes-fluent-client's Watcher gave: a listed object is
// "ADDED" when new to the cache, "MODIFIED" when held with another resourceVersion (unchanged:
// no event), and what a (re)list no longer shows is "DELETED" once that list completed.
import type { GenericClass, KubernetesObject } from "kubernetes-fluent-client";
import type { Filters } from "kubernetes-fluent-client/dist/fluent/shared-types.js";
import { isDeepStrictEqual } from "node:util";
import { describeError } from "./api-calls";
import { ListWatch, type ListWatchOptions, type ListWatchPhase } from "./list-watch";
import { observeCache } from "../metrics";

export type Logger = {
  info: (o: object, m: string) => void;
  warn: (o: object, m: string) => void;
};

/** Equal as kept, but for metadata.resourceVersion. */
function sameApartFromVersion(a: KubernetesObject, b: KubernetesObject): boolean {
  const version = (o: KubernetesObject) => ({
    ...o,
    metadata: { ...o.metadata, resourceVersion: undefined },
  });
  return isDeepStrictEqual(version(a), version(b));
}

/** Objects of one kind kept up to date by a watch; keyed "namespace/name". */
export class WatchedStore<T extends KubernetesObject> {
  readonly items = new Map<string, T>();
  /** true once the first list has completed. */
  synced = false;
  /** Last error of the watch, cleared by the next successful list. */
  lastError?: string;
  /** When the last complete list ended (epoch ms); undefined before the first. */
  lastSyncMs?: number;
  /** stop() was called: the items are no longer kept up to date. */
  stopped = false;
  /** Called after each event is applied (e.g. to act when a namespace appears). */
  readonly listeners: ((obj: T, phase: string) => void)[] = [];
  /** Called after each complete list (the first makes the store synced). */
  readonly listListeners: (() => void)[] = [];

  constructor(
    private readonly model: GenericClass,
    private readonly what: string,
    private readonly log?: Logger,
    /** What is kept of each object (default: all of it): caches of many objects keep what rules read. */
    private readonly keep: (obj: T) => T = obj => obj,
    /** A custom kind (kindOverride) or one namespace only. */
    private readonly filters?: Filters,
    /** Page size, watch timeout, retry delays (tests make them small). */
    private readonly listWatchOptions: Omit<ListWatchOptions, "filters"> = {},
  ) {}

  private listWatch?: ListWatch<T>;
  /** Keys listed since the (re)list in progress began; undefined between lists. */
  private listed?: Set<string>;

  static key(obj: { metadata?: { namespace?: string; name?: string } }): string {
    return `${obj.metadata?.namespace ?? ""}/${obj.metadata?.name ?? ""}`;
  }

  // Read on every admission request, so kept ready-made: the items per namespace, and all items as
  // one array (rebuilt lazily after a change). A request never scans or copies the whole cache.
  private readonly byNamespace = new Map<string, Map<string, T>>();
  private everything?: T[];

  /** Applies one watch event; public so tests can feed the store directly. */
  apply(received: T, phase: string): void {
    const obj = this.keep(received);
    const key = WatchedStore.key(obj);
    const ns = obj.metadata?.namespace ?? "";
    const previous = this.items.get(key);
    // What the cache keeps did not change (a node's heartbeat, a pod's status: the projection drops
    // them): the new resourceVersion is noted in place, and readers' arrays and listeners are left
    // alone. At 15,000 nodes heartbeats would otherwise rebuild the node list many times a second.
    if (phase === "MODIFIED" && previous?.metadata && sameApartFromVersion(previous, obj)) {
      previous.metadata.resourceVersion = obj.metadata?.resourceVersion;
      return;
    }
    if (previous && (previous.metadata?.namespace ?? "") !== ns)
      this.byNamespace.get(previous.metadata?.namespace ?? "")?.delete(key);
    if (phase === "DELETED") {
      this.items.delete(key);
      this.byNamespace.get(ns)?.delete(key);
    } else {
      this.items.set(key, obj);
      let inNs = this.byNamespace.get(ns);
      if (!inNs) this.byNamespace.set(ns, (inNs = new Map()));
      inNs.set(key, obj);
    }
    this.everything = undefined;
    for (const listener of this.listeners) listener(obj, phase);
  }

  /** Every item; the same array until the next change (callers must not modify it). */
  all(): T[] {
    return (this.everything ??= [...this.items.values()]);
  }

  /** Lists, then watches until stop(); resolves once the first list completed (or on stop). */
  async start(): Promise<void> {
    this.listWatch ??= new ListWatch<T>(
      this.model,
      {
        onListStart: () => void (this.listed = new Set()),
        onObject: (obj, phase) => this.receive(obj, phase),
        onListEnd: () => this.listEnded(),
        onError: err => {
          this.lastError = describeError(err);
          this.log?.warn({ what: this.what, error: this.lastError }, "cluster cache: watch error");
        },
      },
      { ...this.listWatchOptions, filters: this.filters },
    );
    await this.listWatch.start();
  }

  /** Ends the watch (tests, shutdown): the items stay as they are, no longer kept up to date. */
  stop(): void {
    this.stopped = true;
    this.listWatch?.stop();
  }

  /** A listed object is an ADDED (new) or a MODIFIED (changed) event, as the Watcher gave them. */
  private receive(obj: T, phase: ListWatchPhase): void {
    if (phase !== "LISTED") return this.apply(obj, phase);
    const key = WatchedStore.key(obj);
    this.listed?.add(key);
    const held = this.items.get(key);
    if (!held) return this.apply(obj, "ADDED");
    const rv = obj.metadata?.resourceVersion;
    if (rv !== undefined && held.metadata?.resourceVersion === rv) return; // unchanged: no event
    this.apply(obj, "MODIFIED");
  }

  /** A (re)list completed: what it did not show is gone; the store is synced. */
  private listEnded(): void {
    const listed = this.listed ?? new Set<string>();
    this.listed = undefined;
    for (const [key, held] of [...this.items]) if (!listed.has(key)) this.apply(held, "DELETED");
    this.synced = true;
    this.lastSyncMs = Date.now();
    this.lastError = undefined;
    for (const listener of this.listListeners) listener();
  }

  /**
   * Its state on /metrics as `cache` (admission_guard_cache_synced and _cache_age_seconds): synced
   * once a list completed and while its watch runs (0 from a failed list or watch until it lists or
   * watches again), aged from its last complete list.
   */
  observe(cache: string): void {
    observeCache(cache, {
      synced: () => this.synced && !this.stopped && (this.listWatch?.synced ?? true),
      lastSyncMs: () => this.lastSyncMs,
    });
  }

  inNamespace(namespace: string): T[] {
    const inNs = this.byNamespace.get(namespace);
    return inNs ? [...inNs.values()] : [];
  }
}
