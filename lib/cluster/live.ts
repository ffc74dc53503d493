// The live cluster view used by the webhook: watched caches in the admission process, projected to
// what rules read; the only API calls in a request are bounded by API_BUDGET_MS.
// Why: docs/adr/0017-no-api-calls-on-the-admission-path.md
import { GenericKind, K8s, kind, type KubernetesObject } from "kubernetes-fluent-client";
import type {
  V1LimitRange,
  V1Node,
  V1NodeSystemInfo,
  V1ObjectMeta,
  V1ResourceQuota,
  V1ServiceAccount,
} from "@kubernetes/client-node";
import { AccessReviews } from "./access-reviews";
import { API_BUDGET_MS, describeError, withBudget } from "./api-calls";
import type { ImageRef } from "../objects/image-reference";
import { credentialsOfSecrets } from "../images/credentials";
import type {
  ImageInspector,
  ImageLookup,
  Platform,
  RegistryCredentials,
} from "../images/inspector";
import { bounded } from "../images/limits";
import {
  imageConfigsVia,
  namespaceInfoOf,
  type ClusterView,
  type EnsureResult,
  type PullSecrets,
  type SecretAccess,
} from "./view";
import type { NamespaceInfo } from "../objects/keys";
import type { ClaimTemplateAsRead, DeviceCapacity, DeviceClassAsRead } from "../objects/dra";
import { DraCaches, type DraCachesOptions } from "./dra-live";
import {
  EXEMPTION_GVK,
  exemptionsNamespaceOwned,
  type ExemptionsNamespaceState,
  notOwnedFix,
  notOwnedReason,
} from "../exemptions";
import { OWNED_BY_LABEL } from "../objects/keys";
import { observeExemptionsNamespace } from "../metrics";
import type { KubeObject } from "../objects/pod";
import { ServiceAccounts } from "./service-accounts";
import { ServingRuntimeCaches, type ServingRuntimeCachesOptions } from "./serving-runtime-cache";
import { WatchedStore, type Logger } from "./watched-store";

/** A namespace created less than this long ago counts as new: it gets its ServiceAccount at once. */
export const NEW_NAMESPACE_WINDOW_MS = 5 * 60_000;
/** ServiceAccounts of new namespaces created at most this many at a time. */
export const BACKGROUND_CONCURRENCY = 4;

export interface LiveClusterOptions {
  /** The namespace whose Exemptions count (settings.exemptions.namespace); unset: none are watched. */
  exemptionsNamespace?: string;
  /**
   * The module's uuid: then Exemptions count only while their namespace carries the install's
   * ownership label with it (lib/exemptions/index.ts exemptionsNamespaceOwned).
   */
  exemptionsOwner?: string;
  /**
   * The ServiceAccount to create in a namespace that appears (undefined: none). Pods ensure theirs
   * anyway; creating it with the namespace takes that API call off the first pod's admission.
   */
  serviceAccountFor?: (ns: NamespaceInfo) => string | undefined;
  /** Reads image configs from registries (settings.images.inspect); none: every image unknown. */
  images?: ImageInspector;
  /** How a namespace is read once through the API before the watch has listed (tests inject one). */
  readNamespace?: (name: string) => Promise<KubeObject | undefined>;
  /** How a pod's pull Secret is read (images.workloadPullSecrets; tests inject one). */
  readSecret?: (namespace: string, name: string) => Promise<KubeObject | undefined>;
  /** How the API server's /version is read (tests inject one). */
  readVersion?: () => Promise<ServerVersionInfo>;
  /** How KServe's runtimes are probed (tests inject one). */
  servingRuntimes?: ServingRuntimeCachesOptions;
  /** How the DRA API's version is probed (tests inject one). */
  dra?: DraCachesOptions;
}

/** What GET /version answers (only the fields read here). */
export interface ServerVersionInfo {
  major?: string;
  minor?: string;
  gitVersion?: string;
}

