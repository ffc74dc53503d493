// Reads an image's config from its registry with the OCI distribution API, the way the kubelet's
// runtime resolves it: the manifest (or index → the manifest for the platform), then the config
// blob, whose `config` holds the image's User, WorkingDir and Env.
//
// Written here rather than taken from an npm client because every step must be bounded for the
// admission path: one deadline (AbortSignal) across all of a lookup's requests, a byte cap on every
// body, at most 3 redirects (and no credentials sent to another host), plain HTTP only for
// registries an admin listed, and a verified digest for every blob. It never throws: a failure is
// an answer ({ ok: false, reason }).
import { createHash } from "node:crypto";
import type { ImageRef } from "../image-reference";

/** The runtime part of an image config, as the OCI image spec names it. */
export interface ImageConfig {
  /** The manifest's digest (what the kubelet runs for this platform). */
  digest: string;
  user: string;
  workingDir: string;
  env: string[];
}

export type FetchResult = { ok: true; config: ImageConfig } | { ok: false; reason: string };

export interface Platform {
  os: string;
  architecture: string;
}

/** Credentials for a registry host, as a docker config's `auths` gives them. */
export interface RegistryCredentials {
  username: string;
  password: string;
}

export interface ClientOptions {
  /** Registry hosts (with port) spoken to over plain HTTP, as containerd's insecure registries. */
  plainHttp: ReadonlySet<string>;
  credentials?: (registry: string) => RegistryCredentials | undefined;
  signal: AbortSignal;
  /** Injected in tests; Node's fetch otherwise. */
  fetch?: typeof fetch;
}

const MEDIA = {
  ociIndex: "application/vnd.oci.image.index.v1+json",
  dockerList: "application/vnd.docker.distribution.manifest.list.v2+json",
  ociManifest: "application/vnd.oci.image.manifest.v1+json",
  dockerManifest: "application/vnd.docker.distribution.manifest.v2+json",
};
const ACCEPT = [MEDIA.ociIndex, MEDIA.dockerList, MEDIA.ociManifest, MEDIA.dockerManifest].join(
  ", ",
);
/** The OCI distribution spec's limit for manifests; configs are far smaller in practice. */
export const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;
export const MAX_CONFIG_BYTES = 4 * 1024 * 1024;
const MAX_TOKEN_BYTES = 64 * 1024;
const MAX_REDIRECTS = 3;

/** Docker Hub's API host; its references say docker.io. */
const apiHost = (registry: string) =>
  registry === "docker.io" ? "registry-1.docker.io" : registry;

class LookupError extends Error {}

