// Raises the body limit of Pepr's webhook server at start-up, so an oversize object gets our
// payload-size denial instead of an HTTP 413. Why: docs/adr/0013-mend-pepr-at-start-up.md
import { isIPv4 } from "node:net";
import { fromPepr } from "./from-pepr";

/** Enough for any review the API server can send: 3 MiB new object + stored object + envelope. */
export const WEBHOOK_BODY_LIMIT = "8mb";
/** The same in bytes (express reads "8mb" as 8 × 1024 × 1024). */
export const WEBHOOK_BODY_LIMIT_BYTES = 8 * 1024 * 1024;

const WRAPPED = Symbol.for("admission-guard.body-limit");

/** express.json; WRAPPED lists the wraps applied (a second call with the same tag changes nothing). */
type JsonFactory = ((options?: Record<string, unknown>) => unknown) & { [WRAPPED]?: string };

/**
 * Makes every later `express.json(...)` of Pepr's express use `limit`. Idempotent. Returns false
 * (and changes nothing) when Pepr's express cannot be found, e.g. in a future Pepr without it.
 */
export function raiseWebhookBodyLimit(limit: string = WEBHOOK_BODY_LIMIT): boolean {
  return wrapPeprJson(original => options => original({ ...options, limit }), limit);
}

type Middleware = (req: DrainRequest, res: DrainResponse, next: (err?: unknown) => void) => void;
interface DrainRequest {
  method?: string;
  path?: string;
  socket?: { remoteAddress?: string };
}
interface DrainResponse {
  setHeader(name: string, value: string): void;
  statusCode: number;
  end(body?: string): void;
}

/** The path the admission pods' preStop hook calls (the build overlay, scripts/overlay/entries.ts). */
export const DRAIN_PATH = "/admission-guard/drain";
/** How long a draining pod keeps answering, telling each client to close its connection. */
export const DRAIN_MS = 5000;

/**
 * Whether a connection comes from inside the pod: 127.0.0.0/8, ::1, or 127.x mapped into IPv6.
 * The preStop hook is an `exec` in the controller's container, so it calls from loopback; another
 * pod, the API server or a node never does. An address in any other form counts as remote.
 */
export function isLoopbackPeer(address: string | undefined): boolean {
  if (!address) return false;
  const lower = address.toLowerCase();
  if (lower === "::1") return true;
  const v4 = lower.startsWith("::ffff:") ? lower.slice("::ffff:".length) : lower;
  return isIPv4(v4) && v4.startsWith("127.");
}

/**
 * Graceful stop for the admission pods: the preStop hook's GET of DRAIN_PATH starts draining
 * (every answer from then on carries `Connection: close`, so the API server opens new connections,
 * to the Service's other endpoints, instead of reusing this pod's) and returns after DRAIN_MS; only
 * then does the kubelet send SIGTERM, on which Pepr closes its server. Without it a request sent on
 * a kept-alive connection as Pepr closes it fails (`EOF`), and with failurePolicy Fail the pod
 * creation is refused: measured once in ~550 during a `kubectl rollout restart` on the node tier.
 * Wraps the middleware of Pepr's `express.json`, which Pepr installs for every request.
 *
 * The drain is a switch nobody authenticates, so only a loopback peer reaches it: from anywhere
 * else the path is unknown (Pepr answers 404) and nothing changes. Only the first call waits:
 * a repeat answers at once, so no caller holds sockets open by calling again.
 */
export function installGracefulDrain(drainMs: number = DRAIN_MS): boolean {
  let draining = false;
  return wrapPeprJson(
    original => options => {
      const parse = original(options) as Middleware;
      const middleware: Middleware = (req, res, next) => {
        if (
          req.method === "GET" &&
          req.path === DRAIN_PATH &&
          isLoopbackPeer(req.socket?.remoteAddress)
        ) {
          res.setHeader("Connection", "close");
          if (draining) {
            res.statusCode = 200;
            res.end("already draining");
            return;
          }
          draining = true;
          setTimeout(() => {
            res.statusCode = 200;
            res.end("drained");
          }, drainMs);
          return;
        }
        if (draining) res.setHeader("Connection", "close");
        parse(req, res, next);
      };
      return middleware;
    },
    "drain",
  );
}

interface PeprExpress {
  json?: JsonFactory;
  application?: { defaultConfiguration?: AppSetup & { [WRAPPED]?: string } };
}
type AppSetup = (this: { set(name: string, value: unknown): unknown }) => void;

/** The express instance Pepr loads; undefined where there is none. */
const peprExpress = () => fromPepr<PeprExpress>("express");

/**
 * Pepr's webhook server answers without an ETag and without `X-Powered-By`: an admission answer is
 * never cached or revalidated, and express would hash every answer (a SHA-1 of up to a few KiB of
 * denial and warnings) to make one. Applies to the express apps made afterwards (Pepr makes its
 * server at `new PeprModule`). Idempotent; false when Pepr's express has no app set-up to extend.
 */
export function installPlainAnswers(): boolean {
  const app = peprExpress()?.application;
  const setup = app?.defaultConfiguration;
  if (!app || typeof setup !== "function") return false;
  if (setup[WRAPPED]) return true;
  const plain: AppSetup & { [WRAPPED]?: string } = function (this) {
    setup.call(this);
    this.set("etag", false);
    this.set("x-powered-by", false);
  };
  plain[WRAPPED] = "plain-answers";
  app.defaultConfiguration = plain;
  return true;
}

/** Wraps the `json` factory of the express instance Pepr loads (once per tag). */
export function wrapPeprJson(wrap: (original: JsonFactory) => JsonFactory, tag: string): boolean {
  const express = peprExpress();
  if (!express) return false;
  const original = express.json;
  if (typeof original !== "function") return false;
  const tags = (original[WRAPPED] ?? "").split(",");
  if (tags.includes(tag)) return true;
  const wrapped: JsonFactory = wrap(original);
  wrapped[WRAPPED] = [...tags.filter(Boolean), tag].join(",");
  express.json = wrapped;
  return true;
}
