// Reads an image's config from its registry with the OCI distribution API, every step bounded;
// never throws. Why: docs/adr/0006-the-fix-follows-the-image.md
import { createHash } from "node:crypto";
import type { ImageRef } from "../objects/image-reference";
import {
  apiHost,
  EGRESS_REFUSED,
  egressPolicy,
  guardedTransport,
  type EgressPolicy,
  type Transport,
} from "./egress";
import {
  layersOf,
  readImageFiles,
  filesNeeded,
  type FilesOptions,
  type ImageFiles,
} from "./image-files";
import { bounded, processLimits, type LookupLimits } from "./limits";
import { shapesOf, type ImageShapes } from "./config-shapes";

/** What the rules read of an image config (the OCI image spec's names), each string bounded. */
export interface ImageConfig {
  /** The manifest's digest (what the kubelet runs for this platform). */
  digest: string;
  user: string;
  workingDir: string;
  /** HOME from its Env, when it sets one (the rest of Env is not kept). */
  home?: string;
  /** What its files say of a named User (and WORKDIR), when they were read. */
  files?: ImageFiles;
  /** Low ports, a /root PATH, Env-named cache dirs (config-shapes.ts), when it has any. */
  shapes?: ImageShapes;
}

export type FetchResult =
  | { ok: true; config: ImageConfig }
  /** `reason`: generic, for users; `detail`: what happened, bounded, for the log. */
  | { ok: false; reason: string; detail: string };

export interface Platform {
  os: string;
  architecture: string;
}

/** Credentials for a registry host, as a docker config's `auths` gives them. */
export interface RegistryCredentials {
  username: string;
  password: string;
  /**
   * Sent to the registry's own host only, never to a token realm on another host (the cloud
   * credentials: ECR, Artifact Registry and ACR all have their realm on the registry host). A
   * docker config's go to the realm, wherever it is, as Docker Hub's auth.docker.io needs.
   */
  sameHostOnly?: boolean;
}

/**
 * What a credential source answers for a registry: credentials, none (anonymous), or that the
 * ones it should have could not be obtained (the cloud identity's token failed).
 */
export type CredentialAnswer = RegistryCredentials | { unavailable: string } | undefined;

export interface ClientOptions {
  /** Registry hosts (with port) spoken to over plain HTTP, as containerd's insecure registries. */
  plainHttp: ReadonlySet<string>;
  credentials?: (registry: string) => CredentialAnswer;
  signal: AbortSignal;
  /** Where connections may go (default: plainHttp hosts listed, nothing else). */
  egress?: EgressPolicy;
  /** Injected in tests; the guarded transport of `egress` otherwise. */
  fetch?: Transport;
  /** The caps on body bytes in flight (default: the process's). */
  limits?: LookupLimits;
  /** Read the image's files for a named User, within these bounds (unset: not read). */
  files?: FilesOptions;
}

/** What a user is told of a failed lookup: never the registry's own words. */
export const REASONS = {
  unreadable: "the registry could not be read",
  invalid: "the registry's answer was not a valid image",
  timeout: "the registry did not answer in time",
  egress: "the registry host is not allowed by the egress policy (images.allowedHosts)",
  busy: "the module is reading too many images at once; it was not read",
  credentials: "the module's cloud credentials for this registry could not be obtained",
} as const;

