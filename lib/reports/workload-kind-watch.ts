// The watcher's eyes on the ML kinds (PyTorchJob, RayCluster, ...: lib/workload-kinds) for the
// PolicyReports. Not Pepr Watch bindings: Pepr's watcher gives up and exits when a watched resource
// is not served, and most clusters lack most of these CRDs. Each kind is probed instead (a list, at
// the version of its table entry) until its CRD is served, then watched like the module's caches
// (lib/watched-store.ts), every object handed to the report scan. A CRD installed later is picked
// up at the next probe; one never installed costs a list a minute.
import { GenericKind, K8s } from "kubernetes-fluent-client";
import { describeError, withBudget, API_BUDGET_MS } from "../api-calls";
import type { KubeObject } from "../pod";
import { WatchedStore, type Logger } from "../watched-store";
import { groupOf, pluralOf, versionOf, type WorkloadKindSpec } from "../workload-kinds/kind-spec";

export const PROBE_EVERY_MS = 60_000;

/** Whether the API server serves the kind: true, false (not served: 404), or an error to log. */
export type Probe = (spec: WorkloadKindSpec) => Promise<boolean>;

export interface WorkloadKindWatchOptions {
  kinds: readonly WorkloadKindSpec[];
  /** Each object seen, with its watch phase (ADDED, MODIFIED, DELETED). */
  onObject: (obj: KubeObject, phase: string) => void;
  log?: Logger;
  probeEveryMs?: number;
  probe?: Probe;
  /** Starts the watch of a served kind (default: a WatchedStore). */
  watch?: (spec: WorkloadKindSpec, onObject: (obj: KubeObject, phase: string) => void) => void;
}

const gvkOf = (spec: WorkloadKindSpec) => ({
  group: groupOf(spec.apiVersion),
  version: versionOf(spec.apiVersion),
  kind: spec.kind,
  plural: pluralOf(spec),
});

/** A list of the kind, bounded in time: 404 means its CRD is not installed (or not that version). */
const probeByListing: Probe = async spec => {
  try {
    await withBudget(
      K8s(GenericKind, { kindOverride: gvkOf(spec) }).Get(),
      API_BUDGET_MS,
      `listing ${pluralOf(spec)}`,
    );
    return true;
  } catch (e) {
    if ((e as { status?: number }).status === 404) return false;
    throw e;
  }
};

function watchWithStore(spec: WorkloadKindSpec, onObject: (o: KubeObject, phase: string) => void) {
  const what = `${pluralOf(spec)}.${groupOf(spec.apiVersion)}`;
  const store = new WatchedStore<KubeObject & { metadata?: object }>(
    GenericKind,
    what,
    undefined,
    // Kept: what the report reads is judged at once; the scan keeps its own copy.
    undefined,
    { kindOverride: gvkOf(spec) },
  );
  store.listeners.push((obj, phase) => onObject(obj, phase));
  void store.start();
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
      (this.options.watch ?? watchWithStore)(spec, this.options.onObject);
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