/** A failed /version read is tried again after this long (at most VERSION_READ_ATTEMPTS times). */
export const VERSION_RETRY_MS = 30_000;
export const VERSION_READ_ATTEMPTS = 10;

/**
 * The API server's version as a Pod Security policy version ("v1.32"), from its gitVersion, else
 * from major and minor (GKE and EKS say minor "32+"); undefined for anything else.
 */
export function policyVersionOf(info: ServerVersionInfo | undefined): string | undefined {
  const minor =
    /^v1\.(\d+)/.exec(info?.gitVersion ?? "")?.[1] ??
    (info?.major === "1" ? /^(\d+)\+?$/.exec(info.minor ?? "")?.[1] : undefined);
  return minor === undefined ? undefined : `v1.${Number(minor)}`;
}

/** A pod's pull Secrets are read again after this long (a rotated token is used within it). */
export const PULL_SECRET_TTL_MS = 60_000;
/** Pull Secrets of one pod read at most (the kubelet's own list is rarely longer than two). */
export const MAX_PULL_SECRETS_PER_POD = 8;
/** Pull Secrets whose credentials are kept at once. */
const MAX_PULL_SECRETS_CACHED = 1000;
/** Of one Secret: registries kept, and the size of one registry's credentials. */
const MAX_REGISTRIES_PER_SECRET = 16;
const MAX_CREDENTIAL_BYTES = 16 * 1024;

// ---- What each cache keeps of an object (the rest is dropped as it arrives) ----

/** kubectl apply's copy of the whole object: read by no rule. */
const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

/** The object without its undefined fields (a reduced object holds no empty slots). */
function defined<T extends object>(obj: T): T {
  for (const k of Object.keys(obj) as (keyof T)[]) if (obj[k] === undefined) delete obj[k];
  return obj;
}

/** Annotations without kubectl's last-applied copy; undefined when none are left. */
function annotationsAsRead(
  annotations: Record<string, string> | undefined,
): Record<string, string> | undefined {
  if (!annotations || !(LAST_APPLIED in annotations)) return annotations;
  const rest = { ...annotations };
  delete rest[LAST_APPLIED];
  return Object.keys(rest).length ? rest : undefined;
}

/**
 * Nodes: node fit (capabilities/resource-quota: node-classes, scheduler-filters) reads name,
 * labels, taints, unschedulable and allocatable; image-user.ts reads status.nodeInfo.architecture.
 */
export function nodeAsRead(node: V1Node & KubernetesObject): V1Node & KubernetesObject {
  const { metadata, spec, status } = node;
  const nodeInfo = status?.nodeInfo;
  return defined({
    apiVersion: node.apiVersion,
    kind: node.kind,
    metadata: defined({
      name: metadata?.name,
      labels: metadata?.labels,
      resourceVersion: metadata?.resourceVersion,
    }),
    spec: spec && defined({ taints: spec.taints, unschedulable: spec.unschedulable }),
    status:
      status &&
      defined({
        allocatable: status.allocatable,
        nodeInfo:
          nodeInfo &&
          (defined({
            architecture: nodeInfo.architecture,
            operatingSystem: nodeInfo.operatingSystem,
          }) as V1NodeSystemInfo),
      }),
  });
}

/**
 * Namespaces: namespaceInfoOf (every rule's mode, labels, annotations), the exemptions' ownership
 * label, onNamespaceEvent (creationTimestamp, status.phase Terminating), the reports (name).
 */
export function namespaceAsRead(ns: KubernetesObject): KubernetesObject {
  const { metadata } = ns;
  const phase = (ns as { status?: { phase?: string } }).status?.phase;
  return defined({
    apiVersion: ns.apiVersion,
    kind: ns.kind,
    metadata: defined({
      name: metadata?.name,
      uid: metadata?.uid,
      labels: metadata?.labels,
      annotations: annotationsAsRead(metadata?.annotations),
      creationTimestamp: metadata?.creationTimestamp,
      resourceVersion: metadata?.resourceVersion,
    }),
    ...(phase !== undefined && { status: { phase } }),
  });
}

