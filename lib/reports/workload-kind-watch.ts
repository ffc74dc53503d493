// The watcher's eyes on the ML kinds (PyTorchJob, RayCluster, ...: lib/workload-kinds) for the
// PolicyReports. Not Pepr Watch bindings: Pepr's watcher gives up and exits when a watched resource
// is not served, and most clusters lack most of these CRDs (and each binding keeps every object it
// has seen, whole). Each kind is probed instead (a list, at the version of its table entry) until
// its CRD is served, then listed in pages and watched (lib/cluster/list-watch.ts: lib/reports/scan-watches.ts
// gives the watch), every object handed to the report scan and dropped. A CRD installed later is
// picked up at the next probe; one never installed costs a list a minute.
import { GenericKind } from "kubernetes-fluent-client";
import { describeError } from "../cluster/api-calls";
import { isServed, ListWatch } from "../cluster/list-watch";
import type { KubeObject } from "../objects/pod";
import type { Logger } from "../cluster/watched-store";
import { groupOf, pluralOf, versionOf, type WorkloadKindSpec } from "../workload-kinds/kind-spec";

export const PROBE_EVERY_MS = 60_000;

/** Whether the API server serves the kind: true, false (not served: 404), or an error to log. */
export type Probe = (spec: WorkloadKindSpec) => Promise<boolean>;

/** Each object seen, with its phase (LISTED, ADDED, MODIFIED, DELETED); awaited: the list waits. */
export type OnWorkload = (obj: KubeObject, phase: string) => unknown;

export interface WorkloadKindWatchOptions {
  kinds: readonly WorkloadKindSpec[];
  /** Where the default watch hands each object. */
  onObject?: OnWorkload;
  log?: Logger;
  probeEveryMs?: number;
  probe?: Probe;
  /** Starts the list and watch of a served kind (default: a ListWatch, each object to onObject). */
  watch?: (spec: WorkloadKindSpec, onObject: OnWorkload) => void;
}

export const gvkOf = (spec: WorkloadKindSpec) => ({
  group: groupOf(spec.apiVersion),
  version: versionOf(spec.apiVersion),
  kind: spec.kind,
  plural: pluralOf(spec),
});

/** A list of the kind's first object (lib/cluster/list-watch.ts isServed): 404, its CRD not installed. */
const probeByListing: Probe = spec => isServed(gvkOf(spec));

/** A list in pages, then a watch: each object handed over and dropped, none kept. */
function listAndWatch(spec: WorkloadKindSpec, onObject: OnWorkload, log?: Logger): void {
  const watch = new ListWatch<KubeObject>(
    GenericKind,
    {
      onObject: async (obj, phase) => void (await onObject(obj, phase)),
      onError: e =>
        log?.warn(
          { kind: `${pluralOf(spec)}.${groupOf(spec.apiVersion)}`, error: describeError(e) },
          "reports: a list or watch failed; retrying",
        ),
    },
    { filters: { kindOverride: gvkOf(spec) } },
  );
  void watch.start();
}

export class WorkloadKindWatches {
  /** Kinds being watched, by "plural.group". */
  readonly watching = new Set<string>();
  private readonly timers = new Set<ReturnType<typeof setTimeout>>();
  private readonly warned = new Set<string>();
  private stopped = false;

  constructor(private readonly options: WorkloadKindWatchOptions) {}

  start(): void {
    for (const spec of this.options.kinds) void this.tryWatch(spec);
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }

  private async tryWatch(spec: WorkloadKindSpec): Promise<void> {
    if (this.stopped) return;
    const name = `${pluralOf(spec)}.${groupOf(spec.apiVersion)}`;
    let served = false;
    try {
      served = await (this.options.probe ?? probeByListing)(spec);
    } catch (e) {
      // Forbidden (a platform kind without its RBAC rule) or unreachable: said once, tried again.
      if (!this.warned.has(name))
        this.options.log?.warn(
          { kind: name, error: describeError(e) },
          "reports: cannot list this workload kind; its objects are not in the PolicyReports (add list and watch on it to package.json pepr.rbac)",
        );
      this.warned.add(name);
    }
    if (this.stopped) return;
    if (served) {
      this.watching.add(name);
      const onObject = this.options.onObject ?? (() => undefined);
      if (this.options.watch) this.options.watch(spec, onObject);
      else listAndWatch(spec, onObject, this.options.log);
      return;
    }
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      void this.tryWatch(spec);
    }, this.options.probeEveryMs ?? PROBE_EVERY_MS);
    timer.unref?.();
    this.timers.add(timer);
  }
}
