// Calls to the API server on the admission path: bounded in time (a request may not wait on the
// API server longer than API_BUDGET_MS, well under the webhook timeout) and failing with a reason
// an operator can act on.

/** Longest a request may wait on the API server; the webhook timeout (package.json) is 10 s. */
export const API_BUDGET_MS = 3000;

/** The calls' names on /metrics (admission_guard_api_calls_total's `call`). */
export const CALL = {
  accessReview: "subjectaccessreview",
  serviceAccountCreate: "serviceaccount-create",
} as const;

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

/**
 * A call given up at its budget (withBudget): cut by the request's deadline, not answered. Told by
 * its class, not by the clock: a timer may fire a millisecond before Date.now() reaches the deadline.
 */
export class BudgetExceeded extends Error {}

/** Rejects after ms with a clear message; the API call itself is left to finish or fail. */
export function withBudget<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new BudgetExceeded(`${what}: no answer from the API server within ${ms} ms`)),
      ms,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * At most `max` calls in flight, process-wide. A caller waits for a slot until its deadline and
 * then gives up (undefined), so waiting is bounded in time and never outlives the request.
 */
export class CallSlots {
  private used = 0;
  private readonly waiting = new Set<() => void>();

  constructor(readonly max: number) {}

  /** Calls in flight now (for tests and metrics). */
  get inFlight(): number {
    return this.used;
  }

  /** A release function once a slot is free, or undefined when the deadline (epoch ms) came first. */
  acquire(deadline: number): Promise<(() => void) | undefined> {
    if (this.used < this.max) return Promise.resolve(this.take());
    const ms = deadline - Date.now();
    if (ms <= 0) return Promise.resolve(undefined);
    return new Promise(resolve => {
      const wake = () => {
        clearTimeout(timer);
        this.waiting.delete(wake);
        resolve(this.take());
      };
      const timer = setTimeout(() => {
        this.waiting.delete(wake);
        resolve(undefined);
      }, ms);
      this.waiting.add(wake);
    });
  }

  private take(): () => void {
    this.used++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.used--;
      // The longest waiter first (a Set iterates in insertion order).
      const next = this.waiting.values().next();
      if (!next.done) next.value();
    };
  }
}