/**
 * Quotas, LimitRanges, Exemptions: their rules (quota.ts, limit-range defaults, exemptions.ts) read
 * spec and status and the metadata's identity; managed fields and kubectl's last-applied copy go.
 */
export function withoutBookkeeping<T extends KubernetesObject>(obj: T): T {
  const metadata = obj.metadata as V1ObjectMeta | undefined;
  if (!metadata?.managedFields && !metadata?.annotations?.[LAST_APPLIED]) return obj;
  const kept: V1ObjectMeta = { ...metadata, annotations: annotationsAsRead(metadata.annotations) };
  delete kept.managedFields;
  return { ...obj, metadata: defined(kept) };
}

/** How long a request waits for the namespace watch's first list before reading its namespace. */
export const NAMESPACE_WAIT_MS = 1000;

export class LiveCluster implements ClusterView {
  readonly source = "live" as const;
  readonly namespaces: WatchedStore<KubernetesObject>;
  readonly quotas: WatchedStore<V1ResourceQuota & KubernetesObject>;
  readonly limitRangeStore: WatchedStore<V1LimitRange & KubernetesObject>;
  readonly nodeStore: WatchedStore<V1Node & KubernetesObject>;
  readonly accounts: ServiceAccounts;
  readonly exemptionStore?: WatchedStore<KubernetesObject>;
  /**
   * KServe's runtimes, when served (an InferenceService's model container): outside caches(), an
   * optional API, on /metrics once served.
   */
  readonly runtimes: ServingRuntimeCaches;
  /** DRA objects (resource.k8s.io), when served: outside caches(), likewise. */
  readonly dra: DraCaches;
  private readonly accessReviews: AccessReviews;
  /** Namespaces read one by one before the watch's first list (then dropped: the watch knows). */
  private readonly readDirectly = new Map<string, NamespaceInfo>();
  private readonly namespacesListed: Promise<void>;
  /** See ClusterView.serverVersion: read once at start (securityContext.clusterVersion "latest"). */
  serverVersion?: string;
  /** The first /version read, success or not: requests wait for it (bounded) in settle. */
  private firstVersionRead?: Promise<void>;

  constructor(
    private readonly log?: Logger,
    private readonly options: LiveClusterOptions = {},
  ) {
    this.namespaces = new WatchedStore(kind.Namespace, "namespaces", log, namespaceAsRead);
    this.namespaces.listeners.push((ns, phase) => this.onNamespaceEvent(ns as KubeObject, phase));
    // Said once per change of the Exemptions namespace, never per request.
    this.namespaces.listListeners.push(() => this.reportExemptionsNamespace());
    this.namespacesListed = new Promise(listed =>
      this.namespaces.listListeners.push(() => {
        this.readDirectly.clear();
        listed();
      }),
    );
    this.quotas = new WatchedStore(kind.ResourceQuota, "resourcequotas", log, withoutBookkeeping);
    this.limitRangeStore = new WatchedStore(
      kind.LimitRange,
      "limitranges",
      log,
      withoutBookkeeping,
    );
    this.nodeStore = new WatchedStore(kind.Node, "nodes", log, nodeAsRead);
    this.accounts = new ServiceAccounts(log);
    // Only the exemptions namespace is watched: an Exemption anywhere else never counts.
    if (options.exemptionsNamespace)
      this.exemptionStore = new WatchedStore(GenericKind, "exemptions", log, withoutBookkeeping, {
        kindOverride: EXEMPTION_GVK,
        namespace: options.exemptionsNamespace,
      });
    this.dra = new DraCaches(log, options.dra);
    this.runtimes = new ServingRuntimeCaches(log, options.servingRuntimes);
    this.accessReviews = new AccessReviews(log);
  }

