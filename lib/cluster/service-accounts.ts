// Which ServiceAccounts exist, known from a watch (names only: a cluster's every account, kept
// small), never from memory of having made them: an account deleted by an admin or a GitOps prune
// is missing at once, and the next pod that needs it creates it again before it is moved there
// (the API server refuses a pod whose account does not exist, after the mutating webhooks).
// Creating one is a server-side apply within the admission budget; pods admitted at once share it.
import { K8s, kind, type KubernetesObject } from "kubernetes-fluent-client";
import type { V1ServiceAccount } from "@kubernetes/client-node";
import { API_BUDGET_MS, CALL, describeError, withBudget } from "./api-calls";
import type { EnsureResult } from "./view";
import { recordApiCall } from "../metrics";
import { WatchedStore, type Logger } from "./watched-store";

/**
 * How long an account this process created counts as existing before its watch shows it (the
 * watch event normally comes within milliseconds; a watch that is down must not hide it for long).
 */
export const CREATED_GRACE_MS = 10_000;

/** ServiceAccounts: get() and ensure() read whether one exists, by namespace and name: nothing else kept. */
export function accountAsRead(
  sa: V1ServiceAccount & KubernetesObject,
): V1ServiceAccount & KubernetesObject {
  return { metadata: { namespace: sa.metadata?.namespace, name: sa.metadata?.name } };
}

export class ServiceAccounts {
  readonly store: WatchedStore<V1ServiceAccount & KubernetesObject>;
  /** Accounts this process created that the watch has not shown yet: "ns/name" → until. */
  private readonly justCreated = new Map<string, number>();
  /** Creations in flight: pods of one namespace admitted at once share one API call. */
  private readonly creating = new Map<string, Promise<EnsureResult>>();

  constructor(log?: Logger) {
    this.store = new WatchedStore(kind.ServiceAccount, "serviceaccounts", log, accountAsRead);
    // Once the watch shows an account (or its deletion), the watch is what counts.
    this.store.listeners.push(sa => this.justCreated.delete(WatchedStore.key(sa)));
  }

  /** The account; null when known not to exist; undefined before the watch has listed. */
  get(namespace: string, name: string): V1ServiceAccount | null | undefined {
    const key = `${namespace}/${name}`;
    const seen = this.store.items.get(key);
    if (seen) return seen;
    if ((this.justCreated.get(key) ?? 0) > Date.now()) return { metadata: { namespace, name } };
    return this.store.synced ? null : undefined;
  }

  async ensure(namespace: string, name: string, dryRun: boolean): Promise<EnsureResult> {
    if (this.get(namespace, name)) return { state: "exists" };
    // A dry run has no side effects: the caller leaves the pod where it is.
    if (dryRun) return { state: "would-create" };
    const key = `${namespace}/${name}`;
    let creation = this.creating.get(key);
    if (!creation) {
      creation = this.create(namespace, name).finally(() => this.creating.delete(key));
      this.creating.set(key, creation);
    }
    return creation;
  }

  /** A namespace was deleted: what this process remembers of its accounts goes with it. */
  forgetNamespace(namespace: string): void {
    for (const key of [...this.justCreated.keys()])
      if (key.startsWith(`${namespace}/`)) this.justCreated.delete(key);
  }

  private async create(namespace: string, name: string): Promise<EnsureResult> {
    const key = `${namespace}/${name}`;
    const begun = Date.now();
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
      recordApiCall(CALL.serviceAccountCreate, "ok", begun);
      if (!this.store.items.has(key)) this.justCreated.set(key, Date.now() + CREATED_GRACE_MS);
      return { state: "created" };
    } catch (e) {
      recordApiCall(CALL.serviceAccountCreate, "error", begun);
      return { state: "failed", reason: describeError(e) };
    }
  }
}
