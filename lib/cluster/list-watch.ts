// List then watch one kind of object in pages, handing each object on and holding none of them;
// retries with backoff, resumes from the last resourceVersion, re-lists only on 410 Gone.
// Why: docs/adr/0012-list-and-watch-holding-no-objects.md
import { GenericKind, type GenericClass, type KubernetesObject } from "kubernetes-fluent-client";
import { API_BUDGET_MS, withBudget } from "./api-calls";
import { FetchMethods, type Filters } from "kubernetes-fluent-client/dist/fluent/shared-types.js";
import { k8sCfg, pathBuilder } from "kubernetes-fluent-client/dist/fluent/utils.js";

export type ListWatchPhase = "LISTED" | "ADDED" | "MODIFIED" | "DELETED";

export interface ListWatchHandlers<T extends KubernetesObject> {
  /**
   * One object: from a list page ("LISTED") or a watch event. Awaited: the next object is not
   * read before the promise settles (backpressure: a slow consumer slows the list, memory stays a page).
   */
  onObject(obj: T, phase: ListWatchPhase): void | Promise<void>;
  /** A full (re)list begins: what the consumer holds is unconfirmed until onListEnd. */
  onListStart?(): void | Promise<void>;
  /** The (re)list completed: what the consumer holds and was not LISTED since onListStart is gone. */
  onListEnd?(): void | Promise<void>;
  /** A failed list or watch (it is retried with backoff; never thrown). */
  onError?(error: unknown): void;
}

export interface ListWatchOptions {
  /** Objects per list page (default 500). */
  pageSize?: number;
  /** A custom kind (kindOverride), one namespace, a label selector. */
  filters?: Filters;
  /** Server-side watch timeout in seconds before the watch is reopened from its resourceVersion (default 300). */
  watchTimeoutSeconds?: number;
  /** First retry delay after a failure (default 500 ms); doubled per failure in a row, with jitter. */
  retryMinMs?: number;
  /** Longest retry delay (default 10 s: an API server back from an outage is seen within it). */
  retryMaxMs?: number;
  /** Longest wait for one list page (default 60 s): a page that takes longer is retried. */
  pageTimeoutMs?: number;
  /** A watch event (one line) longer than this is an error (default MAX_LINE_BYTES, 16 MiB). */
  maxEventBytes?: number;
  /**
   * A list page longer than this is asked for again with half the limit (default MAX_PAGE_BYTES,
   * 64 MiB); a single object over it is an error.
   */
  maxPageBytes?: number;
}

export const DEFAULT_PAGE_SIZE = 500;
export const DEFAULT_WATCH_TIMEOUT_SECONDS = 300;
/** A watch event line longer than this is an error (the API server caps an object at ~1.5 MiB). */
export const MAX_LINE_BYTES = 16 * 1024 * 1024;
/**
 * A list page longer than this is not read on: tenants write the objects, and 500 pods near the
 * API server's ~1.5 MiB cap would be 750 MB in one response. Typical pods make pages of a few MiB.
 */
export const MAX_PAGE_BYTES = 64 * 1024 * 1024;
/** An error response's body is read up to this (its Status message is cut at 500 characters). */
const MAX_ERROR_BYTES = 64 * 1024;
const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 10_000;
const PAGE_TIMEOUT_MS = 60_000;
/** A watch that ends sooner than this after it opened counts as a failure (backoff, no hot loop). */
const SHORT_WATCH_MS = 250;
/** The client gives up on a watch that sent nothing this long past its server-side timeout. */
const WATCH_GRACE_MS = 30_000;
/** listPaged starts over at most this many times when its continue token expires. */
const LIST_RESTARTS = 3;

/** A response body longer than the bytes allowed for it (the rest was not read). */
export class TooLarge extends Error {
  constructor(readonly maxBytes: number) {
    super(`longer than ${maxBytes} bytes`);
  }
}

/**
 * A response body as text, read up to maxBytes: past it the body is destroyed and TooLarge thrown
 * (or, with `cut`, the text read so far is the answer).
 */
async function readAtMost(body: ResponseBody, maxBytes: number, cut = false): Promise<string> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of body) {
    bytes += chunk.byteLength;
    if (bytes > maxBytes) {
      body.destroy();
      if (cut) break;
      throw new TooLarge(maxBytes);
    }
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** What a list or watch request failed with: the HTTP status, and the API server's reason. */
export class ApiStatusError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** Retry-After, in ms, when the API server sent one (429, 503). */
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = "ApiStatusError";
  }
}

/** Stopped by stop(): ends the loops without an error report. */
class Stopped extends Error {}

