// Image configs for the rules, from the registries, cached and bounded for the admission path;
// a registry that fails makes the image "unknown". Why: docs/adr/0006-the-fix-follows-the-image.md
import { createHash } from "node:crypto";
import { performance } from "node:perf_hooks";
import type { ImageRef } from "../objects/image-reference";
import { budgetExhausted, imageLookupDuration, imageLookups, observeImageCaches } from "../metrics";
import type { ImageLookupSettings } from "./settings";
import { egressPolicy, egressPolicyOf, type EgressPolicy, type Transport } from "./egress";
import { LayerCache } from "./image-files";
import { shapesSize } from "./config-shapes";
import { bounded, BoundedMap, MAX_CACHE_BYTES, processLimits, type LookupLimits } from "./limits";
import {
  fetchImageConfig,
  reasonClass,
  REASONS,
  type ImageConfig,
  type Platform,
  type CredentialAnswer,
  type RegistryCredentials,
} from "./registry-client";
export type { CredentialAnswer, RegistryCredentials };

export type { ImageConfig, Platform };

export type ImageLookup =
  | { state: "known"; config: ImageConfig }
  | { state: "unknown"; reason: string };

/** A pod's own pull secrets' credentials, and where they come from (part of the cache key). */
export interface OwnCredentials {
  /** The namespace and Secret names they were read from. */
  source: string;
  get: (registry: string) => RegistryCredentials | undefined;
}

export interface InspectOptions {
  /** When the request stops waiting (epoch ms); never later than budgetMs from now. */
  deadline?: number;
  /** A pod's own pull secrets (images.workloadPullSecrets): before the inspector's credentials. */
  own?: OwnCredentials;
}

export interface InspectorOptions {
  plainHttp?: readonly string[];
  /** Where lookups may connect (default: the plainHttp hosts listed, nothing else). */
  egress?: EgressPolicy;
  /** How long one request waits for all its lookups. */
  budgetMs: number;
  /** How long one lookup may go on (it fills the cache after the budget). */
  lookupTimeoutMs?: number;
  /** The admin's: the docker config Secrets', then the cloud identity's (lib/images/cloud/store.ts). */
  credentials?: (registry: string) => CredentialAnswer;
  /** Tag → digest is trusted this long. */
  tagTtlMs?: number;
  /** A failed lookup is not tried again for this long. */
  failureTtlMs?: number;
  /** Entries kept per cache (oldest dropped first). */
  maxEntries?: number;
  /** Bytes kept per cache (oldest dropped first). */
  maxCacheBytes?: number;
  /** The caps on lookups at once and bytes in flight (default: the process's). */
  limits?: LookupLimits;
  fetch?: Transport;
  now?: () => number;
  /** Told of each failed lookup with its bounded detail (the controller logs it). */
  onFailure?: (image: string, detail: string) => void;
  /**
   * Read the files of images whose User is a name (passwd, group, WORKDIR), and with rootWorkdir
   * of root images (WORKDIR, what lies under it, /bin/cp), within these bytes per image; unset:
   * not read.
   */
  files?: {
    maxBytes: number;
    maxUncompressedBytes: number;
    rootWorkdir?: boolean;
    rootDirs?: boolean;
  };
}

interface Expiring<T> {
  value: T;
  expires: number;
}

export const platformKey = (p: Platform) => `${p.os}/${p.architecture}`;

// Sizes as V8 holds strings (two bytes a character at most), plus a little for the objects.
const ENTRY_OVERHEAD = 64;
const configSize = (key: string, c: ImageConfig) =>
  2 *
    (key.length +
      c.digest.length +
      c.user.length +
      c.workingDir.length +
      (c.home?.length ?? 0) +
      (c.files?.note?.length ?? 0) +
      (c.files?.user?.home?.length ?? 0) +
      (c.files?.dirs ?? []).reduce((n, [dir]) => n + dir.length + 16, 0)) +
  shapesSize(c.shapes) +
  (c.files ? 3 * ENTRY_OVERHEAD : ENTRY_OVERHEAD);
const expiringSize = (key: string, e: Expiring<string>) =>
  2 * (key.length + e.value.length) + ENTRY_OVERHEAD;

/** The key part of a pod's own credentials for a registry; undefined when they have none for it. */
function ownKey(own: OwnCredentials | undefined, registry: string): string | undefined {
  const credentials = own?.get(registry);
  if (!own || !credentials) return undefined;
  const hash = createHash("sha256")
    .update(`${own.source}\0${credentials.username}\0${credentials.password}`)
    .digest("hex")
    .slice(0, 32);
  return `own:${bounded(own.source, 64)}#${hash}`;
}

