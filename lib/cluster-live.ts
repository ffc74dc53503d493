// The live cluster view used by the webhook. Everything a rule reads on the admission path comes
// from caches that watches keep up to date in the admission process itself, so no request waits on
// the API server. The only calls made during a request are the ones that must be (create a missing
// ServiceAccount, ask a SubjectAccessReview), each bounded by API_BUDGET_MS, well under the webhook
// timeout; access answers are cached briefly.
//
// ServiceAccounts are known from a watch, never from memory of having made them: an account deleted
// by an admin or a GitOps prune is missing from the cache at once, and the next pod that needs it
// creates it again before it is moved there (the API server refuses a pod whose account does not
// exist, after the mutating webhooks).
//
// Staleness: a watch event reaches the cache typically within milliseconds; kubernetes-fluent-client
// re-lists every 10 minutes and reconnects on errors. Before the first list completes, a kind has
// "no data" (undefined), which rules treat as "not checked", never as "none exist".
import { K8s, kind, type GenericClass, type KubernetesObject } from "kubernetes-fluent-client";
import { WatchEvent } from "kubernetes-fluent-client/dist/fluent/watch.js";
import type {
  V1LimitRange,
  V1Node,
  V1ResourceQuota,
  V1ServiceAccount,
} from "@kubernetes/client-node";
import {
  namespaceInfoOf,
  type ClusterView,
  type EnsureResult,
  type NamespaceInfo,
  type SecretAccess,
} from "./cluster";
import type { KubeObject } from "./pod";

/** Longest a request may wait on the API server; the webhook timeout (package.json) is 10 s. */
export const API_BUDGET_MS = 3000;
/** How long an access review's "allowed" is reused. */
export const ANSWER_TTL_MS = 30_000;
/**
 * How long a "not allowed" is reused: short, because the denial tells the user to grant access and
 * try again, and RBAC changes take effect at once in the API server.
 */
export const DENIED_ANSWER_TTL_MS = 3_000;
/**
 * How long a ServiceAccount this process created counts as existing before its watch shows it (the
 * watch event normally comes within milliseconds; a watch that is down must not hide it for long).
 */
export const CREATED_GRACE_MS = 10_000;
/** A namespace created less than this long ago counts as new: it gets its ServiceAccount at once. */
export const NEW_NAMESPACE_WINDOW_MS = 5 * 60_000;
/** ServiceAccounts of new namespaces created at most this many at a time. */
export const BACKGROUND_CONCURRENCY = 4;

export interface LiveClusterOptions {
  /**
   * The ServiceAccount to create in a namespace that appears (undefined: none). Pods ensure theirs
   * anyway; creating it with the namespace takes that API call off the first pod's admission.
   */
  serviceAccountFor?: (ns: NamespaceInfo) => string | undefined;
}

type Logger = { info: (o: object, m: string) => void; warn: (o: object, m: string) => void };

/** Objects of one kind kept up to date by a watch; keyed "namespace/name". */
export class WatchedStore<T extends KubernetesObject> {
  readonly items = new Map<string, T>();
  /** true once the first list has completed. */
  synced = false;
  /** Last error of the watch, cleared by the next successful list. */
  lastError?: string;
  /** Called after each event is applied (e.g. to act when a namespace appears). */
  readonly listeners: ((obj: T, phase: string) => void)[] = [];

  constructor(
    private readonly model: GenericClass,
    private readonly what: string,
    private readonly log?: Logger,
    /** What is kept of each object (default: all of it): caches of many objects keep what rules read. */
    private readonly keep: (obj: T) => T = obj => obj,
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
    const watcher = K8s<GenericClass, T>(this.model).Watch((obj, phase) => this.apply(obj, phase), {
      resyncDelaySec: 2,
    });
    watcher.events.on(WatchEvent.LIST, () => {
      this.synced = true;
      this.lastError = undefined;
    });
    for (const ev of [WatchEvent.LIST_ERROR, WatchEvent.NETWORK_ERROR, WatchEvent.GIVE_UP]) {
      watcher.events.on(ev, (err: unknown) => {
        this.lastError = describeError(err);
        this.log?.warn({ what: this.what, error: this.lastError }, "cluster cache: watch error");
      });
    }
    await watcher.start();
  }