const isGone = (e: unknown) => e instanceof ApiStatusError && e.status === 410;

/** The subset of undici's Dispatcher used here (the Agent k8sCfg builds). */
interface Dispatcher {
  request(options: {
    origin: string;
    path: string;
    method: "GET";
    headers?: Record<string, string>;
    signal?: AbortSignal;
    headersTimeout?: number;
    bodyTimeout?: number;
  }): Promise<{
    statusCode: number;
    headers: Record<string, string | string[] | undefined>;
    body: ResponseBody;
  }>;
  destroy(): Promise<void>;
}
interface ResponseBody extends AsyncIterable<Uint8Array> {
  text(): Promise<string>;
  destroy(error?: Error): unknown;
}

interface ListPage<T> {
  kind?: string;
  apiVersion?: string;
  metadata?: { resourceVersion?: string; continue?: string };
  items?: (T | undefined)[];
}

interface WatchEventLine {
  type?: string;
  object?: KubernetesObject & { code?: number; message?: string; reason?: string };
}

/** Requests to the API server for one kind, on one undici Agent. Holds no object. */
class KindApi {
  private dispatcher?: Dispatcher;

  constructor(
    private readonly model: GenericClass,
    private readonly filters: Filters,
    private readonly signal?: AbortSignal,
  ) {}

  /** What the requests are about, for messages: "nodes", "pytorchjobs in ml". */
  describe(): string {
    const plural = this.filters.kindOverride?.plural ?? this.filters.kindOverride?.kind;
    const what = plural ?? this.model.name;
    return this.filters.namespace ? `${what} in ${this.filters.namespace}` : what;
  }

  /**
   * GET the collection with these query parameters; the status is the caller's to judge. The
   * response must come within headersMs, and the body may pause at most bodyMs between chunks.
   */
  async get(params: Record<string, string | undefined>, headersMs: number, bodyMs = headersMs) {
    if (this.signal?.aborted) throw new Stopped();
    // Read per request, as kubernetes-fluent-client does: a rotated token is used at once.
    const { opts, serverUrl } = await k8sCfg(FetchMethods.GET);
    const fresh = opts.dispatcher as unknown as Dispatcher | undefined;
    if (!this.dispatcher) this.dispatcher = fresh;
    else if (fresh !== this.dispatcher) void fresh?.destroy().catch(() => undefined);
    if (!this.dispatcher) throw new Error("kubernetes-fluent-client built no HTTP agent");
    const url = pathBuilder(String(serverUrl), this.model, this.filters, true);
    // A name filter is a field selector on a collection, as kubernetes-fluent-client's Watcher does.
    if (this.filters.name)
      url.searchParams.set("fieldSelector", `metadata.name=${this.filters.name}`);
    for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.set(k, v);
    return this.dispatcher.request({
      origin: url.origin,
      path: url.pathname + url.search,
      method: "GET",
      headers: { ...(opts.headers as Record<string, string>), Accept: "application/json" },
      signal: this.signal,
      headersTimeout: headersMs,
      bodyTimeout: bodyMs,
    });
  }

  /** A transport failure: the next request gets a new Agent (a new connection, fresh TLS config). */
  reset(): void {
    void this.dispatcher?.destroy().catch(() => undefined);
    this.dispatcher = undefined;
  }

  close(): void {
    this.reset();
  }

  /** The error of a response that is not 200: its Status message, bounded; the body consumed. */
  async failure(
    res: { statusCode: number; headers: Record<string, unknown>; body: ResponseBody },
    doing: string,
  ): Promise<ApiStatusError> {
    const text = await readAtMost(res.body, MAX_ERROR_BYTES, true).catch(() => "");
    let message = "";
    try {
      message = String((JSON.parse(text) as { message?: unknown }).message ?? "");
    } catch {
      message = text;
    }
    if (message.length > 500) message = `${message.slice(0, 500)}...`;
    const retryAfter = Number(res.headers["retry-after"]);
    return new ApiStatusError(
      res.statusCode,
      `${doing} ${this.describe()}: HTTP ${res.statusCode}${message ? `: ${message}` : ""}`,
      Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : undefined,
    );
  }

  /**
   * One page: `limit` objects from `token` on. Rejects with ApiStatusError (410: the continue token
   * expired) or the transport's error.
   */
  async page<T>(limit: number, token: string | undefined, timeoutMs: number, maxBytes: number) {
    const res = await this.get({ limit: String(limit), continue: token }, timeoutMs);
    if (res.statusCode !== 200) throw await this.failure(res, "listing");
    return JSON.parse(await readAtMost(res.body, maxBytes)) as ListPage<T>;
  }
}

