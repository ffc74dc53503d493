// The live caches of DRA objects (resource.k8s.io) for the webhook: ResourceClaimTemplates,
// DeviceClasses and ResourceSlices, each kept as its projection (lib/objects/dra.ts), never whole. The API
// is optional (a beta behind a feature gate before 1.34): the newest version the API server serves
// is found by listing DeviceClasses (v1, then v1beta2, then v1beta1); when none is served (404)
// the kinds stay "not known" and the probe is repeated every few minutes, quietly. On /metrics
// (admission_guard_cache_synced) once served: a cluster without DRA is not a failing cache.
import { GenericKind, type KubernetesObject } from "kubernetes-fluent-client";
import { describeError } from "./api-calls";
import {
  capacityOf,
  claimTemplateAsRead,
  deviceClassAsRead,
  DRA_GROUP,
  DRA_VERSIONS,
  sliceAsRead,
  type ClaimTemplateAsRead,
  type DeviceCapacity,
  type DeviceClassAsRead,
  type SliceAsRead,
} from "../objects/dra";
import { isServed } from "./list-watch";
import { WatchedStore, type Logger } from "./watched-store";

export const DRA_PROBE_EVERY_MS = 5 * 60_000;

/** Whether the API server serves resource.k8s.io at this version: true, false (404), or throws. */
export type DraProbe = (version: string) => Promise<boolean>;

/** One DeviceClass listed at the version (lib/cluster/list-watch.ts isServed). */
const probeByListing: DraProbe = version => isServed(gvk(version, "DeviceClass", "deviceclasses"));

const gvk = (version: string, kind: string, plural: string) => ({
  group: DRA_GROUP,
  version,
  kind,
  plural,
});

type Kept<T> = T & KubernetesObject;

export interface DraCachesOptions {
  probe?: DraProbe;
  probeEveryMs?: number;
  /** Starts a store's list and watch (tests see which stores would start). */
  startStore?: (store: WatchedStore<KubernetesObject>) => Promise<void>;
}

export class DraCaches {
  /** The version watched; undefined until one is found served. */
  version?: string;
  templates?: WatchedStore<Kept<ClaimTemplateAsRead>>;
  classes?: WatchedStore<Kept<DeviceClassAsRead>>;
  slices?: WatchedStore<Kept<SliceAsRead>>;
  private timer?: ReturnType<typeof setTimeout>;
  private stopped = false;
  private warned = false;

  constructor(
    private readonly log?: Logger,
    private readonly options: DraCachesOptions = {},
  ) {}

  /** Finds the version served and watches it; never throws (a failure is retried later). */
  start(): void {
    void this.probe();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    for (const store of [this.templates, this.classes, this.slices]) store?.stop();
  }

  private async probe(): Promise<void> {
    if (this.stopped || this.version) return;
    const probe = this.options.probe ?? probeByListing;
    try {
      for (const version of DRA_VERSIONS) {
        if (await probe(version)) {
          if (this.stopped) return;
          this.watch(version);
          const startStore = this.options.startStore ?? (s => s.start());
          const stores = {
            resourceclaimtemplates: this.templates,
            deviceclasses: this.classes,
            resourceslices: this.slices,
          };
          for (const [cache, store] of Object.entries(stores)) {
            // On /metrics once served: a cluster without DRA has no cache to fail.
            store?.observe(cache);
            startStore(store as WatchedStore<KubernetesObject>).catch(e =>
              this.log?.warn({ error: describeError(e) }, "cluster cache: DRA watch failed"),
            );
          }
          this.log?.info({ version: `${DRA_GROUP}/${version}` }, "DRA objects watched");
          return;
        }
      }
    } catch (e) {
      // Forbidden (no RBAC rule) or unreachable: said once, tried again.
      if (!this.warned)
        this.log?.warn(
          { error: describeError(e) },
          "cannot list DRA DeviceClasses: devices claimed through DRA are not checked (add list and watch on resource.k8s.io to the module's RBAC)",
        );
      this.warned = true;
    }
    if (this.stopped) return;
    this.timer = setTimeout(
      () => void this.probe(),
      this.options.probeEveryMs ?? DRA_PROBE_EVERY_MS,
    );
    this.timer.unref?.();
  }

  /** The stores of one version (start() starts them; tests feed them with apply). */
  watch(version: string): void {
    this.version = version;
    const store = <T>(kind: string, plural: string, keep: (o: unknown) => T) =>
      new WatchedStore<Kept<T>>(
        GenericKind,
        `${plural}.${DRA_GROUP}`,
        this.log,
        o => keep(o) as Kept<T>,
        { kindOverride: gvk(version, kind, plural) },
      );
    this.templates = store("ResourceClaimTemplate", "resourceclaimtemplates", claimTemplateAsRead);
    this.classes = store("DeviceClass", "deviceclasses", deviceClassAsRead);
    this.slices = store("ResourceSlice", "resourceslices", sliceAsRead);
  }

  resourceClaimTemplate(namespace: string, name: string): ClaimTemplateAsRead | null | undefined {
    if (!this.templates?.synced) return undefined;
    return this.templates.items.get(`${namespace}/${name}`) ?? null;
  }

  deviceClass(name: string): DeviceClassAsRead | null | undefined {
    if (!this.classes?.synced) return undefined;
    return this.classes.items.get(`/${name}`) ?? null;
  }

  deviceCapacity(): DeviceCapacity | undefined {
    return this.slices?.synced ? capacityOf(this.slices.all()) : undefined;
  }
}
