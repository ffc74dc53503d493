// KServe's ServingRuntimes and ClusterServingRuntimes, cached in the admission process (and the
// watcher) for the InferenceServices judged at apply (lib/workload-kinds/inference-service.ts).
// Most clusters have no KServe: a list of a resource not served answers 404, and a watch of it
// would retry and log for ever. Each kind is probed instead (one object listed, a minute apart,
// silently while it is not served) and, once served, listed in pages and watched into a
// WatchedStore that keeps the projection (lib/workload-kinds/serving-runtimes.ts servingRuntimeAsRead), never the
// whole object. Until a kind has listed, its runtimes are not known (undefined): the model's
// container is then said not judged, never guessed.
import { GenericKind, type KubernetesObject } from "kubernetes-fluent-client";
import { describeError } from "./api-calls";
import { isServed } from "./list-watch";
import type { KubeObject } from "../objects/pod";
import {
  SERVING_RUNTIME_GROUP,
  SERVING_RUNTIME_VERSION,
  servingRuntimeAsRead,
} from "../workload-kinds/serving-runtimes";
import { WatchedStore, type Logger } from "./watched-store";

export const RUNTIME_PROBE_EVERY_MS = 60_000;

const gvk = (kind: string) => ({
  group: SERVING_RUNTIME_GROUP,
  version: SERVING_RUNTIME_VERSION,
  kind,
  plural: `${kind.toLowerCase()}s`,
});

/** Whether the API server serves the kind: true, false (404: KServe's CRD is not installed), or throws. */
export type RuntimeProbe = (kind: string) => Promise<boolean>;

const probeByListing: RuntimeProbe = kind => isServed(gvk(kind));

export interface ServingRuntimeCachesOptions {
  probe?: RuntimeProbe;
  probeEveryMs?: number;
  /** Tests: the stores' list and watch options (small retry delays). */
  store?: ConstructorParameters<typeof WatchedStore>[5];
}

export class ServingRuntimeCaches {
  readonly namespaced: WatchedStore<KubernetesObject>;
  readonly clusterWide: WatchedStore<KubernetesObject>;
  private readonly timers = new Set<ReturnType<typeof setTimeout>>();
  private readonly warned = new Set<string>();
  private stopped = false;

  constructor(
    private readonly log?: Logger,
    private readonly options: ServingRuntimeCachesOptions = {},
  ) {
    const store = (kind: string) =>
      new WatchedStore<KubernetesObject>(
        GenericKind,
        gvk(kind).plural,
        log,
        servingRuntimeAsRead,
        { kindOverride: gvk(kind) },
        options.store,
      );
    this.namespaced = store("ServingRuntime");
    this.clusterWide = store("ClusterServingRuntime");
  }

  start(): void {
    void this.tryStart("ServingRuntime", this.namespaced);
    void this.tryStart("ClusterServingRuntime", this.clusterWide);
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.namespaced.stop();
    this.clusterWide.stop();
  }

  private async tryStart(kind: string, store: WatchedStore<KubernetesObject>): Promise<void> {
    if (this.stopped) return;
    let served = false;
    try {
      served = await (this.options.probe ?? probeByListing)(kind);
    } catch (e) {
      // Forbidden or unreachable (not a missing CRD, which is quiet): said once, tried again.
      if (!this.warned.has(kind))
        this.log?.warn(
          { kind: gvk(kind).plural, error: describeError(e) },
          "cannot list KServe's runtimes: an InferenceService's model container is not judged at apply until it can",
        );
      this.warned.add(kind);
    }
    if (this.stopped) return;
    if (served) {
      this.log?.info({ kind: gvk(kind).plural }, "KServe's runtimes are served: cached");
      // On /metrics once served: a cluster without KServe has no cache to fail.
      store.observe(gvk(kind).plural);
      store
        .start()
        .catch(e =>
          this.log?.warn({ error: describeError(e) }, "cluster cache: watch failed to start"),
        );
      return;
    }
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      void this.tryStart(kind, store);
    }, this.options.probeEveryMs ?? RUNTIME_PROBE_EVERY_MS);
    timer.unref?.();
    this.timers.add(timer);
  }

  servingRuntimes(namespace: string): readonly KubeObject[] | undefined {
    return this.namespaced.synced
      ? (this.namespaced.inNamespace(namespace) as KubeObject[])
      : undefined;
  }

  clusterServingRuntimes(): readonly KubeObject[] | undefined {
    return this.clusterWide.synced ? (this.clusterWide.all() as KubeObject[]) : undefined;
  }
}
