// What a registry (or a pod naming images) can make the module hold: every string kept, logged or
// echoed cut to a few hundred bytes, caches bounded by bytes as well as entries, and, process-wide,
// a cap on lookups at once and on body bytes in flight. Past a cap a lookup is answered "unknown"
// at once: nothing queues.

/** The most bytes of a registry's or a pod's text that is kept, logged or said. */
export const MAX_TEXT_BYTES = 200;
/** Lookups running at once, process-wide. */
export const MAX_LOOKUPS = 16;
/** Body bytes read and not yet released, process-wide. */
export const MAX_BYTES_IN_FLIGHT = 16 * 1024 * 1024;
/** Bytes a cache of the inspector holds at most (keys and values, counted as UTF-16). */
export const MAX_CACHE_BYTES = 4 * 1024 * 1024;

/**
 * `text` cut to `maxBytes` of UTF-8 (with "…" when cut). Always a fresh string: a slice of a large
 * string would keep the whole of it alive.
 */
export function bounded(text: string, maxBytes = MAX_TEXT_BYTES): string {
  const bytes = Buffer.from(text.length > maxBytes ? text.slice(0, maxBytes) : text, "utf8");
  if (bytes.length <= maxBytes && text.length <= maxBytes) return bytes.toString("utf8");
  // A cut inside a multi-byte character decodes to U+FFFD: dropped.
  return `${bytes
    .subarray(0, maxBytes - 3)
    .toString("utf8")
    .replace(/\uFFFD+$/, "")}…`;
}

/** A Map that drops its oldest entries past `maxEntries` or past `maxBytes` (as `sizeOf` counts). */
export class BoundedMap<K, V> extends Map<K, V> {
  private bytes = 0;

  constructor(
    private readonly maxEntries: number,
    private readonly maxBytes = Number.POSITIVE_INFINITY,
    private readonly sizeOf: (key: K, value: V) => number = () => 0,
  ) {
    super();
  }

  /** The bytes held, as sizeOf counts them. */
  get byteSize(): number {
    return this.bytes;
  }

  override set(key: K, value: V): this {
    this.delete(key);
    super.set(key, value);
    this.bytes += this.sizeOf(key, value);
    while (this.size > this.maxEntries || (this.bytes > this.maxBytes && this.size > 1))
      this.delete(this.keys().next().value as K);
    return this;
  }

  override delete(key: K): boolean {
    if (!this.has(key)) return false;
    this.bytes -= this.sizeOf(key, this.get(key) as V);
    return super.delete(key);
  }

  override clear(): void {
    this.bytes = 0;
    super.clear();
  }
}

/** The process-wide caps on lookups at once and on body bytes in flight. */
export class LookupLimits {
  private lookups = 0;
  private bytes = 0;

  constructor(
    readonly maxLookups = MAX_LOOKUPS,
    readonly maxBytes = MAX_BYTES_IN_FLIGHT,
  ) {}

  /** Starts a lookup if one more may run; false: answer it "unknown" now. */
  tryStart(): boolean {
    if (this.lookups >= this.maxLookups) return false;
    this.lookups++;
    return true;
  }

  end(): void {
    this.lookups--;
  }

  /** Reserves body bytes; false when that would pass the cap (the reader gives up). */
  take(n: number): boolean {
    if (this.bytes + n > this.maxBytes) return false;
    this.bytes += n;
    return true;
  }

  give(n: number): void {
    this.bytes -= n;
  }

  /** What runs and is held now (tests, and the log when a cap is hit). */
  get usage(): { lookups: number; bytes: number } {
    return { lookups: this.lookups, bytes: this.bytes };
  }
}

/** The limits every inspector of this process shares. */
export const processLimits = new LookupLimits();