  /** Starts every watch and reads /version; failures are logged and retried, never thrown. */
  start(): void {
    this.firstVersionRead = this.readServerVersion();
    this.runtimes.start();
    this.dra.start();
    observeExemptionsNamespace(() => this.exemptionsNamespaceState());
    for (const [cache, store] of this.caches()) {
      store.observe(cache);
      store
        .start()
        .catch(e =>
          this.log?.warn({ error: describeError(e) }, "cluster cache: watch failed to start"),
        );
    }
  }

  /** Ends every watch (tests; the caches keep what they hold). */
  stop(): void {
    for (const [, store] of this.caches()) store.stop();
    this.runtimes.stop();
    this.dra.stop();
  }

  /** Each watch cache, with its name on /metrics (the `cache` label). */
  caches(): [string, WatchedStore<KubernetesObject>][] {
    const caches: [string, WatchedStore<KubernetesObject>][] = [
      ["namespaces", this.namespaces],
      ["quotas", this.quotas],
      ["limitranges", this.limitRangeStore],
      ["nodes", this.nodeStore],
      ["serviceaccounts", this.accounts.store],
    ];
    if (this.exemptionStore) caches.push(["exemptions", this.exemptionStore]);
    return caches;
  }

  /**
   * A namespace that was just created gets its ServiceAccount. "Just created" is judged by its
   * creationTimestamp, not by the watch phase: the watcher reports every existing namespace as ADDED
   * on its first list and after each re-list, and a burst of API calls at start-up is pointless
   * (their pods ensure it anyway). A namespace created again under the same name gets them again:
   * the ServiceAccount watch has seen them deleted with it.
   */
  // Namespaces can appear by the thousand (a GitOps sync, a test cluster): their ServiceAccounts are
  // created a few at a time, so the API calls never crowd out the admission path.
  private readonly backgroundQueue: (() => Promise<unknown>)[] = [];
  private backgroundRunning = 0;

  private inBackground(task: () => Promise<unknown>): void {
    this.backgroundQueue.push(task);
    this.drainBackground();
  }

  private drainBackground(): void {
    while (this.backgroundRunning < BACKGROUND_CONCURRENCY && this.backgroundQueue.length) {
      const task = this.backgroundQueue.shift()!;
      this.backgroundRunning++;
      void task()
        .catch(() => undefined)
        .finally(() => {
          this.backgroundRunning--;
          this.drainBackground();
        });
    }
  }

  private onNamespaceEvent(obj: KubeObject, phase: string): void {
    const name = obj.metadata?.name;
    if (!name) return;
    if (name === this.options.exemptionsNamespace) this.reportExemptionsNamespace();
    if (phase === "DELETED") {
      this.accounts.forgetNamespace(name);
      return;
    }
    const status = obj.status as { phase?: string } | undefined;
    if (phase !== "ADDED" || status?.phase === "Terminating") return;
    const created = new Date(obj.metadata?.creationTimestamp ?? NaN).getTime();
    if (!(Date.now() - created < NEW_NAMESPACE_WINDOW_MS)) return;
    const serviceAccount = this.options.serviceAccountFor?.(namespaceInfoOf(obj));
    if (!serviceAccount) return;
    this.inBackground(() =>
      this.ensureServiceAccount(name, serviceAccount, false).then(result => {
        if (result.state === "failed")
          this.log?.warn(
            { namespace: name, serviceAccount, error: result.reason },
            "could not create the ServiceAccount of a new namespace",
          );
        else
          this.log?.info(
            { namespace: name, serviceAccount, state: result.state },
            "ServiceAccount ensured",
          );
      }),
    );
  }

