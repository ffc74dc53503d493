// What rules need to know about the cluster, behind one interface with two implementations:
// - the live view (lib/cluster/live.ts): caches filled by watches in the admission process, plus the
//   few calls that must go to the API server (create a ServiceAccount, ask a SubjectAccessReview);
// - the snapshot view (below): objects read from a file (`check --cluster FILE`) or given by tests.
// Rules see only this interface, so the webhook and `check` run the very same code.
import type {
  V1LimitRange,
  V1Node,
  V1ResourceQuota,
  V1ServiceAccount,
} from "@kubernetes/client-node";
import {
  capacityOf,
  claimTemplateAsRead,
  deviceClassAsRead,
  sliceAsRead,
  type ClaimTemplateAsRead,
  type DeviceCapacity,
  type DeviceClassAsRead,
  type SliceAsRead,
} from "../objects/dra";
import { exemptionsNamespaceOwned, isExemptionObject } from "../exemptions";
import { SERVING_RUNTIME_GROUP, servingRuntimeAsRead } from "../workload-kinds/serving-runtimes";
import type { ImageRef } from "../objects/image-reference";
import type { ImageInspector, ImageLookup, Platform } from "../images/inspector";
import type { KubeObject } from "../objects/pod";
import type { NamespaceInfo } from "../objects/keys";
import { evaluateSecretAccess, type RbacEvaluator, type SecretAccess } from "./rbac";

export type { RbacEvaluator, SecretAccess, ImageLookup, Platform };

/** Outcome of making sure a ServiceAccount exists. */
export type EnsureResult =
  | { state: "exists" }
  | { state: "created" }
  /** A dry run: it does not exist, and the real request would create it. */
  | { state: "would-create" }
  | { state: "failed"; reason: string };

export interface ClusterView {
  /** "live" in the webhook, "snapshot" for `check` and unit tests. */
  readonly source: "live" | "snapshot";
  /**
   * The API server's own version as a Pod Security policy version ("v1.32"): what its PSA
   * evaluates "latest" as. Undefined when not known (a snapshot, or /version not read yet).
   */
  readonly serverVersion?: string;
  /** The namespace's labels and annotations; undefined when unknown (not in the cache or snapshot). */
  namespace(name: string): NamespaceInfo | undefined;
  /** ResourceQuotas of a namespace; undefined when there is no data (cache not synced, or none in the snapshot). */
  resourceQuotas(namespace: string): V1ResourceQuota[] | undefined;
  /** LimitRanges of a namespace; undefined when there is no data. */
  limitRanges(namespace: string): V1LimitRange[] | undefined;
  /** Every node; undefined when there is no data. */
  nodes(): V1Node[] | undefined;
  /**
   * DRA (lib/objects/dra.ts): a ResourceClaimTemplate as read, null when known not to exist, undefined when
   * not known (the API not served, the cache not synced, none in the snapshot).
   */
  resourceClaimTemplate?(namespace: string, name: string): ClaimTemplateAsRead | null | undefined;
  /** A DeviceClass as read; null when known not to exist, undefined when not known. */
  deviceClass?(name: string): DeviceClassAsRead | null | undefined;
  /** Devices per driver on the nodes, from ResourceSlices; undefined when not known. */
  deviceCapacity?(): DeviceCapacity | undefined;
  /**
   * KServe's ServingRuntimes of a namespace, as read (lib/workload-kinds/serving-runtimes.ts: what an
   * InferenceService's model container is built from); undefined when not known.
   */
  servingRuntimes?(namespace: string): readonly KubeObject[] | undefined;
  /** KServe's ClusterServingRuntimes, as read; undefined when not known. */
  clusterServingRuntimes?(): readonly KubeObject[] | undefined;
  /** The ServiceAccount, null when known not to exist, undefined when unknown. */
  serviceAccount(namespace: string, name: string): V1ServiceAccount | null | undefined;
  /**
   * The Exemption objects (lib/exemptions/index.ts) of the exemptions namespace; undefined when not known
   * (none then count: a violation stands until the cache has them).
   */
  exemptions(): readonly KubeObject[] | undefined;
  /**
   * The module's uuid, which the Exemptions namespace must carry as its ownership label
   * (lib/exemptions/index.ts exemptionsNamespaceOwned); undefined: ownership is not judged.
   */
  readonly exemptionsOwner?: string;
  /** Make sure a ServiceAccount exists (live: server-side apply, bounded by the webhook budget). */
  ensureServiceAccount(namespace: string, name: string, dryRun: boolean): Promise<EnsureResult>;
  /**
   * May `system:serviceaccount:<ns>:<sa>` get each of these secrets in the namespace?
   * undefined when it cannot be known (API unreachable, no RBAC in the snapshot); a secret left
   * out of the answer was not checked (live: no review is started after `deadline`, epoch ms).
   */
  secretAccess(
    namespace: string,
    serviceAccount: string,
    secrets: string[],
    deadline?: number,
  ): Promise<SecretAccess | undefined>;
  /**
   * The images' configs (User, WorkingDir, Env) for a platform, keyed by normalised reference;
   * "unknown", with the reason, when they cannot be read (inspection off, registry down, offline).
   * Waits until `deadline` (epoch ms; the request's) at most, else settings.images.budgetMs;
   * never throws.
   */
  imageConfigs(
    refs: ImageRef[],
    platform: Platform,
    pullSecrets?: PullSecrets,
    deadline?: number,
  ): Promise<Map<string, ImageLookup>>;
  /**
   * Makes the namespace's labels known before a request is judged (live: the watch may not have
   * listed yet). A snapshot knows what it holds: it has none.
   */
  settle?(namespace: string): Promise<void>;
}

