// ACR credentials (lib/images/cloud/acr.ts): Entra ID's token for the federated identity, then the
// registry's /oauth2/exchange, over an injected transport, hostile answers included.
import { writeFileSync } from "node:fs";
import {
  ACR_REFRESH_TOKEN_MS,
  acrEndpoints,
  fetchAcr,
  jwtExpiry,
} from "../../../../lib/images/cloud/acr";
import { CloudCredentialEntry, type AcrEntry } from "../../../../lib/images/cloud/settings";
import { context, fakeTransport, json, never, tokenFile, type Seen } from "./fake-cloud";

const REGISTRY = "127.0.0.1:1006";
const entry = (): AcrEntry =>
  CloudCredentialEntry.parse({
    provider: "acr",
    registries: [REGISTRY, "other.azurecr.io"],
    authorityHost: "http://127.0.0.1:1005/",
  }) as AcrEntry;
const env = () => ({
  AZURE_TENANT_ID: "tenant-1",
  AZURE_CLIENT_ID: "client-1",
  AZURE_FEDERATED_TOKEN_FILE: tokenFile("federated.jwt"),
});
const jwt = (payload: object) =>
  `e30.${Buffer.from(JSON.stringify(payload)).toString("base64url")}.sig`;
const inAnHour = () => Math.floor(Date.now() / 1000) + 3600;

function azure(over: { aad?: (r: Seen) => Response; exchange?: (r: Seen) => Response } = {}) {
  return fakeTransport(r =>
    r.url.port === "1005"
      ? (over.aad?.(r) ?? json({ token_type: "Bearer", expires_in: 3599, access_token: "aad.tok" }))
      : (over.exchange?.(r) ?? json({ refresh_token: jwt({ exp: inAnHour() }) })),
  );
}
const plain = new Set([REGISTRY]);