/** Reads a body up to `limit` bytes; more is an error (the stream is cancelled). */
async function readCapped(res: Response, limit: number, what: string): Promise<Buffer> {
  const declared = Number(res.headers.get("content-length"));
  if (Number.isFinite(declared) && declared > limit)
    throw new LookupError(`${what} is ${declared} bytes, over the ${limit} byte limit`);
  if (!res.body) return Buffer.alloc(0);
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      throw new LookupError(`${what} is over the ${limit} byte limit`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

function parseJson(body: Buffer, what: string): Record<string, unknown> {
  try {
    const value = JSON.parse(body.toString("utf8"));
    if (value && typeof value === "object" && !Array.isArray(value)) return value;
  } catch {
    // fall through
  }
  throw new LookupError(`${what} is not a JSON object`);
}

/** `Bearer realm="https://auth.docker.io/token",service="registry.docker.io"` → its parameters. */
export function parseChallenge(
  header: string,
): { scheme: string; params: Record<string, string> } | undefined {
  const match = /^\s*(\w+)\s*(.*)$/s.exec(header);
  if (!match) return undefined;
  const params: Record<string, string> = {};
  for (const p of match[2].matchAll(/(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))/g))
    params[p[1].toLowerCase()] = p[2] !== undefined ? p[2].replace(/\\(.)/g, "$1") : p[3];
  return { scheme: match[1].toLowerCase(), params };
}

const sha256 = (body: Buffer) => `sha256:${createHash("sha256").update(body).digest("hex")}`;

/** One lookup's HTTP conversation with one registry: its scheme, token and redirects. */
class RegistrySession {
  private authorization?: string;
  private readonly base: string;
  private readonly fetch: typeof fetch;

  constructor(
    private readonly ref: ImageRef,
    private readonly options: ClientOptions,
  ) {
    const scheme = options.plainHttp.has(ref.registry) ? "http" : "https";
    this.base = `${scheme}://${apiHost(ref.registry)}/v2/${ref.repository}`;
    this.fetch = options.fetch ?? fetch;
  }

  /** GET with the session's authorization, following redirects (credentials only to the same host). */
  async get(path: string, accept: string, what: string): Promise<Response> {
    let url = `${this.base}${path}`;
    for (let hop = 0; ; hop++) {
      const sameHost = new URL(url).host === new URL(this.base).host;
      const headers: Record<string, string> = { Accept: accept };
      if (this.authorization && sameHost) headers.Authorization = this.authorization;
      const res = await this.fetch(url, {
        headers,
        redirect: "manual",
        signal: this.options.signal,
      });
      if (res.status === 401 && sameHost && !this.authorization && (await this.authenticate(res)))
        continue;
      if ([301, 302, 303, 307, 308].includes(res.status)) {
        const location = res.headers.get("location");
        await res.body?.cancel().catch(() => {});
        if (!location) throw new LookupError(`${what}: a redirect without a location`);
        if (hop >= MAX_REDIRECTS)
          throw new LookupError(`${what}: more than ${MAX_REDIRECTS} redirects`);
        url = new URL(location, url).toString();
        if (!/^https?:$/.test(new URL(url).protocol))
          throw new LookupError(`${what}: a redirect to ${new URL(url).protocol}`);
        continue;
      }
      if (res.status !== 200) {
        await res.body?.cancel().catch(() => {});
        throw new LookupError(`${what}: HTTP ${res.status}`);
      }
      return res;
    }
  }

  /** Answers a 401's challenge: a Bearer token from its realm, or Basic with the credentials. */
  private async authenticate(res: Response): Promise<boolean> {
    await res.body?.cancel().catch(() => {});
    const challenge = parseChallenge(res.headers.get("www-authenticate") ?? "");
    const credentials = this.options.credentials?.(this.ref.registry);
    const basic =
      credentials &&
      `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString("base64")}`;
    if (challenge?.scheme === "basic") {
      if (!basic)
        throw new LookupError("the registry asks for credentials, and none are set for it");
      this.authorization = basic;
      return true;
    }
    if (challenge?.scheme !== "bearer" || !challenge.params.realm)
      throw new LookupError("HTTP 401 without a Bearer or Basic challenge");
    const realm = new URL(challenge.params.realm);
    if (
      realm.protocol !== "https:" &&
      !(realm.protocol === "http:" && this.options.plainHttp.has(realm.host))
    )
      throw new LookupError(
        `the token realm ${realm.origin} is not https (and not in images.plainHttp)`,
      );
    if (challenge.params.service) realm.searchParams.set("service", challenge.params.service);
    realm.searchParams.set(
      "scope",
      challenge.params.scope ?? `repository:${this.ref.repository}:pull`,
    );
    const tokenRes = await this.fetch(realm, {
      headers: basic ? { Authorization: basic } : {},
      redirect: "error",
      signal: this.options.signal,
    });
    if (tokenRes.status !== 200) {
      await tokenRes.body?.cancel().catch(() => {});
      throw new LookupError(`the token service answered HTTP ${tokenRes.status}`);
    }
    const body = parseJson(await readCapped(tokenRes, MAX_TOKEN_BYTES, "the token"), "the token");
    const token = body.token ?? body.access_token;
    if (typeof token !== "string" || !token)
      throw new LookupError("the token service gave no token");
    this.authorization = `Bearer ${token}`;
    return true;
  }
}

function pickPlatform(index: Record<string, unknown>, platform: Platform): string {
  const manifests = Array.isArray(index.manifests) ? index.manifests : [];
  const match = manifests.find(m => {
    const p = (m as { platform?: { os?: string; architecture?: string } })?.platform;
    return p?.os === platform.os && p?.architecture === platform.architecture;
  }) as { digest?: unknown } | undefined;
  if (!match) {
    const offered = manifests
      .map(m => {
        const p = (m as { platform?: { os?: string; architecture?: string } })?.platform;
        return p ? `${p.os}/${p.architecture}` : "?";
      })
      .join(", ");
    throw new LookupError(
      `the image index has no ${platform.os}/${platform.architecture} manifest (it has ${offered || "none"})`,
    );
  }
  if (typeof match.digest !== "string")
    throw new LookupError("the image index entry has no digest");
  return match.digest;
}

/** The image's config for the platform: manifest (via the index when there is one), then config blob. */
export async function fetchImageConfig(
  ref: ImageRef,
  platform: Platform,
  options: ClientOptions,
): Promise<FetchResult> {
  try {
    const session = new RegistrySession(ref, options);
    let reference = ref.digest ?? ref.tag ?? "latest";
    for (let level = 0; level < 2; level++) {
      const res = await session.get(`/manifests/${reference}`, ACCEPT, "the manifest");
      const body = await readCapped(res, MAX_MANIFEST_BYTES, "the manifest");
      const digest = sha256(body);
      if (reference.startsWith("sha256:") && reference !== digest)
        throw new LookupError(`the manifest's digest is ${digest}, not ${reference}`);
      const manifest = parseJson(body, "the manifest");
      const mediaType = String(
        manifest.mediaType ?? res.headers.get("content-type")?.split(";")[0] ?? "",
      );
      if (
        mediaType === MEDIA.ociIndex ||
        mediaType === MEDIA.dockerList ||
        Array.isArray(manifest.manifests)
      ) {
        if (level > 0) throw new LookupError("an image index inside an image index");
        reference = pickPlatform(manifest, platform);
        continue;
      }
      if (mediaType !== MEDIA.ociManifest && mediaType !== MEDIA.dockerManifest)
        throw new LookupError(`unknown manifest media type "${mediaType}"`);
      const configDigest = (manifest.config as { digest?: unknown } | undefined)?.digest;
      if (typeof configDigest !== "string" || !configDigest.startsWith("sha256:"))
        throw new LookupError("the manifest names no sha256 config digest");
      const blobRes = await session.get(`/blobs/${configDigest}`, "*/*", "the config");
      const blob = await readCapped(blobRes, MAX_CONFIG_BYTES, "the config");
      if (sha256(blob) !== configDigest)
        throw new LookupError(`the config's digest is ${sha256(blob)}, not ${configDigest}`);
      const config = (parseJson(blob, "the config").config ?? {}) as Record<string, unknown>;
      return {
        ok: true,
        config: {
          digest,
          user: typeof config.User === "string" ? config.User : "",
          workingDir: typeof config.WorkingDir === "string" ? config.WorkingDir : "",
          env: Array.isArray(config.Env) ? config.Env.filter(e => typeof e === "string") : [],
        },
      };
    }
    throw new LookupError("unreachable");
  } catch (e) {
    if (options.signal.aborted) return { ok: false, reason: "the registry did not answer in time" };
    const cause = (e as { cause?: { code?: string; message?: string } })?.cause;
    const reason =
      e instanceof LookupError
        ? e.message
        : `the registry could not be read (${(e as Error)?.message ?? e}${cause ? `: ${cause.code ?? cause.message}` : ""})`;
    return { ok: false, reason };
  }
}