  /**
   * Reads the API server's /version (bounded by API_BUDGET_MS) into serverVersion; a failure is
   * logged and tried again later, a few times: until then "latest" is the newest policy known.
   * start() calls it (so do tests, which start no watch).
   */
  async readServerVersion(attempt = 1): Promise<void> {
    const read = this.options.readVersion ?? readVersionFromApi;
    try {
      const info = await withBudget(read(), API_BUDGET_MS, "reading the API server's /version");
      this.serverVersion = policyVersionOf(info);
      this.log?.info(
        { gitVersion: bounded(String(info?.gitVersion)), policyVersion: this.serverVersion },
        "API server version read: Pod Security latest is evaluated as its own",
      );
    } catch (e) {
      const retry = attempt < VERSION_READ_ATTEMPTS;
      this.log?.warn(
        { error: bounded(describeError(e)), attempt, retry },
        "could not read the API server's /version: Pod Security latest is evaluated as the newest policy known (set securityContext.clusterVersion)",
      );
      if (retry)
        setTimeout(() => void this.readServerVersion(attempt + 1), VERSION_RETRY_MS).unref();
    }
  }

  // Read by every action of every request: one NamespaceInfo per stored namespace object (a watch
  // event replaces the object, and with it the entry).
  private readonly namespaceInfos = new WeakMap<object, NamespaceInfo>();

  /**
   * Makes a namespace's mode, labels and annotations known before a request is judged: until the
   * watch has listed they are unknown, not "unlabelled" (a namespace labelled off or warn would be
   * enforced, its registry narrowing lost). Waits up to NAMESPACE_WAIT_MS for the list, else reads
   * that namespace once through the API (within API_BUDGET_MS). Never throws: a namespace that
   * cannot be read stays unknown, and is logged.
   */
  async settle(name: string): Promise<void> {
    // Until /version is known, "latest" is judged as the newest policy, stricter than the API
    // server's own PSA: the first requests wait for that read too (it needs no RBAC, and is quick).
    if (this.firstVersionRead && this.serverVersion === undefined)
      await waitAtMost(this.firstVersionRead, NAMESPACE_WAIT_MS);
    if (!name || this.namespaces.synced || this.readDirectly.has(name)) return;
    await waitAtMost(this.namespacesListed, NAMESPACE_WAIT_MS);
    if (this.namespaces.synced) return;
    const read = this.options.readNamespace ?? readNamespaceFromApi;
    try {
      const ns = await withBudget(read(name), API_BUDGET_MS, `reading namespace ${name}`);
      if (ns && !this.namespaces.synced) this.readDirectly.set(name, namespaceInfoOf(ns));
    } catch (e) {
      this.log?.warn(
        { namespace: name, error: describeError(e) },
        "namespace not known yet (the watch has not listed, and reading it failed): judged as unlabelled",
      );
    }
  }

  namespace(name: string): NamespaceInfo | undefined {
    if (!this.namespaces.synced) return this.readDirectly.get(name);
    const ns = this.namespaces.items.get(`/${name}`);
    if (!ns) return undefined;
    let info = this.namespaceInfos.get(ns);
    if (!info) this.namespaceInfos.set(ns, (info = namespaceInfoOf(ns as KubeObject)));
    return info;
  }

  resourceQuotas(namespace: string): V1ResourceQuota[] | undefined {
    // Quotas count as known only once LimitRanges are too: a template's pods get the LimitRange
    // defaults, and judging them without would wrongly say "must specify".
    return this.quotas.synced && this.limitRangeStore.synced
      ? this.quotas.inNamespace(namespace)
      : undefined;
  }

  limitRanges(namespace: string): V1LimitRange[] | undefined {
    return this.limitRangeStore.synced ? this.limitRangeStore.inNamespace(namespace) : undefined;
  }

  nodes(): V1Node[] | undefined {
    return this.nodeStore.synced ? this.nodeStore.all() : undefined;
  }

  resourceClaimTemplate(namespace: string, name: string): ClaimTemplateAsRead | null | undefined {
    return this.dra.resourceClaimTemplate(namespace, name);
  }

