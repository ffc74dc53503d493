// One HTTPS request, read to the end: the status, the body as text and (when it is JSON) parsed,
// and the headers. What every test client here sends with: to the controller, to the stand-in API
// and to the real API server. Errors and timeouts reject; an HTTP error status does not (tests
// assert on it).
import type { IncomingHttpHeaders } from "node:http";
import { request, type Agent } from "node:https";

export interface HttpsReply {
  status: number;
  text: string;
  /** The body parsed as JSON, undefined when it is not JSON. */
  json?: unknown;
  headers: IncomingHttpHeaders;
}

export interface HttpsRequest {
  method: string;
  agent: Agent;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Rejects when no answer comes in this long (default: wait). */
  timeoutMs?: number;
}

export function sendHttps(url: string, init: HttpsRequest): Promise<HttpsReply> {
  const { method, agent, headers = {}, body, timeoutMs } = init;
  return new Promise((ok, fail) => {
    const req = request(url, { method, agent, headers }, res => {
      const chunks: Buffer[] = [];
      res.on("data", c => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        ok({ status: res.statusCode ?? 0, text, json, headers: res.headers });
      });
      res.on("error", fail);
    });
    if (timeoutMs !== undefined)
      req.setTimeout(timeoutMs, () =>
        req.destroy(new Error(`${method} ${url}: no answer in ${timeoutMs} ms`)),
      );
    req.on("error", fail);
    req.end(body);
  });
}

/**
 * A request the controller answers before reading its body, then closes the connection
 * (lib/pepr/webhook-doors.ts): a client still writing may see the close (EPIPE, ECONNRESET) before
 * it reads the answer, as with any server that does not drain. Sent again, a few times, until the
 * answer is read; `sent` says how many were sent (each one the controller counted).
 */
export async function answerOfUnread<T>(
  send: () => Promise<T>,
  tries = 5,
): Promise<{ answer: T; sent: number }> {
  for (let sent = 1; ; sent++) {
    try {
      return { answer: await send(), sent };
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (sent >= tries || (code !== "EPIPE" && code !== "ECONNRESET")) throw e;
    }
  }
}