/**
 * Lists every object page by page and hands each over (awaited, in order), then releases it.
 * Resolves with the list's resourceVersion, or "expired" when a continue token expired (410): the
 * list must start over. `retry` decides what a failed page does: wait and try it again (resolves),
 * or give up (rejects); without it the error is thrown. A page over pageBytes is asked for again
 * with half the limit (a continue token holds for any limit), down to one object.
 */
/** How a list is paged: objects per page, the wait for one, the bytes one may have. */
interface PageLimits {
  size: number;
  timeoutMs: number;
  maxBytes: number;
}

async function listPages<T extends KubernetesObject>(
  api: KindApi,
  page: PageLimits,
  onObject: (obj: T) => void | Promise<void>,
  retry?: (e: unknown) => Promise<void>,
): Promise<string | "expired"> {
  let token: string | undefined;
  let resourceVersion: string | undefined;
  let limit = page.size;
  for (;;) {
    let list: ListPage<T>;
    try {
      list = await api.page<T>(limit, token, page.timeoutMs, page.maxBytes);
    } catch (e) {
      if (e instanceof TooLarge && limit > 1) {
        limit = Math.max(1, Math.floor(limit / 2));
        continue;
      }
      if (token && isGone(e)) return "expired";
      const failure =
        e instanceof TooLarge
          ? new Error(`listing ${api.describe()}: one object longer than ${e.maxBytes} bytes`)
          : e;
      if (!retry) throw failure;
      await retry(failure);
      continue;
    }
    // Every page is of the first page's snapshot: the watch resumes from its resourceVersion.
    resourceVersion ??= list.metadata?.resourceVersion;
    // Items of a List carry no kind or apiVersion: given theirs, as watch events' objects have.
    const kind = list.kind?.endsWith("List") ? list.kind.slice(0, -4) : undefined;
    const items = list.items ?? [];
    for (let i = 0; i < items.length; i++) {
      const obj = items[i];
      items[i] = undefined; // released once handed over: the page shrinks as it is consumed
      if (!obj || typeof obj !== "object") continue;
      if (kind && !obj.kind) obj.kind = kind;
      if (list.apiVersion && !obj.apiVersion) obj.apiVersion = list.apiVersion;
      await onObject(obj);
    }
    token = list.metadata?.continue || undefined;
    if (!token) return resourceVersion ?? "";
  }
}

/** The lines of a stream, each at most maxBytes (longer: an error); an empty line skipped. */
async function* linesOf(body: AsyncIterable<Uint8Array>, maxBytes: number): AsyncGenerator<string> {
  let parts: Buffer[] = [];
  let size = 0;
  const tooLong = () => new Error(`a watch event longer than ${maxBytes} bytes`);
  for await (const received of body) {
    const chunk = Buffer.isBuffer(received) ? received : Buffer.from(received);
    let start = 0;
    for (let nl = chunk.indexOf(10, start); nl !== -1; nl = chunk.indexOf(10, start)) {
      const piece = chunk.subarray(start, nl);
      if (size + piece.length > maxBytes) throw tooLong();
      const line = size
        ? Buffer.concat([...parts, piece]).toString("utf8")
        : piece.toString("utf8");
      parts = [];
      size = 0;
      start = nl + 1;
      if (line.trim()) yield line;
    }
    if (start < chunk.length) {
      size += chunk.length - start;
      if (size > maxBytes) throw tooLong();
      parts.push(chunk.subarray(start));
    }
  }
  const last = Buffer.concat(parts).toString("utf8");
  if (last.trim()) yield last;
}

export class ListWatch<T extends KubernetesObject> {
  private readonly abort = new AbortController();
  private readonly api: KindApi;
  private readonly pageSize: number;
  private readonly timeoutSeconds: number;
  private readonly retryMinMs: number;
  private readonly retryMaxMs: number;
  private readonly pageTimeoutMs: number;
  private readonly maxEventBytes: number;
  private readonly maxPageBytes: number;
  /** Where the watch resumes: the list's resourceVersion, then each event's and bookmark's. */
  private resourceVersion?: string;
  /** Failures in a row: the next retry waits retryMinMs × 2^failures (capped), jittered. */
  private failures = 0;
  private isSynced = false;
  private stopped = false;
  private firstList?: Promise<void>;
  private listed?: () => void;
  private sleeping?: { timer: NodeJS.Timeout; wake: () => void };

