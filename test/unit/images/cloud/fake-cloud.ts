// What the cloud credential tests share: a transport answering from a handler (each request
// recorded, its body read), token files in a temp dir, a fetch context around them.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Transport } from "../../../../lib/images/egress";
import type { CloudEnv, FetchContext } from "../../../../lib/images/cloud/common";

export interface Seen {
  method: string;
  url: URL;
  headers: Record<string, string>;
  body: string;
  signal?: AbortSignal;
}

export type Handler = (request: Seen) => Response | Promise<Response>;

/** A transport whose answers come from `handler`; `seen` lists every request in order. */
export function fakeTransport(handler: Handler): { transport: Transport; seen: Seen[] } {
  const seen: Seen[] = [];
  const transport: Transport = async (url, init) => {
    const request = {
      method: init.method ?? "GET",
      url: new URL(url),
      headers: Object.fromEntries(
        Object.entries(init.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]),
      ),
      body: init.body ?? "",
      signal: init.signal,
    };
    seen.push(request);
    init.signal?.throwIfAborted();
    return handler(request);
  };
  return { transport, seen };
}

export const json = (body: unknown, status = 200, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", ...headers },
  });

export const text = (body: string, status = 200) => new Response(body, { status });

/** An answer that never comes: it fails only when the request's signal aborts. */
export const never = (signal: AbortSignal | undefined) =>
  new Promise<Response>((_, reject) =>
    signal?.addEventListener("abort", () => reject(signal.reason), { once: true }),
  );

/** A file holding `content`, in a fresh temp dir. */
export function tokenFile(content: string | Buffer, name = "token"): string {
  const path = join(mkdtempSync(join(tmpdir(), "cloud-creds-")), name);
  writeFileSync(path, content);
  return path;
}

export function context(
  transport: Transport,
  env: CloudEnv = {},
  extra: Partial<FetchContext> = {},
): FetchContext {
  return {
    transport,
    env,
    signal: AbortSignal.timeout(5000),
    plainHttp: new Set(),
    now: Date.now,
    ...extra,
  };
}
