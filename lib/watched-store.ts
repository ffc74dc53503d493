// A cache of one kind of object, kept up to date by a watch in the admission process itself
// (kubernetes-fluent-client: list, then watch; re-lists and reconnects on errors). Before the first
// list completes it has no data (`synced` false): readers treat that as "not checked", never as
// "none exist".
import { K8s, type GenericClass, type KubernetesObject } from "kubernetes-fluent-client";
import type { Filters } from "kubernetes-fluent-client/dist/fluent/shared-types.js";
import { WatchEvent } from "kubernetes-fluent-client/dist/fluent/watch.js";
import { describeError } from "./api-calls";
import { observeCache } from "./metrics";

export type Logger = {
  info: (o: object, m: string) => void;
  warn: (o: object, m: string) => void;
};

/** Objects of one kind kept up to date by a watch; keyed "namespace/name". */
export class WatchedStore<T extends KubernetesObject> {
  readonly items = new Map<string, T>();
  /** true once the first list has completed. */
  synced = false;
  /** Last error of the watch, cleared by the next successful list. */
  lastError?: string;
  /** When the last complete list ended (epoch ms); undefined before the first. */
  lastSyncMs?: number;
  /** The watch gave up or was aborted: the items are no longer kept up to date. */
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
  ) {}

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

  async start(): Promise<void> {
    const watcher = K8s<GenericClass, T>(this.model, this.filters).Watch(
      (obj, phase) => this.apply(obj, phase),
      {
        resyncDelaySec: 2,
      },
    );
    watcher.events.on(WatchEvent.LIST, () => {
      this.synced = true;
      this.stopped = false;
      this.lastSyncMs = Date.now();
      this.lastError = undefined;
      for (const listener of this.listListeners) listener();
    });
    for (const ev of [WatchEvent.GIVE_UP, WatchEvent.ABORT])
      watcher.events.on(ev, () => (this.stopped = true));
    for (const ev of [WatchEvent.LIST_ERROR, WatchEvent.NETWORK_ERROR, WatchEvent.GIVE_UP]) {
      watcher.events.on(ev, (err: unknown) => {
        this.lastError = describeError(err);
        this.log?.warn({ what: this.what, error: this.lastError }, "cluster cache: watch error");
      });
    }
    await watcher.start();
  }

  /**
   * Its state on /metrics as `cache` (admission_guard_cache_synced and _cache_age_seconds): synced
   * once a list completed while the watch runs, aged from its last complete list.
   */
  observe(cache: string): void {
    observeCache(cache, {
      synced: () => this.synced && !this.stopped,
      lastSyncMs: () => this.lastSyncMs,
    });
  }

  inNamespace(namespace: string): T[] {
    const inNs = this.byNamespace.get(namespace);
    return inNs ? [...inNs.values()] : [];
  }
}