  constructor(
    model: GenericClass,
    private readonly handlers: ListWatchHandlers<T>,
    options: ListWatchOptions = {},
  ) {
    this.api = new KindApi(model, options.filters ?? {}, this.abort.signal);
    this.pageSize = Math.max(1, Math.floor(options.pageSize ?? DEFAULT_PAGE_SIZE));
    this.timeoutSeconds = Math.max(
      1,
      Math.floor(options.watchTimeoutSeconds ?? DEFAULT_WATCH_TIMEOUT_SECONDS),
    );
    this.retryMinMs = Math.max(1, options.retryMinMs ?? RETRY_MIN_MS);
    this.retryMaxMs = Math.max(this.retryMinMs, options.retryMaxMs ?? RETRY_MAX_MS);
    this.pageTimeoutMs = options.pageTimeoutMs ?? PAGE_TIMEOUT_MS;
    this.maxEventBytes = options.maxEventBytes ?? MAX_LINE_BYTES;
    this.maxPageBytes = options.maxPageBytes ?? MAX_PAGE_BYTES;
  }

  /**
   * true between a completed list and a failure of its watch: false from a failed request or a
   * 410 until a list completes or (after a transport failure) the watch reopens from its
   * resourceVersion.
   */
  get synced(): boolean {
    return this.isSynced;
  }

  /** Lists (paged), then watches until stop(); resolves after the first list completed. */
  start(): Promise<void> {
    if (!this.firstList) {
      this.firstList = new Promise(resolve => (this.listed = resolve));
      void this.run();
    }
    return this.firstList;
  }

  /** Ends the list or watch in flight and any wait; start() resolves if it had not. Idempotent. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.isSynced = false;
    this.abort.abort();
    if (this.sleeping) {
      clearTimeout(this.sleeping.timer);
      this.sleeping.wake();
    }
    this.api.close();
    this.listed?.();
  }

  private async run(): Promise<void> {
    let mustList = true;
    while (!this.stopped) {
      try {
        if (mustList) {
          await this.list();
          mustList = false;
          this.listed?.();
        }
        const ended = await this.watch();
        if (ended === "gone") mustList = true;
      } catch (e) {
        if (this.stopped || e instanceof Stopped) break;
        await this.failed(e);
      }
    }
    this.listed?.();
  }

  /** A failure: reported, then a wait before the retry. */
  private async failed(e: unknown): Promise<void> {
    this.isSynced = false;
    if (!(e instanceof ApiStatusError)) this.api.reset();
    this.report(e);
    await this.backoff(e instanceof ApiStatusError ? e.retryAfterMs : undefined);
  }

  private async backoff(atLeastMs = 0): Promise<void> {
    const base = Math.min(this.retryMaxMs, this.retryMinMs * 2 ** Math.min(this.failures, 30));
    this.failures++;
    // Jitter: between half and all of the delay, so that replicas do not retry in step.
    const ms = Math.max(
      Math.min(atLeastMs, this.retryMaxMs * 2),
      base / 2 + (Math.random() * base) / 2,
    );
    await new Promise<void>(wake => {
      if (this.stopped) return wake();
      // Unref'd: a wait to retry keeps no process alive (the controller's server does).
      const timer = setTimeout(() => {
        this.sleeping = undefined;
        wake();
      }, ms).unref();
      this.sleeping = { timer, wake };
    });
  }

  /** The consumer's handler: awaited; what it throws is reported, never stops the watch. */
  private async hand(obj: T, phase: ListWatchPhase): Promise<void> {
    if (this.stopped) throw new Stopped();
    try {
      await this.handlers.onObject(obj, phase);
    } catch (e) {
      this.report(e);
    }
  }

  private report(e: unknown): void {
    try {
      this.handlers.onError?.(e);
    } catch {
      // a consumer's logging failure must not stop the watch
    }
  }

  /** A full list (onListStart, LISTED..., onListEnd); a page that fails is retried in place. */
  private async list(): Promise<void> {
    for (;;) {
      await this.handlers.onListStart?.();
      const rv = await listPages<T>(
        this.api,
        { size: this.pageSize, timeoutMs: this.pageTimeoutMs, maxBytes: this.maxPageBytes },
        obj => this.hand(obj, "LISTED"),
        async e => {
          if (!this.stopped) await this.failed(e);
          if (this.stopped) throw new Stopped();
        },
      );
      if (this.stopped) throw new Stopped();
      // The snapshot expired before the last page: start over (after a wait, in case it always does).
      if (rv === "expired") {
        await this.backoff();
        if (this.stopped) throw new Stopped();
        continue;
      }
      await this.handlers.onListEnd?.();
      this.resourceVersion = rv;
      this.isSynced = true;
      return;
    }
  }

