// What the cloud credential providers (ecr.ts, gcp.ts, acr.ts) share: one bounded HTTP call over
// the injected transport, the projected token files, expiries. Why:
// docs/adr/0039-registry-credentials-from-the-cloud-identity.md
import { open } from "node:fs/promises";
import type { Transport } from "../egress";
import { bounded } from "../limits";
import { MAX_TOKEN_BYTES, readCapped, type RegistryCredentials } from "../registry-client";

/** The controller's environment, as the providers read it (AWS_ROLE_ARN, AZURE_TENANT_ID, ...). */
export type CloudEnv = Readonly<Record<string, string | undefined>>;

/** What one fetch gives: the registry credentials and when they stop working (epoch ms). */
export interface Obtained {
  credentials: RegistryCredentials;
  expiresAt: number;
}

/** What a fetch works with: the transport under the credentials' egress policy, its deadline. */
export interface FetchContext {
  transport: Transport;
  signal: AbortSignal;
  env: CloudEnv;
  /** Registry hosts spoken to over plain HTTP (images.plainHttp): ACR's exchange follows them. */
  plainHttp: ReadonlySet<string>;
  now: () => number;
}

/** A failure whose message is fit for the log: never a token, at most 200 bytes of anyone's text. */
export class CredentialError extends Error {}

/** Projected service-account tokens are ~1 KiB; a file past this is not one. */
export const MAX_TOKEN_FILE_BYTES = 16 * 1024;
/** A lifetime past this is taken as this: the token is fetched again at least this often. */
export const MAX_LIFETIME_MS = 12 * 3600_000;

/** A projected token file, read again at every fetch (the kubelet rotates it), at most 16 KiB. */
export async function readTokenFile(path: string | undefined, what: string): Promise<string> {
  if (!path) throw new CredentialError(`no ${what} token file is set`);
  let text: string;
  try {
    const file = await open(path, "r");
    try {
      const buffer = Buffer.alloc(MAX_TOKEN_FILE_BYTES + 1);
      const { bytesRead } = await file.read(buffer, 0, buffer.length, 0);
      if (bytesRead > MAX_TOKEN_FILE_BYTES)
        throw new CredentialError(
          `the ${what} token file ${bounded(path)} is over ${MAX_TOKEN_FILE_BYTES} bytes`,
        );
      text = buffer.subarray(0, bytesRead).toString("utf8").trim();
    } finally {
      await file.close();
    }
  } catch (e) {
    if (e instanceof CredentialError) throw e;
    const code = (e as { code?: string }).code ?? "an error";
    throw new CredentialError(`the ${what} token file ${bounded(path)} could not be read: ${code}`);
  }
  if (!text) throw new CredentialError(`the ${what} token file ${bounded(path)} is empty`);
  return text;
}

export interface Answer {
  status: number;
  headers: Headers;
  body: Buffer;
}

/** One request through the transport, its answer read whole up to 64 KiB. */
export async function call(
  ctx: FetchContext,
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string },
  what: string,
): Promise<Answer> {
  try {
    const res = await ctx.transport(url, { ...init, signal: ctx.signal });
    const body = await readCapped(res, MAX_TOKEN_BYTES, "its answer");
    return { status: res.status, headers: res.headers, body };
  } catch (e) {
    if (ctx.signal.aborted) throw new CredentialError(`${what} did not answer in time`);
    const error = e as { code?: string; message?: string };
    throw new CredentialError(
      `${what} could not be read: ${bounded(error.code ?? error.message ?? String(e))}`,
    );
  }
}

/**
 * A request whose 200 answer is a JSON object (returned); any other status is an error naming it
 * and the provider's error code (the answer's `codeField`, bounded).
 */
export async function jsonCall(
  ctx: FetchContext,
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string },
  what: string,
  codeField?: string,
): Promise<{ body: Record<string, unknown>; headers: Headers }> {
  const answer = await call(ctx, url, init, what);
  if (answer.status !== 200) {
    let code: unknown;
    try {
      code = codeField && JSON.parse(answer.body.toString("utf8"))?.[codeField];
    } catch {
      // no code to name
    }
    throw denied(what, answer, typeof code === "string" ? code : undefined);
  }
  return { body: jsonObject(answer.body, what), headers: answer.headers };
}

/** A JSON object answer; anything else is an error naming what. */
export function jsonObject(body: Buffer, what: string): Record<string, unknown> {
  try {
    const value = JSON.parse(body.toString("utf8"));
    if (value && typeof value === "object" && !Array.isArray(value)) return value;
  } catch {
    // below
  }
  throw new CredentialError(`${what} is not a JSON object`);
}

/** A non-empty string field, else an error (its value never echoed: it may be a secret). */
export function stringField(body: Record<string, unknown>, field: string, what: string): string {
  const value = body[field];
  if (typeof value !== "string" || !value)
    throw new CredentialError(`${what} has no ${field} string`);
  return value;
}

/** A denied answer: its status and the provider's error code, bounded. */
export function denied(what: string, answer: Answer, code: string | undefined): CredentialError {
  return new CredentialError(
    `${what} answered HTTP ${answer.status}${code ? ` (${bounded(code, 64)})` : ""}`,
  );
}

/**
 * When the credentials stop working, from what the provider said: in the past (or unreadable) is
 * an error; past 12 h from now, taken as 12 h.
 */
export function expiryFrom(expiresAt: number, now: number, what: string): number {
  if (!Number.isFinite(expiresAt)) throw new CredentialError(`${what} gave no valid expiry`);
  if (expiresAt <= now) throw new CredentialError(`${what} gave credentials already expired`);
  return Math.min(expiresAt, now + MAX_LIFETIME_MS);
}

/** An endpoint URL without its trailing slashes, checked to be http(s). */
export function endpointUrl(url: string, what: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new CredentialError(`the ${what} endpoint ${bounded(url)} is not a URL`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
    throw new CredentialError(`the ${what} endpoint ${bounded(url)} is not http(s)`);
  return url.replace(/\/+$/, "");
}
