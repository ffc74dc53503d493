// The scan's unit tests hand objects to it as its watch would. The scan keeps no object, so to
// judge again it reads them again (its `relist`): here from the objects as the tests last handed
// them over, as the API server would hold them.
import type { EngineDeps } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import {
  ReportScanner,
  type Relist,
  type ReportStore,
  type ScannerOptions,
} from "../../../lib/reports/scanner";

const idOf = (obj: KubeObject) =>
  `${obj.apiVersion}/${obj.kind}/${obj.metadata?.namespace}/${obj.metadata?.name}`;

/** The objects of the API server the tests play: what relist reads, and each read it served. */
export class FakeObjects {
  readonly objects = new Map<string, KubeObject>();
  /** The namespace of each relist (undefined: every namespace). */
  readonly relists: (string | undefined)[] = [];
  /** A relist waits for it first (a slow API server). */
  paused?: Promise<void>;

  put(obj: KubeObject): void {
    this.objects.set(idOf(obj), obj);
  }

  remove(obj: KubeObject): void {
    this.objects.delete(idOf(obj));
  }

  readonly relist: Relist = async (namespace, onObject) => {
    this.relists.push(namespace);
    await this.paused;
    for (const obj of [...this.objects.values()])
      if (namespace === undefined || obj.metadata?.namespace === namespace) await onObject(obj);
  };
}

/** The scan over FakeObjects: what it observes is stored there, what it forgets is gone. */
export class ScannerOverApi extends ReportScanner {
  constructor(
    deps: () => EngineDeps,
    store: ReportStore,
    options: Omit<ScannerOptions, "relist">,
    readonly api = new FakeObjects(),
  ) {
    super(deps, store, { ...options, relist: api.relist });
  }

  override observe(obj: KubeObject): Promise<void> {
    this.api.put(obj);
    return super.observe(obj);
  }

  override forget(obj: KubeObject): void {
    this.api.remove(obj);
    super.forget(obj);
  }
}