  /**
   * One watch stream from the last resourceVersion, until it ends: "ended" (timeout, the server
   * closed it) or "gone" (410: list again). Throws on a transport error or an ERROR event.
   */
  private async watch(): Promise<"ended" | "gone"> {
    const res = await this.api.get(
      {
        watch: "true",
        resourceVersion: this.resourceVersion || undefined,
        allowWatchBookmarks: "true",
        timeoutSeconds: String(this.timeoutSeconds),
      },
      this.pageTimeoutMs,
      this.timeoutSeconds * 1000 + WATCH_GRACE_MS,
    );
    if (res.statusCode === 410) {
      await res.body.text().catch(() => undefined);
      return this.ended("gone", Date.now());
    }
    if (res.statusCode !== 200) throw await this.api.failure(res, "watching");
    this.isSynced = true;
    const opened = Date.now();
    try {
      for await (const line of linesOf(res.body, this.maxEventBytes)) {
        const event = JSON.parse(line) as WatchEventLine;
        const obj = event.object;
        if (event.type === "ERROR") {
          if (obj?.code === 410) return this.ended("gone", opened);
          throw new ApiStatusError(
            obj?.code ?? 500,
            `watching ${this.api.describe()}: ${obj?.message ?? obj?.reason ?? "an ERROR event"}`,
          );
        }
        if (!obj || typeof obj !== "object") continue;
        const rv = obj.metadata?.resourceVersion;
        if (event.type === "ADDED" || event.type === "MODIFIED" || event.type === "DELETED")
          await this.hand(obj as T, event.type);
        else if (event.type !== "BOOKMARK") continue;
        // Moved once the object was handed over: a watch reopened after a failure resends it.
        if (rv) this.resourceVersion = rv;
      }
    } finally {
      res.body.destroy();
    }
    if (this.stopped) throw new Stopped();
    return this.ended("ended", opened);
  }

  /**
   * A watch that ends at once (the server refuses to keep it, or its resourceVersion is gone again
   * right after a list) waits before the next: no hot loop of lists. One that lived resets the backoff.
   */
  private async ended(how: "ended" | "gone", opened: number): Promise<"ended" | "gone"> {
    // Gone: what the consumer holds is stale until the new list completes.
    if (how === "gone") this.isSynced = false;
    if (Date.now() - opened < SHORT_WATCH_MS) await this.backoff();
    else this.failures = 0;
    return how;
  }
}

/**
 * One paged list, no watch: each object handed to onObject (awaited), nothing held. Rejects on a
 * failed page; when the continue token expires (410) the list starts over, at most LIST_RESTARTS
 * times, so an object may be handed over again.
 */
export async function listPaged<T extends KubernetesObject>(
  model: GenericClass,
  onObject: (obj: T) => void | Promise<void>,
  options: Pick<ListWatchOptions, "pageSize" | "filters" | "maxPageBytes"> = {},
): Promise<void> {
  const api = new KindApi(model, options.filters ?? {});
  const page: PageLimits = {
    size: Math.max(1, Math.floor(options.pageSize ?? DEFAULT_PAGE_SIZE)),
    timeoutMs: PAGE_TIMEOUT_MS,
    maxBytes: options.maxPageBytes ?? MAX_PAGE_BYTES,
  };
  try {
    for (let restarts = 0; ; restarts++) {
      const rv = await listPages(api, page, onObject);
      if (rv !== "expired") return;
      if (restarts >= LIST_RESTARTS)
        throw new ApiStatusError(
          410,
          `listing ${api.describe()}: the continue token kept expiring`,
        );
    }
  } finally {
    api.close();
  }
}

/** Ends a probe's list at its first object. */
const SERVED = Symbol("served");

/**
 * Whether the API server serves a custom kind (a CRD's, an API group's version): one object
 * listed (a served kind's whole list could be large) within the budget. false on 404 (not
 * installed, or not that version); any other failure throws.
 */
export async function isServed(
  kindOverride: NonNullable<Filters["kindOverride"]>,
  budgetMs = API_BUDGET_MS,
): Promise<boolean> {
  const what = `listing ${kindOverride.plural ?? kindOverride.kind}.${kindOverride.group}/${kindOverride.version}`;
  try {
    await withBudget(
      listPaged(
        GenericKind,
        () => {
          throw SERVED;
        },
        { pageSize: 1, filters: { kindOverride } },
      ),
      budgetMs,
      what,
    );
    return true;
  } catch (e) {
    if (e === SERVED) return true;
    if ((e as { status?: number }).status === 404) return false;
    throw e;
  }
}
