// Pepr glue for the metrics: our registry served on Pepr's /metrics, and every admission review
// timed and counted where it enters Pepr's server. Pepr 1.1.4's collector keeps its prom-client
// registry private and offers label-less counters only, so /metrics answers Pepr's series and then
// ours; and its own pepr_mutate/pepr_validate summaries stay at 0, so we measure the review here.
import { collectDefaultMetrics } from "prom-client";
import { metricsCollector } from "pepr";
import { peprApiPath } from "./api-path";
import { wrapPeprJson } from "./webhook-body-limit";
import { recordReview, registry } from "../metrics";

const SERVED = Symbol.for("admission-guard.metrics-served");

interface Collector {
  getMetrics: (() => Promise<string>) & { [SERVED]?: true };
}

/**
 * Appends our registry (and Node's process metrics) to what Pepr's collector answers on /metrics.
 * Idempotent; false when the collector has no getMetrics to extend.
 */
export function serveWithPepr(collector: Collector = metricsCollector as Collector): boolean {
  const pepr = collector.getMetrics;
  if (typeof pepr !== "function") return false;
  if (pepr[SERVED]) return true;
  collectDefaultMetrics({ register: registry });
  const both = Object.assign(async () => `${await pepr()}\n${await registry.metrics()}`, {
    [SERVED]: true as const,
  });
  collector.getMetrics = both;
  return true;
}

interface ReviewRequest {
  method?: string;
  path?: string;
  body?: { request?: { kind?: { kind?: unknown }; operation?: unknown } };
}
interface ReviewResponse {
  statusCode: number;
  writableFinished: boolean;
  send: (body?: unknown) => unknown;
  on(event: "close", listener: () => void): unknown;
}
type Middleware = (req: ReviewRequest, res: ReviewResponse, next: (err?: unknown) => void) => void;

/** Which step a request is, from Pepr's routes (/mutate/<api path>, /validate/<api path>). */
function stepOf(req: ReviewRequest): "mutate" | "validate" | undefined {
  if (req.method !== "POST" || !req.path) return undefined;
  if (req.path.startsWith("/mutate/")) return "mutate";
  if (req.path.startsWith("/validate/")) return "validate";
  return undefined;
}

/** What the review's answer says: the AdmissionReview Pepr sends, or none (an error page). */
export function outcomeOf(
  step: "mutate" | "validate",
  status: number,
  answer: { allowed?: unknown; patch?: unknown } | undefined,
): string {
  if (status === 401) return "unauthorized";
  if (status >= 400 || !answer) return "error";
  if (answer.allowed === false) return "denied";
  return step === "mutate" && answer.patch ? "patched" : "allowed";
}

/**
 * Times and counts every admission review, from before its body is parsed to its answer sent (or
 * the connection closed: a review the API server gave up on counts as an error), by wrapping the
 * middleware of Pepr's `express.json` (as the drain does). Only a request on Pepr's API path (or
 * one Pepr answered with a review) is a review: anything else is `unauthorized`, whatever its
 * status (401, or 404, 400 and 413 before Pepr looked at the path), its made-up kind never a label
 * and its time not in the review histogram.
 */
export function installReviewMetrics(apiPath: string | undefined = peprApiPath()): boolean {
  const accepted = new Set(apiPath ? [`/mutate/${apiPath}`, `/validate/${apiPath}`] : []);
  return wrapPeprJson(
    original => options => {
      const parse = original(options) as Middleware;
      const middleware: Middleware = (req, res, next) => {
        const step = stepOf(req);
        if (!step) return parse(req, res, next);
        const start = process.hrtime.bigint();
        let answer: { allowed?: unknown; patch?: unknown } | undefined;
        const send = res.send;
        // Pepr answers with res.send(review object); express then sends its JSON text.
        res.send = function (this: unknown, body?: unknown) {
          if (!answer && body && typeof body === "object")
            answer = (body as { response?: typeof answer }).response ?? {};
          return send.call(this, body);
        };
        res.on("close", () => {
          const review = accepted.has(req.path ?? "") || answer !== undefined;
          const outcome = !review
            ? "unauthorized"
            : res.writableFinished
              ? outcomeOf(step, res.statusCode, answer)
              : "error";
          const request = review ? req.body?.request : undefined;
          recordReview(step, {
            kind: request?.kind?.kind,
            operation: request?.operation,
            outcome,
            seconds: Number(process.hrtime.bigint() - start) / 1e9,
          });
        });
        parse(req, res, next);
      };
      return middleware;
    },
    "metrics",
  );
}