  deviceClass(name: string): DeviceClassAsRead | null | undefined {
    return this.dra.deviceClass(name);
  }

  deviceCapacity(): DeviceCapacity | undefined {
    return this.dra.deviceCapacity();
  }

  servingRuntimes(namespace: string): readonly KubeObject[] | undefined {
    return this.runtimes.servingRuntimes(namespace);
  }

  clusterServingRuntimes(): readonly KubeObject[] | undefined {
    return this.runtimes.clusterServingRuntimes();
  }

  serviceAccount(namespace: string, name: string): V1ServiceAccount | null | undefined {
    return this.accounts.get(namespace, name);
  }

  get exemptionsOwner(): string | undefined {
    return this.options.exemptionsOwner;
  }

  /**
   * Whether Exemptions can count: the Exemptions namespace is the install's own ("owned"), exists
   * without its label ("not-owned"), or does not exist ("absent"); undefined when not judged (no
   * owner or namespace configured) or before the namespaces are listed.
   */
  exemptionsNamespaceState(): ExemptionsNamespaceState | undefined {
    const { exemptionsNamespace: name, exemptionsOwner: owner } = this.options;
    if (!name || owner === undefined || !this.namespaces.synced) return undefined;
    const ns = this.namespace(name);
    if (!ns) return "absent";
    return exemptionsNamespaceOwned(ns, owner) ? "owned" : "not-owned";
  }

  private reportedExemptionsState?: ExemptionsNamespaceState;

  /** Logs the Exemptions namespace's state when it changes (the webhook refuses Exemptions there). */
  private reportExemptionsNamespace(): void {
    const state = this.exemptionsNamespaceState();
    if (state === undefined || state === this.reportedExemptionsState) return;
    this.reportedExemptionsState = state;
    const namespace = this.options.exemptionsNamespace!;
    const owner = this.options.exemptionsOwner!;
    if (state === "owned")
      this.log?.info(
        { namespace },
        `exemptions: namespace ${namespace} is the install's own: its Exemptions count`,
      );
    else if (state === "not-owned")
      this.log?.warn(
        { namespace },
        `exemptions: ${notOwnedReason(this.namespace(namespace), owner)}, and new ones there are refused. Fix: ${notOwnedFix(namespace, owner)}`,
      );
    else
      this.log?.warn(
        { namespace },
        `exemptions: namespace ${namespace} does not exist, so no Exemption counts. Fix: create it as docs/exemptions.md says (with the label ${OWNED_BY_LABEL}=${owner})`,
      );
  }

  exemptions(): readonly KubeObject[] | undefined {
    const { exemptionsNamespace, exemptionsOwner } = this.options;
    if (
      exemptionsOwner !== undefined &&
      !exemptionsNamespaceOwned(this.namespace(exemptionsNamespace ?? ""), exemptionsOwner)
    )
      return undefined;
    return this.exemptionStore?.synced ? (this.exemptionStore.all() as KubeObject[]) : undefined;
  }

  ensureServiceAccount(namespace: string, name: string, dryRun: boolean): Promise<EnsureResult> {
    return this.accounts.ensure(namespace, name, dryRun);
  }

  secretAccess(
    namespace: string,
    serviceAccount: string,
    secrets: string[],
    deadline?: number,
  ): Promise<SecretAccess | undefined> {
    return this.accessReviews.secretAccess(namespace, serviceAccount, secrets, deadline);
  }