export class ImageInspector {
  private readonly configs: BoundedMap<string, ImageConfig>;
  private readonly resolved: BoundedMap<string, Expiring<string>>;
  private readonly failures: BoundedMap<string, Expiring<string>>;
  private readonly inflight = new Map<string, Promise<ImageLookup>>();
  /** What layers said of the files rules read, by layer digest: shared by every image. */
  readonly layers: LayerCache;
  private readonly plainHttp: ReadonlySet<string>;
  private readonly egress: EgressPolicy;
  private readonly limits: LookupLimits;
  private readonly now: () => number;

  constructor(private readonly options: InspectorOptions) {
    const max = options.maxEntries ?? 2000;
    const bytes = options.maxCacheBytes ?? MAX_CACHE_BYTES;
    this.configs = new BoundedMap(max, bytes, configSize);
    this.resolved = new BoundedMap(max, bytes, expiringSize);
    this.failures = new BoundedMap(max, bytes, expiringSize);
    this.layers = new LayerCache(max, bytes);
    this.plainHttp = new Set(options.plainHttp ?? []);
    this.egress = options.egress ?? egressPolicy({ plainHttp: options.plainHttp });
    this.limits = options.limits ?? processLimits;
    this.now = options.now ?? Date.now;
  }

  /** The bytes each cache holds (as they are counted against maxCacheBytes). */
  get cacheBytes(): { configs: number; resolved: number; failures: number } {
    return {
      configs: this.configs.byteSize,
      resolved: this.resolved.byteSize,
      failures: this.failures.byteSize,
    };
  }

  /** Entries and bytes of each cache (the metrics read them at scrape time). */
  cacheSizes(): Record<"configs" | "resolved" | "failures", { entries: number; bytes: number }> {
    return {
      configs: { entries: this.configs.size, bytes: this.configs.byteSize },
      resolved: { entries: this.resolved.size, bytes: this.resolved.byteSize },
      failures: { entries: this.failures.size, bytes: this.failures.byteSize },
    };
  }

  /**
   * The cached answer, with no I/O; undefined when the registry must be asked. With `own`
   * (credentials of a pod's own), what they read; else a success read without them (the admin's
   * credentials or none), never a failure without them.
   */
  cached(ref: ImageRef, platform: Platform, own?: string): ImageLookup | undefined {
    const shared = `${ref.normalised}|${platformKey(platform)}`;
    const now = this.now();
    for (const key of own ? [`${shared}|${own}`, shared] : [shared]) {
      const resolved = this.resolved.get(key);
      if (resolved && resolved.expires > now) {
        const config = this.configs.get(resolved.value);
        if (config) return { state: "known", config };
      }
    }
    const failed = this.failures.get(own ? `${shared}|${own}` : shared);
    if (failed && failed.expires > now) return { state: "unknown", reason: failed.value };
    return undefined;
  }

  /** Every image's config, keyed by its normalised reference; waits until the deadline at most. */
  async inspect(
    refs: ImageRef[],
    platform: Platform,
    options: InspectOptions = {},
  ): Promise<Map<string, ImageLookup>> {
    const answers = new Map<string, ImageLookup>();
    const pending: Promise<void>[] = [];
    let hits = 0;
    for (const ref of refs) {
      if (answers.has(ref.normalised)) continue;
      const own = ownKey(options.own, ref.registry);
      const hit = this.cached(ref, platform, own);
      if (hit) {
        hits++;
        answers.set(ref.normalised, hit);
        continue;
      }
      answers.set(ref.normalised, { state: "unknown", reason: "pending" });
      pending.push(
        this.lookup(ref, platform, own ? options.own : undefined).then(
          a => void answers.set(ref.normalised, a),
        ),
      );
    }
    // Once per request, not per image: a pod author chooses how many images it names.
    if (hits) imageLookups.inc({ outcome: "hit" }, hits);
    if (!pending.length) return answers;
    const budgetMs = this.options.budgetMs;
    const waitMs = Math.min(budgetMs, (options.deadline ?? Infinity) - Date.now());
    const late: ImageLookup = {
      state: "unknown",
      reason: `the registry did not answer within ${budgetMs} ms (images.budgetMs); the answer is kept for the next request`,
    };
    let timer: NodeJS.Timeout | undefined;
    const done = await Promise.race([
      Promise.all(pending).then(() => true),
      new Promise<boolean>(ok => (timer = setTimeout(() => ok(false), Math.max(0, waitMs)))),
    ]);
    clearTimeout(timer);
    // A copy: lookups still running must not change the answer given.
    const given = new Map(answers);
    if (!done) {
      budgetExhausted.inc({ what: "image-lookup" });
      for (const [image, answer] of given)
        if (answer.state === "unknown" && answer.reason === "pending") given.set(image, late);
    }
    return given;
  }