const REASON_CLASSES = new Map<string, string>(Object.entries(REASONS).map(([k, v]) => [v, k]));
/** A failed lookup's reason as the metrics count it: its key in REASONS, else "other". */
export function reasonClass(reason: string): string {
  return REASON_CLASSES.get(reason) ?? "other";
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
/** Far above real manifests and indexes (a 40-platform index is ~10 KiB). */
export const MAX_MANIFEST_BYTES = 256 * 1024;
/** Far above real configs (their history and labels are a few KiB). */
export const MAX_CONFIG_BYTES = 1024 * 1024;
export const MAX_TOKEN_BYTES = 64 * 1024;
const MAX_REDIRECTS = 3;

/** A failure: the generic reason a user sees, and the detail for the log. */
class LookupError extends Error {
  constructor(
    readonly reason: string,
    detail: string,
  ) {
    super(detail);
  }
}
const invalid = (detail: string) => new LookupError(REASONS.invalid, detail);
const unreadable = (detail: string) => new LookupError(REASONS.unreadable, detail);

/** Body bytes this lookup holds against the process-wide cap, given back when it ends. */
class Held {
  bytes = 0;
  constructor(readonly limits: LookupLimits) {}
  take(n: number): boolean {
    if (!this.limits.take(n)) return false;
    this.bytes += n;
    return true;
  }
  release(): void {
    this.limits.give(this.bytes);
    this.bytes = 0;
  }
}

/**
 * Reads a body up to `limit` bytes; more is an error (the stream is cancelled). Without `held`,
 * not counted against the process-wide cap (the cloud credentials' few small answers).
 */
export async function readCapped(
  res: Response,
  limit: number,
  what: string,
  held?: Held,
): Promise<Buffer> {
  const declared = Number(res.headers.get("content-length"));
  if (Number.isFinite(declared) && declared > limit) {
    await res.body?.cancel().catch(() => {});
    throw invalid(`${what} is ${declared} bytes, over the ${limit} byte limit`);
  }
  if (!res.body) return Buffer.alloc(0);
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    const over = size > limit;
    if (over || (held && !held.take(value.byteLength))) {
      await reader.cancel().catch(() => {});
      throw over
        ? invalid(`${what} is over the ${limit} byte limit`)
        : new LookupError(REASONS.busy, `${what}: the process-wide cap on bytes in flight`);
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
  throw invalid(`${what} is not a JSON object`);
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
  private readonly fetch: Transport;

  constructor(
    private readonly ref: ImageRef,
    private readonly options: ClientOptions,
    readonly held: Held,
  ) {
    const scheme = options.plainHttp.has(ref.registry) ? "http" : "https";
    this.base = `${scheme}://${apiHost(ref.registry)}/v2/${ref.repository}`;
    this.fetch =
      options.fetch ??
      guardedTransport(options.egress ?? egressPolicy({ plainHttp: [...options.plainHttp] }));
  }

  /**
   * GET with the session's authorization, following redirects (credentials only to the same host);
   * every hop is a request of its own through the transport, so under the egress policy.
   */
  async get(path: string, accept: string, what: string): Promise<Response> {
    let url = `${this.base}${path}`;
    for (let hop = 0; ; hop++) {
      const sameHost = new URL(url).host === new URL(this.base).host;
      const headers: Record<string, string> = { Accept: accept };
      if (this.authorization && sameHost) headers.Authorization = this.authorization;
      const res = await this.fetch(url, { headers, signal: this.options.signal });
      if (res.status === 401 && sameHost && !this.authorization && (await this.authenticate(res)))
        continue;
      if ([301, 302, 303, 307, 308].includes(res.status)) {
        const location = res.headers.get("location");
        await res.body?.cancel().catch(() => {});
        if (!location) throw unreadable(`${what}: a redirect without a location`);
        if (hop >= MAX_REDIRECTS) throw unreadable(`${what}: more than ${MAX_REDIRECTS} redirects`);
        url = new URL(location, url).toString();
        continue;
      }
      if (res.status !== 200) {
        await res.body?.cancel().catch(() => {});
        throw unreadable(`${what}: HTTP ${res.status}`);
      }
      return res;
    }
  }

  /** Answers a 401's challenge: a Bearer token from its realm, or Basic with the credentials. */
  private async authenticate(res: Response): Promise<boolean> {
    await res.body?.cancel().catch(() => {});
    const challenge = parseChallenge(res.headers.get("www-authenticate") ?? "");
    const answer = this.options.credentials?.(this.ref.registry);
    if (answer && "unavailable" in answer)
      throw new LookupError(
        REASONS.credentials,
        `the registry asks for credentials: ${answer.unavailable}`,
      );
    const credentials = answer;
    const basic =
      credentials &&
      `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString("base64")}`;
    if (challenge?.scheme === "basic") {
      if (!basic) throw unreadable("the registry asks for credentials, and none are set for it");
      this.authorization = basic;
      return true;
    }
    if (challenge?.scheme !== "bearer" || !challenge.params.realm)
      throw unreadable("HTTP 401 without a Bearer or Basic challenge");
    let realm: URL;
    try {
      realm = new URL(challenge.params.realm);
    } catch {
      throw unreadable(`the token realm is not a URL: ${bounded(challenge.params.realm)}`);
    }
    // The realm is another host (Docker Hub's is): the same egress policy, in the transport. Cloud
    // credentials never go there: a registry would otherwise collect them for another host.
    const realmCredentials =
      basic && (!credentials?.sameHostOnly || realm.host === new URL(this.base).host) ? basic : "";
    if (challenge.params.service) realm.searchParams.set("service", challenge.params.service);
    realm.searchParams.set(
      "scope",
      challenge.params.scope ?? `repository:${this.ref.repository}:pull`,
    );
    const tokenRes = await this.fetch(realm, {
      headers: realmCredentials ? { Authorization: realmCredentials } : {},
      signal: this.options.signal,
    });
    if (tokenRes.status !== 200) {
      await tokenRes.body?.cancel().catch(() => {});
      throw unreadable(`the token service answered HTTP ${tokenRes.status}`);
    }
    const body = parseJson(
      await readCapped(tokenRes, MAX_TOKEN_BYTES, "the token", this.held),
      "the token",
    );
    const token = body.token ?? body.access_token;
    if (typeof token !== "string" || !token) throw unreadable("the token service gave no token");
    this.authorization = `Bearer ${token}`;
    return true;
  }
}

const platformText = (p: Platform) => bounded(`${p.os}/${p.architecture}`, 64);

function pickPlatform(index: Record<string, unknown>, platform: Platform): string {
  const manifests = Array.isArray(index.manifests) ? index.manifests : [];
  const match = manifests.find(m => {
    const p = (m as { platform?: { os?: string; architecture?: string } })?.platform;
    return p?.os === platform.os && p?.architecture === platform.architecture;
  }) as { digest?: unknown } | undefined;
  if (!match) {
    const offered = manifests
      .slice(0, 16)
      .map(m => {
        const p = (m as { platform?: { os?: string; architecture?: string } })?.platform;
        return p ? `${p.os}/${p.architecture}` : "?";
      })
      .join(", ");
    throw new LookupError(
      `the image has no ${platformText(platform)} manifest`,
      `the image index has no ${platformText(platform)} manifest (it has ${bounded(offered || "none")})`,
    );
  }
  if (typeof match.digest !== "string") throw invalid("the image index entry has no digest");
  return match.digest;
}

/** A string field of the config, bounded; "" when absent or not a string. */
const field = (value: unknown) => (typeof value === "string" ? bounded(value) : "");

/** The image's config for the platform: manifest (via the index when there is one), then config blob. */
export async function fetchImageConfig(
  ref: ImageRef,
  platform: Platform,
  options: ClientOptions,
): Promise<FetchResult> {
  const held = new Held(options.limits ?? processLimits);
  try {
    const session = new RegistrySession(ref, options, held);
    let reference = ref.digest ?? ref.tag ?? "latest";
    for (let level = 0; level < 2; level++) {
      const res = await session.get(`/manifests/${reference}`, ACCEPT, "the manifest");
      const body = await readCapped(res, MAX_MANIFEST_BYTES, "the manifest", held);
      const digest = sha256(body);
      if (reference.startsWith("sha256:") && reference !== digest)
        throw invalid(`the manifest's digest is ${digest}, not ${bounded(reference)}`);
      const manifest = parseJson(body, "the manifest");
      const mediaType = String(
        manifest.mediaType ?? res.headers.get("content-type")?.split(";")[0] ?? "",
      );
      if (
        mediaType === MEDIA.ociIndex ||
        mediaType === MEDIA.dockerList ||
        Array.isArray(manifest.manifests)
      ) {
        if (level > 0) throw invalid("an image index inside an image index");
        reference = pickPlatform(manifest, platform);
        continue;
      }
      if (mediaType !== MEDIA.ociManifest && mediaType !== MEDIA.dockerManifest)
        throw invalid(`unknown manifest media type "${bounded(mediaType)}"`);
      const configDigest = (manifest.config as { digest?: unknown } | undefined)?.digest;
      if (typeof configDigest !== "string" || !/^sha256:[0-9a-f]{64}$/.test(configDigest))
        throw invalid("the manifest names no sha256 config digest");
      const blobRes = await session.get(`/blobs/${configDigest}`, "*/*", "the config");
      const blob = await readCapped(blobRes, MAX_CONFIG_BYTES, "the config", held);
      if (sha256(blob) !== configDigest)
        throw invalid(`the config's digest is ${sha256(blob)}, not ${configDigest}`);
      const config = (parseJson(blob, "the config").config ?? {}) as Record<string, unknown>;
      const env = Array.isArray(config.Env) ? config.Env : [];
      const home = env.find(e => typeof e === "string" && e.startsWith("HOME="));
      const user = field(config.User);
      const workingDir = field(config.WorkingDir);
      const shapes = shapesOf(config);
      // The layers through the same session: its egress policy, credentials and deadline.
      // The cache dirs its Env names are read with its files (a root image's, when asked).
      const filesFor = { user, workingDir, dirs: shapes?.cacheDirs?.map(([, dir]) => dir) };
      const filesOf = (): Promise<ImageFiles> => {
        const layers = layersOf(manifest);
        if (!layers) return Promise.resolve({ note: "the manifest's layer list is not valid" });
        return readImageFiles(
          filesFor,
          layers,
          layer => session.get(`/blobs/${layer}`, "*/*", "a layer"),
          options.files!,
          held.limits,
          options.signal,
        );
      };
      const files =
        options.files && filesNeeded(filesFor, options.files) ? await filesOf() : undefined;
      return {
        ok: true,
        config: {
          digest,
          user,
          workingDir,
          ...(home && home.length > 5 ? { home: field(home.slice(5)) } : {}),
          ...(files ? { files } : {}),
          ...(shapes ? { shapes } : {}),
        },
      };
    }
    throw invalid("an image index inside an image index");
  } catch (e) {
    return failure(e, options.signal);
  } finally {
    held.release();
  }
}

/** A thrown error as the generic reason and the bounded detail. */
function failure(e: unknown, signal: AbortSignal): FetchResult {
  const error = e as {
    code?: string;
    message?: string;
    cause?: { code?: string; message?: string };
  };
  if (signal.aborted)
    return { ok: false, reason: REASONS.timeout, detail: "the lookup's time ran out" };
  if (e instanceof LookupError) return { ok: false, reason: e.reason, detail: bounded(e.message) };
  const refused = error?.code === EGRESS_REFUSED || error?.cause?.code === EGRESS_REFUSED;
  const cause = error?.cause ? `: ${error.cause.code ?? error.cause.message}` : "";
  return {
    ok: false,
    reason: refused ? REASONS.egress : REASONS.unreadable,
    detail: bounded(`${error?.code ? `${error.code} ` : ""}${error?.message ?? String(e)}${cause}`),
  };
}
