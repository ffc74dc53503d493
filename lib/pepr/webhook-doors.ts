// The webhook port's doors: what a caller without the secret API path can make the controller
// spend. Pepr 1.1.4 reads and parses every body (up to our 8 MiB) before it looks at the path, and
// its server has no connection cap and Node's 300 s request timeout. Two start-up mends: the path
// and the method before a byte of the body, with a process-wide budget of body bytes; and bounds on
// the server Pepr makes. Why: docs/adr/0026-the-path-before-the-body.md
import https from "node:https";
import { pepr } from "../../package.json";
import { peprApiPath } from "./api-path";
import { WEBHOOK_BODY_LIMIT_BYTES, wrapPeprJson } from "./webhook-body-limit";

const MiB = 1024 * 1024;

/**
 * Body bytes of authenticated reviews being read or judged at once, process-wide. The API server
 * sends at most 3 MiB of object, and old object beside it on UPDATE: a review is ~6 MiB at worst,
 * a pod's a few KiB. 64 MiB holds ten worst-case reviews at once, or thousands of usual ones
 * (the webhook's concurrency is the API servers' in-flight mutating requests, 200 each by default),
 * and keeps what the parsed copies cost well inside the pod's 512Mi.
 */
export const BODY_BUDGET_BYTES = 64 * MiB;

/**
 * Open connections at once. Each API server keeps a connection per webhook call in flight (up to
 * its 200 in-flight mutating requests by default) and the Service spreads them over the replicas:
 * three API servers at full load are ~300 a replica, probes and scrapers a handful. A held TLS
 * connection that sent no body costs tens of KiB, so 1024 of them stay within ~60 MiB.
 */
export const MAX_CONNECTIONS = 1024;

/** The numbers the server is made with (milliseconds). */
export interface ServerBounds {
  /** Pepr ≥ 1.1.6's PEPR_KEEP_ALIVE_TIMEOUT_MS (90 s): an idle kept-alive connection closes. */
  keepAliveTimeout: number;
  /** Pepr ≥ 1.1.6's PEPR_HEADERS_TIMEOUT_MS (32 s): the headers must have arrived by then. */
  headersTimeout: number;
  /**
   * The whole request must have arrived by then: twice the headers' time (64 s by default), above
   * the webhook's longest timeoutSeconds (30 s, after which the API server gives up anyway) and
   * well below Node's 300 s. Derived, not a setting of its own, so that Pepr's one variable moves
   * both (and Node requires requestTimeout ≥ headersTimeout).
   */
  requestTimeout: number;
  /** The TLS handshake must be over within the headers' time, too (Node's default: 120 s). */
  handshakeTimeout: number;
  /** How often Node checks those timeouts (its default, 30 s, would let 32 s become 62 s). */
  connectionsCheckingInterval: number;
  maxConnections: number;
}

/** The bounds, from Pepr's variables where set (positive integers), else Pepr 1.1.6's defaults. */
export function serverBounds(env: NodeJS.ProcessEnv = process.env): ServerBounds {
  const ms = (name: string, fallback: number) => {
    const value = Number(env[name]);
    return Number.isInteger(value) && value > 0 ? value : fallback;
  };
  const headersTimeout = ms("PEPR_HEADERS_TIMEOUT_MS", 32_000);
  return {
    keepAliveTimeout: ms("PEPR_KEEP_ALIVE_TIMEOUT_MS", 90_000),
    headersTimeout,
    requestTimeout: 2 * headersTimeout,
    handshakeTimeout: headersTimeout,
    connectionsCheckingInterval: Math.min(1000, headersTimeout),
    maxConnections: MAX_CONNECTIONS,
  };
}

const BOUNDED = Symbol.for("admission-guard.server-bounds");
type CreateServer = typeof https.createServer & { [BOUNDED]?: true };
/** Whether a server was made with the bounds (Pepr makes its own when the module starts). */
let boundServers = 0;
export const webhookServerBounded = () => boundServers > 0;

/**
 * Makes the HTTPS server Pepr makes for its express app (its startServer:
 * `https.createServer(options, app).listen(port)`) with `bounds`. Only a server whose handler is
 * an express app is changed. Idempotent; false when `https.createServer` is not a function.
 */
export function boundWebhookServer(bounds: ServerBounds = serverBounds()): boolean {
  const create = https.createServer as CreateServer;
  if (typeof create !== "function") return false;
  if (create[BOUNDED]) return true;
  const bounded = function (this: unknown, ...args: unknown[]) {
    const [options, handler] = args as [
      https.ServerOptions,
      import("node:http").RequestListener & { handle?: unknown },
    ];
    if (typeof options !== "object" || typeof handler?.handle !== "function")
      return (create as (...a: unknown[]) => https.Server).apply(this, args);
    const { maxConnections, keepAliveTimeout, ...made } = bounds;
    const server = create({ ...options, ...made }, handler);
    server.keepAliveTimeout = keepAliveTimeout;
    // Past it, Node closes a new connection at once: refused, never queued.
    server.maxConnections = maxConnections;
    boundServers++;
    return server;
  } as CreateServer;
  bounded[BOUNDED] = true;
  https.createServer = bounded;
  return true;
}