  async imageConfigs(
    refs: ImageRef[],
    platform: Platform,
    pullSecrets?: PullSecrets,
    deadline?: number,
  ): Promise<Map<string, ImageLookup>> {
    const images = this.options.images;
    if (!images || !pullSecrets?.names.length)
      return imageConfigsVia(images, refs, platform, "images.inspect is off", deadline);
    const names = [...new Set(pullSecrets.names)];
    if (names.length > MAX_PULL_SECRETS_PER_POD)
      this.log?.warn(
        { namespace: pullSecrets.namespace, secrets: names.length },
        `images.workloadPullSecrets: a pod names ${names.length} pull Secrets; the first ${MAX_PULL_SECRETS_PER_POD} are read, the others not`,
      );
    const read = names.slice(0, MAX_PULL_SECRETS_PER_POD);
    const tables = await Promise.all(
      read.map(name => this.pullSecretCredentials(pullSecrets.namespace, name, deadline)),
    );
    // The first Secret naming a registry wins, as the kubelet tries them in order.
    const get = (registry: string) => tables.find(t => t.has(registry))?.get(registry);
    return images.inspect(refs, platform, {
      deadline,
      own: { source: `${pullSecrets.namespace}/${read.join(",")}`, get },
    });
  }

  /** Credentials of pull Secrets read lately (only those: never the Secret objects). */
  private readonly pullSecrets = new Map<
    string,
    { table: Promise<Map<string, RegistryCredentials>>; expires: number }
  >();

  /**
   * A pod's pull Secret's credentials, read through the API (bounded by the request's deadline,
   * cached a minute, one read at a time per Secret); empty when it cannot be read.
   */
  private pullSecretCredentials(
    namespace: string,
    name: string,
    deadline = Date.now() + API_BUDGET_MS,
  ): Promise<Map<string, RegistryCredentials>> {
    const key = `${namespace}/${name}`;
    const cached = this.pullSecrets.get(key);
    if (cached && cached.expires > Date.now()) return cached.table;
    const read = this.options.readSecret ?? readSecretFromApi;
    const budget = Math.max(0, Math.min(API_BUDGET_MS, deadline - Date.now()));
    const table = withBudget(read(namespace, name), budget, `reading Secret ${key}`).then(
      secret => boundedCredentials(credentialsOfSecrets(secret ? [secret] : []).table),
      e => {
        this.log?.warn(
          { secret: bounded(key), error: bounded(describeError(e)) },
          "images.workloadPullSecrets: a pod's pull Secret could not be read; its registry is read without it",
        );
        return new Map<string, RegistryCredentials>();
      },
    );
    this.pullSecrets.set(key, { table, expires: Date.now() + PULL_SECRET_TTL_MS });
    if (this.pullSecrets.size > MAX_PULL_SECRETS_CACHED)
      this.pullSecrets.delete(this.pullSecrets.keys().next().value!);
    return table;
  }
}

/** A Secret's credentials as kept: a few registries, each of a bounded size. */
function boundedCredentials(
  table: Map<string, RegistryCredentials>,
): Map<string, RegistryCredentials> {
  const kept = new Map<string, RegistryCredentials>();
  for (const [registry, c] of table) {
    if (kept.size >= MAX_REGISTRIES_PER_SECRET) break;
    if (registry.length + c.username.length + c.password.length <= MAX_CREDENTIAL_BYTES)
      kept.set(registry, c);
  }
  return kept;
}

/** Resolves when `promise` does or after `ms`, whichever comes first (never rejects). */
async function waitAtMost(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    promise.catch(() => undefined),
    new Promise<void>(done => (timer = setTimeout(done, ms))),
  ]);
  clearTimeout(timer);
}

async function readNamespaceFromApi(name: string): Promise<KubeObject | undefined> {
  return (await K8s(kind.Namespace).Get(name)) as KubeObject;
}

async function readVersionFromApi(): Promise<ServerVersionInfo> {
  // /version is readable by everyone (system:public-info-viewer): no RBAC rule needed.
  return (await K8s(kind.Namespace).Raw("/version")) as ServerVersionInfo;
}

async function readSecretFromApi(namespace: string, name: string): Promise<KubeObject | undefined> {
  return (await K8s(kind.Secret).InNamespace(namespace).Get(name)) as KubeObject;
}
