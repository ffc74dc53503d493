// The watcher's eyes for the PolicyReports and the fix Events: Pods, the built-in workload kinds
// and the ML kinds (lib/reports/workload-kind-watch.ts), each listed in pages and watched by the
// module itself (lib/cluster/list-watch.ts), every object handed to the report scan (and each Pod to the
// Events), then dropped. Not Pepr Watch bindings: each binding (kubernetes-fluent-client's Watcher)
// keeps every object it has seen, whole (~33 MiB per 1,000 pods, docs/bench.md), which at 100,000
// pods is gigabytes. The handlers are awaited: a scan whose queue is full slows the list that feeds
// it, so the watcher holds a page and the scan's queue, never the cluster.
import { GenericKind, kind, type GenericClass } from "kubernetes-fluent-client";
import type { Filters } from "kubernetes-fluent-client/dist/fluent/shared-types.js";
import { describeError } from "../cluster/api-calls";
import type { FixEvents } from "./events";
import { ListWatch, listPaged, type ListWatchHandlers } from "../cluster/list-watch";
import type { KubeObject } from "../objects/pod";
import type { Logger } from "../cluster/watched-store";
import { apiVersionOf, type WorkloadKindSpec } from "../workload-kinds/kind-spec";
import { BUILT_IN_WORKLOADS } from "../workload-kinds/table";
import { scanKindOf, type ReportScanner } from "./scanner";
import { gvkOf, WorkloadKindWatches, type Probe } from "./workload-kind-watch";

/** A kind the watcher lists and watches. */
export interface WatchedKind {
  model: GenericClass;
  apiVersion: string;
  kind: string;
  /** A custom kind's kindOverride. */
  filters?: Filters;
}

export const POD: WatchedKind = { model: kind.Pod, apiVersion: "v1", kind: "Pod" };
/** Kinds of the table's BUILT_IN_WORKLOADS the watcher does not watch. */
const NOT_WATCHED = new Set(["ReplicaSet", "ReplicationController"]);
/**
 * Pods and the workloads people write. A Deployment's ReplicaSets and a CronJob's Jobs are judged
 * through their owner's template (the scan skips them), so ReplicaSets are not watched at all.
 */
export const BUILT_IN_WATCHED: readonly WatchedKind[] = [
  POD,
  ...BUILT_IN_WORKLOADS.filter(k => !NOT_WATCHED.has(k.kind)).map(k => ({
    model: kind[k.kind] as GenericClass,
    apiVersion: apiVersionOf(k),
    kind: k.kind,
  })),
];

/** A running list and watch. */
export interface Watch {
  start(): Promise<void>;
  stop(): void;
}
export type StartWatch = (what: WatchedKind, handlers: ListWatchHandlers<KubeObject>) => Watch;
/** One paged list of a kind (one namespace, or all), each object awaited. */
export type ListKind = (
  what: WatchedKind,
  namespace: string | undefined,
  onObject: (obj: KubeObject) => Promise<void>,
) => Promise<void>;

const listWatch: StartWatch = (what, handlers) => {
  const watch = new ListWatch<KubeObject>(what.model, handlers, { filters: what.filters });
  void watch.start();
  return watch;
};

const listKind: ListKind = (what, namespace, onObject) =>
  listPaged<KubeObject>(what.model, onObject, {
    filters: { ...what.filters, ...(namespace === undefined ? {} : { namespace }) },
  });

/**
 * The namespaces Pepr's watch ignores (package.json pepr.alwaysIgnore, else pepr.watch.alwaysIgnore,
 * plus PEPR_ADDITIONAL_IGNORED_NAMESPACES): what Pepr's bindings never handed to the scan.
 */
export function watchIgnoredNamespaces(
  pepr: {
    alwaysIgnore?: { namespaces?: readonly string[] };
    watch?: { alwaysIgnore?: { namespaces?: readonly string[] } };
  },
  env: Record<string, string | undefined> = process.env,
): string[] {
  const configured = pepr.alwaysIgnore?.namespaces?.length
    ? pepr.alwaysIgnore.namespaces
    : (pepr.watch?.alwaysIgnore?.namespaces ?? []);
  const additional = (env.PEPR_ADDITIONAL_IGNORED_NAMESPACES ?? "")
    .split(",")
    .map(ns => ns.trim())
    .filter(Boolean);
  return [...new Set([...configured, ...additional])];
}

export interface ScanWatchesOptions {
  /** The ML and platform kinds in force (each watched once its CRD is served). */
  workloadKinds: readonly WorkloadKindSpec[];
  /** Namespaces whose objects are not handed over (watchIgnoredNamespaces). */
  ignoredNamespaces?: readonly string[];
  log?: Logger;
  /** Tests: how a kind is listed and watched (default: a ListWatch), and listed once. */
  watch?: StartWatch;
  list?: ListKind;
  /** Tests: how an ML kind is probed, and how often. */
  probe?: Probe;
  probeEveryMs?: number;
}