describe("fetchAcr", () => {
  it("asks Entra ID with the federated token, exchanges its token at the registry, and keeps the refresh token until its exp", async () => {
    const { transport, seen } = azure();
    const exp = inAnHour();
    const obtained = await fetchAcr(
      entry(),
      REGISTRY,
      context(transport, env(), { plainHttp: plain }),
    );
    expect(obtained.credentials).toEqual({
      username: "00000000-0000-0000-0000-000000000000",
      password: jwt({ exp }),
      sameHostOnly: true,
    });
    expect(obtained.expiresAt).toBe(exp * 1000);
    const [aad, exchange] = seen;
    expect(aad.method).toBe("POST");
    expect(aad.url.toString()).toBe("http://127.0.0.1:1005/tenant-1/oauth2/v2.0/token");
    expect(aad.headers["content-type"]).toBe("application/x-www-form-urlencoded");
    expect(Object.fromEntries(new URLSearchParams(aad.body))).toEqual({
      client_id: "client-1",
      grant_type: "client_credentials",
      client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
      client_assertion: "federated.jwt",
      scope: "https://management.azure.com/.default",
    });
    // Plain HTTP to the registry because images.plainHttp lists it.
    expect(exchange.url.toString()).toBe(`http://${REGISTRY}/oauth2/exchange`);
    expect(Object.fromEntries(new URLSearchParams(exchange.body))).toEqual({
      grant_type: "access_token",
      service: REGISTRY,
      tenant: "tenant-1",
      access_token: "aad.tok",
    });
  });

  it("speaks https to a registry images.plainHttp does not list", async () => {
    const { transport, seen } = azure();
    await fetchAcr(entry(), "other.azurecr.io", context(transport, env()));
    expect(seen[1].url.toString()).toBe("https://other.azurecr.io/oauth2/exchange");
  });

  it("keeps a refresh token that is not a JWT for 3 h", async () => {
    const { transport } = azure({ exchange: () => json({ refresh_token: "opaque" }) });
    const before = Date.now();
    const obtained = await fetchAcr(entry(), REGISTRY, context(transport, env()));
    expect(obtained.expiresAt).toBeGreaterThanOrEqual(before + ACR_REFRESH_TOKEN_MS);
  });

  it.each<[string, { aad?: (r: Seen) => Response; exchange?: (r: Seen) => Response }, string]>([
    [
      "Entra ID refuses the assertion",
      {
        aad: () =>
          json(
            {
              error: "invalid_client",
              error_description: "AADSTS700213: No matching federated identity record found",
            },
            401,
          ),
      },
      "Entra ID answered HTTP 401 (invalid_client)",
    ],
    [
      "the registry refuses the exchange",
      { exchange: () => json({ error: "unauthorized" }, 401) },
      `ACR's token exchange on ${REGISTRY} answered HTTP 401 (unauthorized)`,
    ],
    [
      "the refresh token expired already",
      { exchange: () => json({ refresh_token: jwt({ exp: 1000 }) }) },
      `ACR's token exchange on ${REGISTRY} gave credentials already expired`,
    ],
    [
      "Entra ID gives no access_token",
      { aad: () => json({ token_type: "Bearer" }) },
      "Entra ID has no access_token string",
    ],
    [
      "the exchange answers 1 MiB",
      { exchange: () => new Response("[".repeat(1024 * 1024)) },
      "could not be read: its answer is over the 65536 byte limit",
    ],
  ])("fails when %s, never with a token in the message", async (_, over, message) => {
    const { transport } = azure(over);
    const error = fetchAcr(entry(), REGISTRY, context(transport, env()));
    await expect(error).rejects.toThrow(message);
    await expect(error).rejects.not.toThrow(/federated\.jwt|aad\.tok/);
  });

  it("needs a tenant, a client and a token file; reads the file at every fetch and refuses a 1 MiB one", async () => {
    const { transport, seen } = azure();
    await expect(
      fetchAcr(entry(), REGISTRY, context(transport, { AZURE_CLIENT_ID: "c" })),
    ).rejects.toThrow("Azure Workload Identity needs a tenant");
    const e = env();
    writeFileSync(e.AZURE_FEDERATED_TOKEN_FILE, Buffer.alloc(1024 * 1024, 65));
    await expect(fetchAcr(entry(), REGISTRY, context(transport, e))).rejects.toThrow(
      "is over 16384 bytes",
    );
    writeFileSync(e.AZURE_FEDERATED_TOKEN_FILE, "rotated.jwt");
    await fetchAcr(entry(), REGISTRY, context(transport, e));
    expect(seen).toHaveLength(2);
    expect(new URLSearchParams(seen[0].body).get("client_assertion")).toBe("rotated.jwt");
  });

  it("gives up on an Entra ID that does not answer, at the fetch's deadline", async () => {
    const { transport } = fakeTransport(r => never(r.signal));
    await expect(
      fetchAcr(entry(), REGISTRY, context(transport, env(), { signal: AbortSignal.timeout(50) })),
    ).rejects.toThrow("Entra ID did not answer in time");
  });

  it("its endpoints: the authority (default login.microsoftonline.com) and the registry itself", () => {
    expect(acrEndpoints(entry(), REGISTRY, env(), plain)).toEqual([
      "http://127.0.0.1:1005",
      `http://${REGISTRY}`,
    ]);
    const plainEntry = CloudCredentialEntry.parse({
      provider: "acr",
      registries: ["myreg.azurecr.io"],
    }) as AcrEntry;
    expect(acrEndpoints(plainEntry, "myreg.azurecr.io", env(), new Set())).toEqual([
      "https://login.microsoftonline.com",
      "https://myreg.azurecr.io",
    ]);
  });
});

describe("jwtExpiry", () => {
  it("reads exp, and nothing from what is not a JWT", () => {
    expect(jwtExpiry(jwt({ exp: 1700000000 }))).toBe(1700000000_000);
    expect(jwtExpiry(jwt({ sub: "x" }))).toBeUndefined();
    expect(jwtExpiry("a.!!!.c")).toBeUndefined();
    expect(jwtExpiry("opaque")).toBeUndefined();
  });
});
