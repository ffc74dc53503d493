// The registry credentials of the controller's cloud identity (images.cloudCredentials): every
// token fetched at start, each refreshed off the admission path before it expires, read by the
// admission path without I/O. A failure is a warning, a metric and "not inspected", never a denial.
// Why: docs/adr/0039-registry-credentials-from-the-cloud-identity.md
import { guardedTransport, credentialEgressPolicy, type Transport } from "../egress";
import { bounded } from "../limits";
import { registryCredentialRefreshes } from "../../metrics";
import type { CredentialAnswer } from "../registry-client";
import { registryMatches } from "./registry-pattern";
import type { CloudCredentialEntry } from "./settings";
import { CredentialError, type CloudEnv, type FetchContext, type Obtained } from "./common";
import { ecrEndpoints, fetchEcr } from "./ecr";
import { fetchGcp, gcpEndpoints } from "./gcp";
import { acrEndpoints, fetchAcr } from "./acr";

/** One fetch (every request of it) may take this long. */
export const FETCH_TIMEOUT_MS = 10_000;
/** A token is fetched again when this share of its lifetime has passed... */
export const REFRESH_AT = 0.8;
/** ...but never sooner than this after the last fetch. */
export const MIN_REFRESH_MS = 1000;
/** A failure is retried after 1 s, doubling, up to 5 min. */
export const RETRY_FIRST_MS = 1000;
export const RETRY_MAX_MS = 5 * 60_000;

type Provider = CloudCredentialEntry["provider"];

/** One token the store keeps: an entry's (ECR, GCP) or one registry's (ACR). */
interface Slot {
  provider: Provider;
  patterns: readonly string[];
  fetch: (ctx: FetchContext) => Promise<Obtained>;
  obtained?: Obtained;
  problem?: string;
  failures: number;
  settled: boolean;
  timer?: NodeJS.Timeout;
}

export interface CloudCredentialsOptions {
  /** The controller's environment (AWS_ROLE_ARN, AZURE_TENANT_ID, ...). */
  env: CloudEnv;
  /** images.plainHttp: ACR's exchange goes over http to a registry listed there. */
  plainHttp?: readonly string[];
  /** Injected in tests; otherwise the transport of the credentials' own egress policy. */
  transport?: Transport;
  log?: { warn: (fields: object, message: string) => void };
}

export class CloudCredentials {
  private readonly slots: Slot[];
  private readonly transport: Transport;
  private readonly plainHttp: ReadonlySet<string>;
  private readonly stopping = new AbortController();
  private readonly waiters: (() => void)[] = [];

  constructor(
    entries: readonly CloudCredentialEntry[],
    private readonly options: CloudCredentialsOptions,
  ) {
    this.plainHttp = new Set(options.plainHttp ?? []);
    const endpoints: string[] = [];
    const endpointsOf = (list: () => string[]) => {
      try {
        endpoints.push(...list());
      } catch {
        // A missing identity: its fetch says so, in the log and on /metrics.
      }
    };
    this.slots = entries.flatMap((entry): Slot[] => {
      const slot = (patterns: readonly string[], fetch: Slot["fetch"]): Slot => ({
        provider: entry.provider,
        patterns,
        fetch,
        failures: 0,
        settled: false,
      });
      switch (entry.provider) {
        case "ecr":
          endpointsOf(() => ecrEndpoints(entry, options.env));
          return [slot(entry.registries, ctx => fetchEcr(entry, ctx))];
        case "gcp":
          endpointsOf(() => gcpEndpoints(entry));
          return [slot(entry.registries, ctx => fetchGcp(entry, ctx))];
        case "acr":
          // Each registry its own token: one registry's refresh token is no good at another.
          return entry.registries.map(registry => {
            endpointsOf(() => acrEndpoints(entry, registry, options.env, this.plainHttp));
            return slot([registry], ctx => fetchAcr(entry, registry, ctx));
          });
      }
    });
    this.transport = options.transport ?? guardedTransport(credentialEgressPolicy(endpoints));
  }

  /** How many tokens are kept (0: nothing configured, nothing to start). */
  get size(): number {
    return this.slots.length;
  }

  /**
   * The credentials for a registry, without I/O: those of the first entry serving it, or why they
   * could not be obtained; undefined when no entry serves it.
   */
  get(registry: string): CredentialAnswer {
    const slot = this.slots.find(s => s.patterns.some(p => registryMatches(p, registry)));
    if (!slot) return undefined;
    if (slot.obtained && slot.obtained.expiresAt > Date.now()) return slot.obtained.credentials;
    return {
      unavailable: slot.problem
        ? `the ${slot.provider} credentials could not be obtained: ${slot.problem}`
        : `the ${slot.provider} credentials are not obtained yet`,
    };
  }

  /** Fetches every token at once, each then kept fresh on its own timer. */
  start(): void {
    for (const slot of this.slots) void this.refresh(slot);
  }

  /** Resolves once every token was fetched or failed once, or after timeoutMs. */
  ready(timeoutMs: number): Promise<void> {
    if (this.slots.every(s => s.settled)) return Promise.resolve();
    return new Promise(resolve => {
      const timer = setTimeout(done, timeoutMs);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.waiters.push(done);
    });
  }

  /** No more fetches; one under way is aborted. */
  stop(): void {
    this.stopping.abort();
    for (const slot of this.slots) clearTimeout(slot.timer);
    for (const done of this.waiters.splice(0)) done();
  }

  private async refresh(slot: Slot): Promise<void> {
    if (this.stopping.signal.aborted) return;
    const started = Date.now();
    let next: number;
    try {
      const obtained = await slot.fetch({
        transport: this.transport,
        signal: AbortSignal.any([this.stopping.signal, AbortSignal.timeout(FETCH_TIMEOUT_MS)]),
        env: this.options.env,
        plainHttp: this.plainHttp,
        now: Date.now,
      });
      slot.obtained = obtained;
      slot.problem = undefined;
      slot.failures = 0;
      registryCredentialRefreshes.inc({ provider: slot.provider, result: "success" });
      next = Math.max(MIN_REFRESH_MS, REFRESH_AT * (obtained.expiresAt - started));
    } catch (e) {
      if (this.stopping.signal.aborted) return;
      // Our own messages carry no token; anything else is cut short, its text unknown.
      slot.problem =
        e instanceof CredentialError ? e.message : bounded((e as Error)?.message ?? String(e));
      slot.failures++;
      registryCredentialRefreshes.inc({ provider: slot.provider, result: "failure" });
      next = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** (slot.failures - 1));
      this.options.log?.warn(
        {
          provider: slot.provider,
          registries: bounded(slot.patterns.join(",")),
          problem: slot.problem,
        },
        `images.cloudCredentials: the ${slot.provider} credentials for ${bounded(slot.patterns.join(", "))} could not be obtained (tried again in ${Math.round(next / 1000)} s); their images are not inspected: ${slot.problem}`,
      );
    }
    slot.settled = true;
    if (this.slots.every(s => s.settled)) for (const done of this.waiters.splice(0)) done();
    if (this.stopping.signal.aborted) return;
    slot.timer = setTimeout(() => void this.refresh(slot), next);
    slot.timer.unref();
  }
}