  private lookup(ref: ImageRef, platform: Platform, own?: OwnCredentials): Promise<ImageLookup> {
    const ownPart = ownKey(own, ref.registry);
    const key = `${ref.normalised}|${platformKey(platform)}${ownPart ? `|${ownPart}` : ""}`;
    const running = this.inflight.get(key);
    if (running) return running;
    // Past the cap, unknown at once (and not remembered: it says nothing of the image).
    if (!this.limits.tryStart()) {
      imageLookups.inc({ outcome: "busy" });
      return Promise.resolve({ state: "unknown", reason: REASONS.busy });
    }
    const started = (async (): Promise<ImageLookup> => {
      const begun = performance.now();
      const result = await fetchImageConfig(ref, platform, {
        plainHttp: this.plainHttp,
        egress: this.egress,
        limits: this.limits,
        credentials: registry => own?.get(registry) ?? this.options.credentials?.(registry),
        fetch: this.options.fetch,
        signal: AbortSignal.timeout(this.options.lookupTimeoutMs ?? 10_000),
        ...(this.options.files
          ? { files: { ...this.options.files, cache: this.layers, ownKey: ownPart } }
          : {}),
      });
      imageLookupDuration.observe((performance.now() - begun) / 1000);
      imageLookups.inc({ outcome: result.ok ? "fetched" : reasonClass(result.reason) });
      const now = this.now();
      if (!result.ok) {
        // Under the credential source's key: a tenant's wrong secret fails for that tenant only.
        if (result.reason !== REASONS.busy)
          this.failures.set(key, {
            value: result.reason,
            expires: now + (this.options.failureTtlMs ?? 30_000),
          });
        this.options.onFailure?.(bounded(ref.normalised), result.detail);
        return { state: "unknown", reason: result.reason };
      }
      this.configs.set(result.config.digest, result.config);
      this.failures.delete(key);
      // A reference by digest names the same bytes for ever; a tag may move. Files not read for
      // a passing reason (time, load) are tried again as soon as a failure would be.
      const expires = result.config.files?.transient
        ? now + (this.options.failureTtlMs ?? 30_000)
        : ref.digest
          ? Number.POSITIVE_INFINITY
          : now + (this.options.tagTtlMs ?? 300_000);
      this.resolved.set(key, { value: result.config.digest, expires });
      return { state: "known", config: result.config };
    })().finally(() => {
      this.inflight.delete(key);
      this.limits.end();
    });
    this.inflight.set(key, started);
    return started;
  }
}

/** The inspector the settings ask for (the webhook's, and `check --inspect-images`'s). */
export function imageInspectorFor(
  settings: ImageLookupSettings,
  log?: { warn: (fields: object, message: string) => void },
  credentials?: (registry: string) => CredentialAnswer,
): ImageInspector {
  const inspector = new ImageInspector({
    plainHttp: settings.images.plainHttp,
    egress: egressPolicyOf(settings),
    budgetMs: settings.images.budgetMs,
    credentials,
    ...(settings.images.readFiles
      ? {
          files: {
            maxBytes: settings.images.layerBytes,
            maxUncompressedBytes: settings.images.layerBytesUncompressed,
            // A root image's WORKDIR is read only for the copy that needs it (ADR 0033).
            rootWorkdir: settings.securityContext?.workdirCopy !== "off",
            // A root image's Env-named cache dirs, only for the emptyDirs that need them (ADR 0038).
            rootDirs: settings.securityContext?.cacheDirs !== "off",
          },
        }
      : {}),
    onFailure: (image, detail) =>
      log?.warn({ image, detail }, `image config not read (the image counts as unknown): ${image}`),
  });
  // The process's inspector: its caches' sizes are on /metrics.
  observeImageCaches(() => inspector.cacheSizes());
  return inspector;
}
