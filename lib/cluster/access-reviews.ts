// May a ServiceAccount get these secrets? SubjectAccessReviews, bounded in flight and by deadline,
// answers cached a while. Why: docs/adr/0015-secret-access-warns-with-bounded-reviews.md
import { K8s, kind } from "kubernetes-fluent-client";
import {
  API_BUDGET_MS,
  BudgetExceeded,
  CALL,
  CallSlots,
  describeError,
  withBudget,
} from "./api-calls";
import { budgetExhausted, recordApiCall, recordSkipped } from "../metrics";
import { serviceAccountUser, type SecretAccess } from "./rbac";
import type { Logger } from "./watched-store";

/** How long an access review's "allowed" is reused. */
export const ANSWER_TTL_MS = 30_000;
/** How long a "not allowed" is reused. */
export const DENIED_ANSWER_TTL_MS = 3_000;
/** Most answers kept. */
export const MAX_ANSWERS = 10_000;
/** Reviews in flight for one question (one pod, one role of a workload). */
export const REVIEWS_PER_REQUEST = 4;
/** Reviews in flight in the whole process, every request together. */
export const MAX_REVIEWS_IN_FLIGHT = 16;

const slots = new CallSlots(MAX_REVIEWS_IN_FLIGHT);

export class AccessReviews {
  private readonly answers = new Map<string, { allowed: boolean; expires: number }>();

  constructor(private readonly log?: Logger) {}

  /** How many answers are kept (for tests). */
  get size(): number {
    return this.answers.size;
  }

  private remember(key: string, allowed: boolean, now: number): void {
    this.answers.delete(key); // re-inserted last: the oldest are first in the map
    this.answers.set(key, {
      allowed,
      expires: now + (allowed ? ANSWER_TTL_MS : DENIED_ANSWER_TTL_MS),
    });
    while (this.answers.size > MAX_ANSWERS) {
      const oldest = this.answers.keys().next().value as string;
      this.answers.delete(oldest);
    }
  }

  async secretAccess(
    namespace: string,
    serviceAccount: string,
    secrets: string[],
    deadline = Date.now() + API_BUDGET_MS,
  ): Promise<SecretAccess | undefined> {
    const now = Date.now();
    const allowed = new Map<string, boolean>();
    const ask: string[] = [];
    for (const secret of new Set(secrets)) {
      const cached = this.answers.get(`${namespace}/${serviceAccount}/${secret}`);
      if (cached && cached.expires > now) allowed.set(secret, cached.allowed);
      else ask.push(secret);
    }
    /** The next secret to ask about: those before it were asked (started), the rest not. */
    let next = 0;
    let failed = 0;
    /** A review that started and ran out of time at the deadline. */
    let cut = false;
    let lastError: unknown;
    const worker = async () => {
      // A review cut by the deadline (`cut`) says it has come, even a millisecond before the clock.
      while (!cut && next < ask.length && Date.now() < deadline) {
        const release = await slots.acquire(deadline);
        if (!release) return;
        // Another worker may have taken the last secret, or the deadline passed, meanwhile.
        if (cut || next >= ask.length || Date.now() >= deadline) return release();
        const secret = ask[next++];
        const begun = Date.now();
        try {
          const ok = await withBudget(
            this.review(namespace, serviceAccount, secret),
            deadline - Date.now(),
            `access review for ServiceAccount ${namespace}/${serviceAccount}`,
          );
          recordApiCall(CALL.accessReview, "ok", begun);
          allowed.set(secret, ok);
          this.remember(`${namespace}/${serviceAccount}/${secret}`, ok, now);
        } catch (e) {
          recordApiCall(CALL.accessReview, "error", begun);
          if (e instanceof BudgetExceeded || Date.now() >= deadline) cut = true;
          failed++;
          lastError = e;
        } finally {
          release();
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(REVIEWS_PER_REQUEST, ask.length) }, worker));
    // Every review not started was left out by the deadline (the loop, a slot's wait, the check).
    const notStarted = ask.length - next;
    recordSkipped(CALL.accessReview, notStarted);
    if (notStarted || cut) budgetExhausted.inc({ what: "access-review" });
    if (failed || notStarted)
      this.log?.warn(
        {
          error: lastError === undefined ? undefined : describeError(lastError),
          failed,
          notStarted,
          asked: ask.length,
        },
        "access reviews not all answered",
      );
    return { allowed };
  }

  private async review(namespace: string, serviceAccount: string, secret: string) {
    const answer = await K8s(kind.SubjectAccessReview).Create({
      apiVersion: "authorization.k8s.io/v1",
      kind: "SubjectAccessReview",
      spec: {
        ...serviceAccountUser(namespace, serviceAccount),
        resourceAttributes: { namespace, verb: "get", resource: "secrets", name: secret },
      },
    } as kind.SubjectAccessReview);
    return answer?.status?.allowed === true;
  }
}
