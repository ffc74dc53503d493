// May a ServiceAccount get these secrets? Asked of the API server with SubjectAccessReviews, one per
// secret, all in flight at once (one round-trip per pod), bounded by API_BUDGET_MS. Answers are
// reused a while: "allowed" for ANSWER_TTL_MS, "not allowed" only for DENIED_ANSWER_TTL_MS (a denial
// tells the user to grant access and try again, and RBAC changes take effect at once). The cache
// holds at most MAX_ANSWERS entries, the oldest dropped first: namespaces × accounts × secrets
// must not grow the controller's memory without bound.
import { K8s, kind } from "kubernetes-fluent-client";
import { API_BUDGET_MS, describeError, withBudget } from "./api-calls";
import type { SecretAccess } from "./rbac";
import type { Logger } from "./watched-store";

/** How long an access review's "allowed" is reused. */
export const ANSWER_TTL_MS = 30_000;
/** How long a "not allowed" is reused. */
export const DENIED_ANSWER_TTL_MS = 3_000;
/** Most answers kept. */
export const MAX_ANSWERS = 10_000;

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
  ): Promise<SecretAccess | undefined> {
    const now = Date.now();
    const allowed = new Map<string, boolean>();
    const ask: string[] = [];
    for (const secret of new Set(secrets)) {
      const cached = this.answers.get(`${namespace}/${serviceAccount}/${secret}`);
      if (cached && cached.expires > now) allowed.set(secret, cached.allowed);
      else ask.push(secret);
    }
    if (!ask.length) return { allowed };
    try {
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
        this.remember(`${namespace}/${serviceAccount}/${secret}`, ok, now);
      });
      return { allowed };
    } catch (e) {
      this.log?.warn({ error: describeError(e) }, "access review failed");
      return undefined;
    }
  }
}