  inNamespace(namespace: string): T[] {
    const inNs = this.byNamespace.get(namespace);
    return inNs ? [...inNs.values()] : [];
  }
}

/**
 * What went wrong, said once. "fetch failed" says nothing: add the cause (ECONNREFUSED, a TLS error,
 * a timeout). kubernetes-fluent-client throws the failed response itself, not an Error:
 * `{ status, statusText, data }` with the API server's Status in `data` (its message says e.g.
 * which permission is missing), or with the transport error in `e`.
 */
export function describeError(err: unknown): string {
  if (!(err instanceof Error)) {
    if (typeof err !== "object" || err === null || !("status" in err)) return String(err);
    const { status, statusText, data, e } = err as Record<string, unknown>;
    if (e instanceof Error) return describeError(e);
    const message =
      typeof data === "string"
        ? data
        : typeof (data as { message?: unknown })?.message === "string"
          ? (data as { message: string }).message
          : "";
    // A proxy's HTML error page must not flood a denial message.
    const said = message.length > 500 ? `${message.slice(0, 500)}...` : message;
    return `HTTP ${status}${statusText ? ` ${statusText}` : ""}${said ? `: ${said}` : ""}`;
  }
  const cause = (err as Error & { cause?: unknown }).cause;
  if (cause instanceof Error) {
    const code = (cause as Error & { code?: string }).code;
    return `${err.message}: ${code ? `${code} ` : ""}${cause.message}`;
  }
  // A failed watch list says `list failed: 403 Forbidden [["audit-id","..."],...]`: the response
  // headers say nothing to an operator.
  return err.message.replace(/ \[\[".*$/s, "");
}

/** Rejects after ms with a clear message; the API call itself is left to finish or fail. */
export function withBudget<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what}: no answer from the API server within ${ms} ms`)),
      ms,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export class LiveCluster implements ClusterView {
  readonly source = "live" as const;
  readonly namespaces: WatchedStore<KubernetesObject>;
  readonly quotas: WatchedStore<V1ResourceQuota & KubernetesObject>;
  readonly limitRangeStore: WatchedStore<V1LimitRange & KubernetesObject>;
  readonly nodeStore: WatchedStore<V1Node & KubernetesObject>;
  readonly serviceAccounts: WatchedStore<V1ServiceAccount & KubernetesObject>;
  /** ServiceAccounts this process created that the watch has not shown yet: "ns/name" → until. */
  private readonly justCreated = new Map<string, number>();
  /** Creations in flight: pods of one namespace admitted at once share one API call. */
  private readonly creating = new Map<string, Promise<EnsureResult>>();
  private readonly accessAnswers = new Map<string, { allowed: boolean; expires: number }>();

  constructor(
    private readonly log?: Logger,
    private readonly options: LiveClusterOptions = {},
  ) {
    this.namespaces = new WatchedStore(kind.Namespace, "namespaces", log);
    this.namespaces.listeners.push((ns, phase) => this.onNamespaceEvent(ns as KubeObject, phase));
    this.quotas = new WatchedStore(kind.ResourceQuota, "resourcequotas", log);
    this.limitRangeStore = new WatchedStore(kind.LimitRange, "limitranges", log);
    this.nodeStore = new WatchedStore(kind.Node, "nodes", log);
    // Only names are read: a cluster's every ServiceAccount, kept small.
    this.serviceAccounts = new WatchedStore(kind.ServiceAccount, "serviceaccounts", log, sa => ({
      metadata: { namespace: sa.metadata?.namespace, name: sa.metadata?.name },
    }));
    // Once the watch shows an account (or its deletion), the watch is what counts.
    this.serviceAccounts.listeners.push(sa => this.justCreated.delete(WatchedStore.key(sa)));
  }

  /** Starts every watch; failures are logged and retried by the watcher, never thrown. */
  start(): void {
    for (const store of [
      this.namespaces,
      this.quotas,
      this.limitRangeStore,
      this.nodeStore,
      this.serviceAccounts,
    ]) {
      store
        .start()
        .catch(e =>
          this.log?.warn({ error: describeError(e) }, "cluster cache: watch failed to start"),
        );
    }
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
    if (phase === "DELETED") {
      for (const key of [...this.justCreated.keys()])
        if (key.startsWith(`${name}/`)) this.justCreated.delete(key);
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

  namespace(name: string): NamespaceInfo | undefined {
    const ns = this.namespaces.items.get(`/${name}`);
    return ns ? namespaceInfoOf(ns as KubeObject) : undefined;
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

  serviceAccount(namespace: string, name: string): V1ServiceAccount | null | undefined {
    const key = `${namespace}/${name}`;
    const seen = this.serviceAccounts.items.get(key);
    if (seen) return seen;
    if ((this.justCreated.get(key) ?? 0) > Date.now()) return { metadata: { namespace, name } };
    return this.serviceAccounts.synced ? null : undefined;
  }

  async ensureServiceAccount(
    namespace: string,
    name: string,
    dryRun: boolean,
  ): Promise<EnsureResult> {
    if (this.serviceAccount(namespace, name)) return { state: "exists" };
    // A dry run has no side effects: the caller leaves the pod where it is.
    if (dryRun) return { state: "would-create" };
    const key = `${namespace}/${name}`;
    let creation = this.creating.get(key);
    if (!creation) {
      creation = this.createServiceAccount(namespace, name).finally(() =>
        this.creating.delete(key),
      );
      this.creating.set(key, creation);
    }
    return creation;
  }

  private async createServiceAccount(namespace: string, name: string): Promise<EnsureResult> {
    const key = `${namespace}/${name}`;
    try {
      // Server-side apply: creates it when missing, leaves an existing one as it is.
      await withBudget(
        K8s(kind.ServiceAccount).Apply(
          {
            metadata: {
              name,
              namespace,
              labels: { "app.kubernetes.io/managed-by": "admission-guard" },
            },
          },
          { force: false },
        ),
        API_BUDGET_MS,
        `creating ServiceAccount ${key}`,
      );
      if (!this.serviceAccounts.items.has(key))
        this.justCreated.set(key, Date.now() + CREATED_GRACE_MS);
      return { state: "created" };
    } catch (e) {
      return { state: "failed", reason: describeError(e) };
    }
  }

  async secretAccess(
    namespace: string,
    serviceAccount: string,
    secrets: string[],
  ): Promise<SecretAccess | undefined> {
    const now = Date.now();
    const allowed = new Map<string, boolean>();
    const ask: string[] = [];
    for (const secret of new Set(secrets)) {
      const cached = this.accessAnswers.get(`${namespace}/${serviceAccount}/${secret}`);
      if (cached && cached.expires > now) allowed.set(secret, cached.allowed);
      else ask.push(secret);
    }
    if (!ask.length) return { allowed };
    try {
      // One SubjectAccessReview per secret name, all in flight at once: one round-trip per pod.
      const answers = await withBudget(
        Promise.all(
          ask.map(secret =>
            K8s(kind.SubjectAccessReview).Create({
              apiVersion: "authorization.k8s.io/v1",
              kind: "SubjectAccessReview",
              spec: {
                user: `system:serviceaccount:${namespace}:${serviceAccount}`,
                groups: [
                  "system:serviceaccounts",
                  `system:serviceaccounts:${namespace}`,
                  "system:authenticated",
                ],
                resourceAttributes: { namespace, verb: "get", resource: "secrets", name: secret },
              },
            } as kind.SubjectAccessReview),
          ),
        ),
        API_BUDGET_MS,
        `access review for ServiceAccount ${namespace}/${serviceAccount}`,
      );
      ask.forEach((secret, i) => {
        const ok = answers[i]?.status?.allowed === true;
        allowed.set(secret, ok);
        this.accessAnswers.set(`${namespace}/${serviceAccount}/${secret}`, {
          allowed: ok,
          expires: now + (ok ? ANSWER_TTL_MS : DENIED_ANSWER_TTL_MS),
        });
      });
      return { allowed };
    } catch (e) {
      this.log?.warn({ error: describeError(e) }, "access review failed");
      return undefined;
    }
  }
}