/** A pod's own imagePullSecrets (images.workloadPullSecrets): the Secrets' namespace and names. */
export interface PullSecrets {
  namespace: string;
  names: string[];
}

/** Every image unknown, for the same reason. */
export function unknownImages(refs: ImageRef[], reason: string): Map<string, ImageLookup> {
  return new Map(refs.map(r => [r.normalised, { state: "unknown" as const, reason }]));
}

/** Through the inspector when there is one; otherwise every image unknown with `offReason`. */
export function imageConfigsVia(
  inspector: ImageInspector | undefined,
  refs: ImageRef[],
  platform: Platform,
  offReason: string,
  deadline?: number,
): Promise<Map<string, ImageLookup>> {
  if (!refs.length) return Promise.resolve(new Map());
  return inspector
    ? inspector.inspect(refs, platform, { deadline })
    : Promise.resolve(unknownImages(refs, offReason));
}

/** Why an image is unknown to `check` when it was not asked to read registries. */
export const OFFLINE_IMAGES = "check reads image configs with --inspect-images";

const str = (m: unknown): Record<string, string> =>
  m && typeof m === "object" && !Array.isArray(m) ? (m as Record<string, string>) : {};

export function namespaceInfoOf(obj: KubeObject): NamespaceInfo {
  return {
    name: obj.metadata?.name ?? "",
    labels: str(obj.metadata?.labels),
    annotations: str(obj.metadata?.annotations),
  };
}

/**
 * A cluster as a list of objects: what `kubectl get ... -o yaml` prints. A kind that the snapshot
 * holds no object of is "no data", never "none exist": rules must not deny for lack of data.
 */
export class SnapshotCluster implements ClusterView {
  readonly source = "snapshot" as const;
  private readonly byKind = new Map<string, KubeObject[]>();

  constructor(
    readonly objects: KubeObject[] = [],
    /** Answers secret access from the snapshot's RBAC objects (lib/cluster/rbac.ts unless a test injects another). */
    private readonly rbac: RbacEvaluator = evaluateSecretAccess,
    /** Reads image configs from registries (`check --inspect-images`); none: every image unknown. */
    private readonly images?: ImageInspector,
    /** See ClusterView.exemptionsOwner (`check`: the module's package.json pepr.uuid). */
    readonly exemptionsOwner?: string,
  ) {
    for (const obj of objects) {
      if (!obj || typeof obj !== "object" || !obj.kind) continue;
      const list = this.byKind.get(obj.kind) ?? [];
      list.push(obj);
      this.byKind.set(obj.kind, list);
    }
  }

  /** Objects of a kind, undefined when the snapshot has none of that kind. */
  ofKind<T = KubeObject>(kind: string, namespace?: string): T[] | undefined {
    const list = this.byKind.get(kind);
    if (!list) return undefined;
    return (
      namespace === undefined ? list : list.filter(o => o.metadata?.namespace === namespace)
    ) as T[];
  }

  namespace(name: string): NamespaceInfo | undefined {
    const ns = this.byKind.get("Namespace")?.find(o => o.metadata?.name === name);
    return ns ? namespaceInfoOf(ns) : undefined;
  }

  resourceQuotas(namespace: string): V1ResourceQuota[] | undefined {
    return this.ofKind<V1ResourceQuota>("ResourceQuota", namespace);
  }

  limitRanges(namespace: string): V1LimitRange[] | undefined {
    return this.ofKind<V1LimitRange>("LimitRange", namespace);
  }

  nodes(): V1Node[] | undefined {
    return this.ofKind<V1Node>("Node");
  }