interface DoorRequest {
  method?: string;
  path?: string;
  headers: Record<string, string | string[] | undefined>;
}
interface DoorResponse {
  statusCode: number;
  setHeader(name: string, value: string): void;
  end(body?: string): void;
  once(event: "close", listener: () => void): unknown;
}
type Middleware = (req: DoorRequest, res: DoorResponse, next: (err?: unknown) => void) => void;

/** Whether express would hand the request to Pepr's review handler with the secret path. */
export function isReview(req: DoorRequest, apiPath: string | undefined): boolean {
  if (!apiPath || req.method !== "POST" || !req.path) return false;
  // As express routes /mutate/:path: any case, an optional trailing slash, the segment decoded.
  const match = /^\/(?:mutate|validate)\/([^/]+)\/?$/i.exec(req.path);
  if (!match) return false;
  try {
    return decodeURIComponent(match[1]) === apiPath;
  } catch {
    return false;
  }
}

/** The body's declared length; undefined when none is declared (chunked), 0 when there is none. */
function declaredLength(req: DoorRequest): number | undefined {
  const length = req.headers["content-length"];
  if (typeof length === "string" && /^\d+$/.test(length)) return Number(length);
  return req.headers["transfer-encoding"] === undefined ? 0 : undefined;
}

/**
 * An answer to a request whose body is left unread: the connection closes once it is sent (Node
 * then destroys the socket) instead of Node reading megabytes to keep it alive.
 */
function closeAfter(res: DoorResponse): void {
  res.setHeader("Connection", "close");
}

/** A refusal the API server shows as the webhook's error (a Status, as client-go decodes one). */
function refuse(res: DoorResponse, code: 413 | 429, message: string): void {
  closeAfter(res);
  res.statusCode = code;
  res.setHeader("Content-Type", "application/json");
  if (code === 429) res.setHeader("Retry-After", "1");
  res.end(
    JSON.stringify({
      kind: "Status",
      apiVersion: "v1",
      status: "Failure",
      reason: code === 413 ? "RequestEntityTooLarge" : "TooManyRequests",
      code,
      message,
    }),
  );
}

const mib = (bytes: number) => `${(bytes / MiB).toFixed(1)} MiB`;

/**
 * Only a review on Pepr's API path reaches the JSON parser: any other request (a wrong path, a
 * wrong method, /healthz, /metrics) goes on to Pepr's routes unread, and when it carries a body its
 * connection closes after the answer (Pepr's 401 or 404). A review reserves its declared length
 * (8 MiB when chunked) from `budget` until its answer is sent or its connection gone; past the
 * budget, or past the body limit, it is refused at once, unread. Wraps the parser Pepr installs for
 * every request (as the metrics and the drain do, which stay outside it). Idempotent.
 */
export function installPathBeforeBody(
  apiPath: string | undefined = process.env.PEPR_WATCH_MODE === "true" ? undefined : peprApiPath(),
  budget: number = BODY_BUDGET_BYTES,
): boolean {
  let inFlight = 0;
  return wrapPeprJson(
    original => options => {
      const parse = original(options) as Middleware;
      const middleware: Middleware = (req, res, next) => {
        const length = declaredLength(req);
        if (!isReview(req, apiPath)) {
          if (length !== 0) closeAfter(res);
          return next();
        }
        const reserved = length ?? WEBHOOK_BODY_LIMIT_BYTES;
        if (reserved > WEBHOOK_BODY_LIMIT_BYTES)
          return refuse(
            res,
            413,
            `admission-guard/webhook/body-limit: the review's body is ${mib(reserved)}, over the ${mib(WEBHOOK_BODY_LIMIT_BYTES)} any review of the API server fits in; refused unread. Fix: send reviews as the API server does (at most 3 MiB of object and as much of old object)`,
          );
        if (inFlight + reserved > budget)
          return refuse(
            res,
            429,
            `admission-guard/webhook/body-budget: ${mib(inFlight)} of reviews are being read already, and this one's ${mib(reserved)} would pass the ${mib(budget)} the controller reads at once; refused unread. Fix: retry; if it repeats, add replicas: kubectl scale deployment pepr-${pepr.uuid} -n pepr-system --replicas=3`,
          );
        inFlight += reserved;
        res.once("close", () => (inFlight -= reserved));
        parse(req, res, next);
      };
      return middleware;
    },
    "path-before-body",
  );
}
