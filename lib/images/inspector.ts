// Image configs for the rules, from the registries, bounded for the admission path:
// - cached by manifest digest (an image by digest never goes stale), tag → digest for a few
//   minutes, a failure for a short while (a registry that is down is not asked on every pod);
// - one request's lookups run in parallel and share one budget, well inside the webhook timeout;
//   a lookup that outlives the budget goes on and fills the cache for the next request;
// - the same image asked twice at once is fetched once.
// A registry that is slow, down, refuses or answers garbage makes the image "unknown": never a
// hang, a throw or a denial by itself (the rules decide what unknown means).
import type { ImageRef } from "../image-reference";
import type { Settings } from "../settings";
import {
  fetchImageConfig,
  type ImageConfig,
  type Platform,
  type RegistryCredentials,
} from "./registry-client";
export type { RegistryCredentials };

export type { ImageConfig, Platform };

export type ImageLookup =
  | { state: "known"; config: ImageConfig }
  | { state: "unknown"; reason: string };

export interface InspectorOptions {
  plainHttp?: readonly string[];
  /** How long one request waits for all its lookups. */
  budgetMs: number;
  /** How long one lookup may go on (it fills the cache after the budget). */
  lookupTimeoutMs?: number;
  credentials?: (registry: string) => RegistryCredentials | undefined;
  /** Tag → digest is trusted this long. */
  tagTtlMs?: number;
  /** A failed lookup is not tried again for this long. */
  failureTtlMs?: number;
  /** Entries kept per cache (oldest dropped first). */
  maxEntries?: number;
  fetch?: typeof fetch;
  now?: () => number;
  /** Told of each failed lookup (the controller logs it). */
  onFailure?: (image: string, reason: string) => void;
}

interface Expiring<T> {
  value: T;
  expires: number;
}

/** A Map that drops its oldest entry past `max`. */
class BoundedMap<K, V> extends Map<K, V> {
  constructor(private readonly max: number) {
    super();
  }
  override set(key: K, value: V): this {
    this.delete(key);
    super.set(key, value);
    if (this.size > this.max) this.delete(this.keys().next().value as K);
    return this;
  }
}

export const platformKey = (p: Platform) => `${p.os}/${p.architecture}`;

export class ImageInspector {
  private readonly configs: BoundedMap<string, ImageConfig>;
  private readonly resolved: BoundedMap<string, Expiring<string>>;
  private readonly failures: BoundedMap<string, Expiring<string>>;
  private readonly inflight = new Map<string, Promise<ImageLookup>>();
  private readonly plainHttp: ReadonlySet<string>;
  private readonly now: () => number;

  constructor(private readonly options: InspectorOptions) {
    const max = options.maxEntries ?? 2000;
    this.configs = new BoundedMap(max);
    this.resolved = new BoundedMap(max);
    this.failures = new BoundedMap(max);
    this.plainHttp = new Set(options.plainHttp ?? []);
    this.now = options.now ?? Date.now;
  }

  /** The cached answer, with no I/O; undefined when the registry must be asked. */
  cached(ref: ImageRef, platform: Platform): ImageLookup | undefined {
    const key = `${ref.normalised}|${platformKey(platform)}`;
    const now = this.now();
    const resolved = this.resolved.get(key);
    if (resolved && resolved.expires > now) {
      const config = this.configs.get(resolved.value);
      if (config) return { state: "known", config };
    }
    const failed = this.failures.get(key);
    if (failed && failed.expires > now) return { state: "unknown", reason: failed.value };
    return undefined;
  }

  /** Every image's config, keyed by its normalised reference; waits at most the budget. */
  /**
   * `credentials` (a pod's own pull secrets) go before the inspector's; a lookup made with them is
   * not answered from a failure remembered without them.
   */
  async inspect(
    refs: ImageRef[],
    platform: Platform,
    credentials?: (registry: string) => RegistryCredentials | undefined,
  ): Promise<Map<string, ImageLookup>> {
    const answers = new Map<string, ImageLookup>();
    const pending: Promise<void>[] = [];
    for (const ref of refs) {
      if (answers.has(ref.normalised)) continue;
      const hit = this.cached(ref, platform);
      if (hit && !(credentials && hit.state === "unknown")) {
        answers.set(ref.normalised, hit);
        continue;
      }
      pending.push(
        this.lookup(ref, platform, credentials).then(a => void answers.set(ref.normalised, a)),
      );
    }
    if (pending.length) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(pending),
        new Promise<void>(done => (timer = setTimeout(done, this.options.budgetMs))),
      ]);
      clearTimeout(timer);
      for (const ref of refs)
        if (!answers.has(ref.normalised))
          answers.set(ref.normalised, {
            state: "unknown",
            reason: `the registry did not answer within ${this.options.budgetMs} ms (images.budgetMs); the answer is kept for the next request`,
          });
    }
    return answers;
  }

  private lookup(
    ref: ImageRef,
    platform: Platform,
    credentials?: (registry: string) => RegistryCredentials | undefined,
  ): Promise<ImageLookup> {
    const key = `${ref.normalised}|${platformKey(platform)}${credentials ? "|own" : ""}`;
    const running = this.inflight.get(key);
    if (running) return running;
    const started = (async (): Promise<ImageLookup> => {
      const result = await fetchImageConfig(ref, platform, {
        plainHttp: this.plainHttp,
        credentials: registry => credentials?.(registry) ?? this.options.credentials?.(registry),
        fetch: this.options.fetch,
        signal: AbortSignal.timeout(this.options.lookupTimeoutMs ?? 10_000),
      });
      const now = this.now();
      // Answers are about the image, whoever's credentials read it: one cache.
      const cacheKey = `${ref.normalised}|${platformKey(platform)}`;
      if (!result.ok) {
        this.failures.set(cacheKey, {
          value: result.reason,
          expires: now + (this.options.failureTtlMs ?? 30_000),
        });
        this.options.onFailure?.(ref.normalised, result.reason);
        return { state: "unknown", reason: result.reason };
      }
      this.configs.set(result.config.digest, result.config);
      this.failures.delete(cacheKey);
      // A reference by digest names the same bytes for ever; a tag may move.
      const expires = ref.digest
        ? Number.POSITIVE_INFINITY
        : now + (this.options.tagTtlMs ?? 300_000);
      this.resolved.set(cacheKey, { value: result.config.digest, expires });
      return { state: "known", config: result.config };
    })().finally(() => this.inflight.delete(key));
    this.inflight.set(key, started);
    return started;
  }
}

/** The inspector the settings ask for (the webhook's, and `check --inspect-images`'s). */
export function imageInspectorFor(
  settings: Settings,
  log?: { warn: (fields: object, message: string) => void },
  credentials?: (registry: string) => RegistryCredentials | undefined,
): ImageInspector {
  return new ImageInspector({
    plainHttp: settings.images.plainHttp,
    budgetMs: settings.images.budgetMs,
    credentials,
    onFailure: (image, reason) =>
      log?.warn(
        { image, reason },
        `image config not read (the image counts as unknown): ${image}: ${reason}`,
      ),
  });
}