export class ScanWatches {
  /** Kinds being watched, by scan kind ("Pod.", "PyTorchJob.kubeflow.org"): what relist reads. */
  private readonly watched = new Map<string, WatchedKind>();
  private readonly running: Watch[] = [];
  private workloadKindWatches?: WorkloadKindWatches;
  private readonly ignored: ReadonlySet<string>;

  constructor(private readonly options: ScanWatchesOptions) {
    this.ignored = new Set(options.ignoredNamespaces ?? []);
  }

  /** Lists and watches what the scan and the Events need: Pods for either, the workloads for the scan. */
  start(targets: { scanner?: ReportScanner; events?: FixEvents }): void {
    const { scanner, events } = targets;
    if (!scanner && !events) return;
    for (const what of scanner ? BUILT_IN_WATCHED : [POD]) this.watchKind(what, targets);
    if (!scanner || !this.options.workloadKinds.length) return;
    // The ML kinds: each probed until its CRD is served (a watch of a kind not served fails).
    this.workloadKindWatches = new WorkloadKindWatches({
      kinds: this.options.workloadKinds,
      log: this.options.log,
      probe: this.options.probe,
      probeEveryMs: this.options.probeEveryMs,
      watch: spec =>
        this.watchKind(
          {
            model: listWatchModel,
            apiVersion: spec.apiVersion,
            kind: spec.kind,
            filters: { kindOverride: gvkOf(spec) },
          },
          targets,
        ),
    });
    this.workloadKindWatches.start();
  }

  stop(): void {
    this.workloadKindWatches?.stop();
    for (const watch of this.running.splice(0)) watch.stop();
  }

  /** The scan's relist: every kind watched, read again in pages (one namespace, or all). */
  readonly relist = async (
    namespace: string | undefined,
    onObject: (obj: KubeObject) => Promise<void>,
  ): Promise<void> => {
    const list = this.options.list ?? listKind;
    for (const what of [...this.watched.values()])
      await list(what, namespace, async obj => {
        if (this.ignores(obj)) return;
        await onObject(withKind(obj, what));
      });
  };

  private ignores(obj: KubeObject): boolean {
    return this.ignored.has(obj?.metadata?.namespace ?? "");
  }

  private watchKind(what: WatchedKind, targets: { scanner?: ReportScanner; events?: FixEvents }) {
    const { scanner, events } = targets;
    const scanKind = scanKindOf(what.apiVersion, what.kind);
    const isPod = what === POD;
    const log = this.options.log;
    const handlers: ListWatchHandlers<KubeObject> = {
      onObject: async (received, phase) => {
        if (this.ignores(received)) return;
        const obj = withKind(received, what);
        try {
          if (phase === "DELETED") return scanner?.forget(obj);
          await Promise.all([scanner?.offer(obj, phase), isPod ? events?.onPod(obj) : undefined]);
        } catch (e) {
          log?.warn(
            { error: describeError(e), kind: obj.kind, name: obj.metadata?.name },
            "scan failed",
          );
        }
      },
      onListStart: () => scanner?.listStarted(scanKind),
      onListEnd: () => scanner?.listEnded(scanKind),
      onError: e =>
        log?.warn(
          { kind: scanKind, error: describeError(e) },
          "reports: a list or watch failed; retrying",
        ),
    };
    if (scanner) this.watched.set(scanKind, what);
    this.running.push((this.options.watch ?? listWatch)(what, handlers));
  }
}

// A custom kind is listed through GenericKind with its kindOverride.
const listWatchModel: GenericClass = GenericKind;

/** Items of a list carry no kind or apiVersion: given those of the kind listed. */
function withKind(obj: KubeObject, what: WatchedKind): KubeObject {
  if (!obj.kind) obj.kind = what.kind;
  if (!obj.apiVersion) obj.apiVersion = what.apiVersion;
  return obj;
}

/**
 * Resolves once every cache has listed, or after timeoutMs: objects judged before the caches they
 * are judged with have listed would be judged again when each lists.
 */
export function whenListed(
  caches: readonly { synced: boolean; listListeners: (() => void)[] }[],
  timeoutMs: number,
): Promise<void> {
  return new Promise<void>(resolve => {
    const check = () => {
      if (caches.every(c => c.synced)) done();
    };
    const timer = setTimeout(() => done(), timeoutMs);
    timer.unref?.();
    let finished = false;
    const done = () => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      resolve();
    };
    for (const cache of caches) cache.listListeners.push(check);
    check();
  });
}
