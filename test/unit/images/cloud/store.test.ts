// The cloud identity's registry credentials kept for the admission path (lib/images/cloud/store.ts):
// every token fetched at start, refreshed at 80% of its life (never within 1 s), failures retried
// with backoff (1 s doubling to 5 min), a warning and a metric each, and get() without I/O.
import { CloudCredentials } from "../../../../lib/images/cloud/store";
import { CloudCredentialEntry } from "../../../../lib/images/cloud/settings";
import { registry as metrics } from "../../../../lib/metrics";
import { fakeTransport, json, never, tokenFile, type Handler } from "./fake-cloud";

const GOOGLE = { "metadata-flavor": "Google" };
const gcpEntry = (registries = ["*-docker.pkg.dev"]) =>
  CloudCredentialEntry.parse({
    provider: "gcp",
    registries,
    metadataEndpoint: "http://127.0.0.1:1004",
  });
const gcpToken = (token: string, expires_in = 100) =>
  json({ access_token: token, expires_in, token_type: "Bearer" }, 200, GOOGLE);

async function refreshes(provider: string, result: string): Promise<number> {
  const { values } = await metrics
    .getSingleMetric("admission_guard_registry_credential_refreshes_total")!
    .get();
  return values.find(v => v.labels.provider === provider && v.labels.result === result)?.value ?? 0;
}

function store(entries: unknown[], handler: Handler, env: Record<string, string> = {}) {
  const { transport, seen } = fakeTransport(handler);
  const warnings: string[] = [];
  const credentials = new CloudCredentials(
    entries.map(e => CloudCredentialEntry.parse(e)),
    {
      env,
      transport,
      plainHttp: ["127.0.0.1:1006"],
      log: {
        warn: (fields, message) => void warnings.push(`${message} ${JSON.stringify(fields)}`),
      },
    },
  );
  return { credentials, seen, warnings };
}