  exemptions(): readonly KubeObject[] | undefined {
    const all = this.ofKind("Exemption")?.filter(isExemptionObject);
    const owner = this.exemptionsOwner;
    if (!all || owner === undefined) return all;
    // As in the live view, none count in a namespace the install does not own; a namespace the
    // snapshot lacks is not known, and its Exemptions count (docs/check.md).
    return all.filter(e => {
      const ns = this.namespace(e.metadata?.namespace ?? "");
      return !ns || exemptionsNamespaceOwned(ns, owner);
    });
  }

  // DRA kinds, projected once per snapshot as the live caches project them (lib/objects/dra.ts).
  private dra?: {
    templates?: Map<string, ClaimTemplateAsRead>;
    classes?: Map<string, DeviceClassAsRead>;
    slices?: SliceAsRead[];
  };
  private draKinds() {
    if (this.dra) return this.dra;
    const draOnly = (kind: string) =>
      this.ofKind(kind)?.filter(o => String(o.apiVersion ?? "").startsWith("resource.k8s.io/"));
    const templates = draOnly("ResourceClaimTemplate");
    const classes = draOnly("DeviceClass");
    const slices = draOnly("ResourceSlice");
    return (this.dra = {
      templates:
        templates &&
        new Map(
          templates.map(t => [
            `${t.metadata?.namespace}/${t.metadata?.name}`,
            claimTemplateAsRead(t),
          ]),
        ),
      classes:
        classes && new Map(classes.map(c => [String(c.metadata?.name), deviceClassAsRead(c)])),
      slices: slices?.map(sliceAsRead),
    });
  }

  resourceClaimTemplate(namespace: string, name: string): ClaimTemplateAsRead | null | undefined {
    const { templates } = this.draKinds();
    return templates && (templates.get(`${namespace}/${name}`) ?? null);
  }

  deviceClass(name: string): DeviceClassAsRead | null | undefined {
    const { classes } = this.draKinds();
    return classes && (classes.get(name) ?? null);
  }

  deviceCapacity(): DeviceCapacity | undefined {
    const { slices } = this.draKinds();
    return slices && capacityOf(slices);
  }

  // KServe's runtimes, projected as the live caches project them. `kubectl get
  // servingruntimes,clusterservingruntimes -A` exports both kinds at once: a snapshot that holds
  // either knows the other too (none of it), one that holds neither knows neither.
  private runtimesOf(kind: string, namespace?: string): readonly KubeObject[] | undefined {
    const kserve = (k: string) =>
      this.ofKind(k)?.filter(o =>
        String(o.apiVersion ?? "").startsWith(`${SERVING_RUNTIME_GROUP}/`),
      );
    const some = kserve("ServingRuntime")?.length || kserve("ClusterServingRuntime")?.length;
    if (!some) return undefined;
    const all = kserve(kind) ?? [];
    return (
      namespace === undefined ? all : all.filter(o => o.metadata?.namespace === namespace)
    ).map(servingRuntimeAsRead);
  }

  servingRuntimes(namespace: string): readonly KubeObject[] | undefined {
    return this.runtimesOf("ServingRuntime", namespace);
  }

  clusterServingRuntimes(): readonly KubeObject[] | undefined {
    return this.runtimesOf("ClusterServingRuntime");
  }

  /** ServiceAccounts the webhook would have created by now (see ensureServiceAccount). */
  private readonly created = new Set<string>();

  serviceAccount(namespace: string, name: string): V1ServiceAccount | null | undefined {
    if (this.created.has(`${namespace}/${name}`)) return { metadata: { namespace, name } };
    const all = this.ofKind<V1ServiceAccount>("ServiceAccount");
    if (!all) return undefined;
    return (
      all.find(sa => sa.metadata?.namespace === namespace && sa.metadata?.name === name) ?? null
    );
  }

  /**
   * What the webhook would do: a missing account is created (and exists from then on, for the
   * next objects of the same run, as in the cluster); a dry run creates nothing.
   */
  async ensureServiceAccount(
    namespace: string,
    name: string,
    dryRun = false,
  ): Promise<EnsureResult> {
    if (this.serviceAccount(namespace, name)) return { state: "exists" };
    if (dryRun) return { state: "would-create" };
    this.created.add(`${namespace}/${name}`);
    return { state: "created" };
  }

  async secretAccess(
    namespace: string,
    serviceAccount: string,
    secrets: string[],
  ): Promise<SecretAccess | undefined> {
    return this.rbac(this.objects, namespace, serviceAccount, secrets);
  }

  imageConfigs(
    refs: ImageRef[],
    platform: Platform,
    _pullSecrets?: PullSecrets,
    deadline?: number,
  ): Promise<Map<string, ImageLookup>> {
    return imageConfigsVia(this.images, refs, platform, OFFLINE_IMAGES, deadline);
  }
}