describe("CloudCredentials", () => {
  beforeEach(() =>
    jest.useFakeTimers({ doNotFake: ["nextTick", "setImmediate", "queueMicrotask"] }),
  );
  afterEach(() => jest.useRealTimers());

  it("fetches every token at once (one per ECR or GCP entry, one per ACR registry) and answers get() from them", async () => {
    const { credentials, seen } = store(
      [
        gcpEntry(["*-docker.pkg.dev"]),
        gcpEntry(["gcr.io"]),
        {
          provider: "acr",
          registries: ["127.0.0.1:1006", "b.azurecr.io"],
          authorityHost: "http://127.0.0.1:1005",
        },
      ],
      r =>
        r.url.port === "1004"
          ? gcpToken("ya29")
          : r.url.port === "1005"
            ? json({ access_token: "aad", expires_in: 3600, token_type: "Bearer" })
            : json({ refresh_token: `rt-${r.url.host}` }),
      {
        AZURE_TENANT_ID: "t",
        AZURE_CLIENT_ID: "c",
        AZURE_FEDERATED_TOKEN_FILE: tokenFile("fed"),
      },
    );
    expect(credentials.size).toBe(4);
    expect(credentials.get("europe-docker.pkg.dev")).toEqual({
      unavailable: "the gcp credentials are not obtained yet",
    });
    credentials.start();
    await credentials.ready(60_000); // the token files are read for real
    expect(seen.filter(r => r.url.port === "1004")).toHaveLength(2);
    expect(seen.filter(r => r.url.pathname === "/oauth2/exchange").map(r => r.url.host)).toEqual([
      "127.0.0.1:1006",
      "b.azurecr.io",
    ]);
    expect(credentials.get("europe-docker.pkg.dev")).toMatchObject({ password: "ya29" });
    expect(credentials.get("b.azurecr.io")).toMatchObject({ password: "rt-b.azurecr.io" });
    expect(credentials.get("127.0.0.1:1006")).toMatchObject({ password: "rt-127.0.0.1:1006" });
    // No entry serves these: anonymous (undefined), never another entry's credentials.
    expect(credentials.get("c.azurecr.io")).toBeUndefined();
    expect(credentials.get("evil.example")).toBeUndefined();
    expect(credentials.get("europe-docker.pkg.dev.evil.example")).toBeUndefined();
    credentials.stop();
  });

  it("the first entry serving a registry wins", async () => {
    const { credentials } = store(
      [
        gcpEntry(["*.pkg.dev"]),
        { ...gcpEntry(["x.pkg.dev"]), metadataEndpoint: "http://127.0.0.1:1007" },
      ],
      r => gcpToken(r.url.port),
    );
    credentials.start();
    await jest.advanceTimersByTimeAsync(0);
    expect(credentials.get("x.pkg.dev")).toMatchObject({ password: "1004" });
    credentials.stop();
  });

  it("refreshes a token at 80% of its lifetime, off the admission path", async () => {
    let n = 0;
    const { credentials, seen } = store([gcpEntry()], () => gcpToken(`tok${++n}`, 100));
    credentials.start();
    await jest.advanceTimersByTimeAsync(79_000);
    expect(seen).toHaveLength(1);
    expect(credentials.get("x-docker.pkg.dev")).toMatchObject({ password: "tok1" });
    await jest.advanceTimersByTimeAsync(1000);
    expect(seen).toHaveLength(2);
    expect(credentials.get("x-docker.pkg.dev")).toMatchObject({ password: "tok2" });
    credentials.stop();
  });

  it("never refreshes sooner than 1 s after the last fetch, however short the lifetime", async () => {
    const { credentials, seen } = store([gcpEntry()], () =>
      json({ access_token: "t", expires_in: 0.01, token_type: "Bearer" }, 200, GOOGLE),
    );
    credentials.start();
    await jest.advanceTimersByTimeAsync(999);
    expect(seen).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(1);
    expect(seen).toHaveLength(2);
    credentials.stop();
  });

  it("retries a failure after 1 s, doubling to 5 min; each a warning without the token and a metric", async () => {
    const failures = await refreshes("gcp", "failure");
    const { credentials, seen, warnings } = store([gcpEntry()], () =>
      json({ error: "denied", access_token: "ya29.secret" }, 403, GOOGLE),
    );
    credentials.start();
    const start = Date.now();
    expect(seen).toHaveLength(1); // at once
    const times: number[] = [0];
    for (let i = 0; i < 11; i++) {
      const before = seen.length;
      while (seen.length === before) await jest.advanceTimersByTimeAsync(250);
      times.push(Date.now() - start);
    }
    const gaps = times.slice(1).map((t, i) => t - times[i]);
    expect(gaps).toEqual([
      1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000, 256000, 300000, 300000,
    ]);
    expect(await refreshes("gcp", "failure")).toBe(failures + 12);
    expect(warnings[0]).toContain(
      "images.cloudCredentials: the gcp credentials for *-docker.pkg.dev could not be obtained (tried again in 1 s); their images are not inspected: the GKE metadata server answered HTTP 403",
    );
    expect(warnings.join()).not.toContain("ya29.secret");
    expect(credentials.get("a-docker.pkg.dev")).toEqual({
      unavailable:
        "the gcp credentials could not be obtained: the GKE metadata server answered HTTP 403",
    });
    credentials.stop();
  });

  it("a token that expires while its refresh fails is no longer given; the next success is", async () => {
    let fail = false;
    const successes = await refreshes("gcp", "success");
    const { credentials } = store([gcpEntry()], () =>
      fail ? json({}, 500, GOOGLE) : gcpToken("fresh", 10),
    );
    credentials.start();
    await jest.advanceTimersByTimeAsync(0);
    fail = true;
    await jest.advanceTimersByTimeAsync(9_000); // refreshed at 8 s: failed
    expect(credentials.get("a-docker.pkg.dev")).toMatchObject({ password: "fresh" });
    await jest.advanceTimersByTimeAsync(1_500); // past its 10 s
    expect(credentials.get("a-docker.pkg.dev")).toEqual({
      unavailable: expect.stringContaining("HTTP 500"),
    });
    fail = false;
    await jest.advanceTimersByTimeAsync(4_000);
    expect(credentials.get("a-docker.pkg.dev")).toMatchObject({ password: "fresh" });
    expect(await refreshes("gcp", "success")).toBe(successes + 2);
    credentials.stop();
  });

  it("says what is missing when an entry has no identity, and keeps trying (the env may be fixed by a restart only, so slowly)", async () => {
    const { credentials, seen, warnings } = store(
      [{ provider: "ecr", registries: ["*.dkr.ecr.us-east-1.amazonaws.com"], region: "us-east-1" }],
      () => json({}),
    );
    credentials.start();
    await jest.advanceTimersByTimeAsync(0);
    expect(seen).toHaveLength(0);
    expect(warnings[0]).toContain("no AWS identity");
    expect(credentials.get("1.dkr.ecr.us-east-1.amazonaws.com")).toEqual({
      unavailable: expect.stringContaining(
        "the ecr credentials could not be obtained: no AWS identity",
      ),
    });
    credentials.stop();
  });

  it("stop() ends the refreshes", async () => {
    const { credentials, seen } = store([gcpEntry()], () => gcpToken("t", 10));
    credentials.start();
    await jest.advanceTimersByTimeAsync(0);
    credentials.stop();
    await jest.advanceTimersByTimeAsync(3600_000);
    expect(seen).toHaveLength(1);
  });
});

describe("CloudCredentials.ready", () => {
  it("resolves once every token was fetched or failed once", async () => {
    const { credentials } = store(
      [gcpEntry(), { ...gcpEntry(["gcr.io"]), metadataEndpoint: "http://127.0.0.1:1007" }],
      r => (r.url.port === "1004" ? gcpToken("ok") : json({}, 500)),
    );
    credentials.start();
    await credentials.ready(60_000);
    expect(credentials.get("a-docker.pkg.dev")).toMatchObject({ password: "ok" });
    expect(credentials.get("gcr.io")).toHaveProperty("unavailable");
    credentials.stop();
  });

  it("resolves at its timeout when an endpoint does not answer (check --inspect-images goes on)", async () => {
    const { credentials } = store([gcpEntry()], r => never(r.signal));
    credentials.start();
    await credentials.ready(50);
    expect(credentials.get("a-docker.pkg.dev")).toEqual({
      unavailable: "the gcp credentials are not obtained yet",
    });
    credentials.stop();
  });
});
