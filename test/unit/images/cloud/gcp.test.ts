// Artifact Registry / GCR credentials (lib/images/cloud/gcp.ts): the GKE metadata server's token
// for the controller's Google service account, over an injected transport, hostile answers included.
import { fetchGcp, gcpEndpoints } from "../../../../lib/images/cloud/gcp";
import { MAX_LIFETIME_MS } from "../../../../lib/images/cloud/common";
import { CloudCredentialEntry, type GcpEntry } from "../../../../lib/images/cloud/settings";
import { context, fakeTransport, json, never, text } from "./fake-cloud";

const entry = (metadataEndpoint?: string): GcpEntry =>
  CloudCredentialEntry.parse({
    provider: "gcp",
    registries: ["*-docker.pkg.dev"],
    ...(metadataEndpoint ? { metadataEndpoint } : {}),
  }) as GcpEntry;
const GOOGLE = { "metadata-flavor": "Google" };
const token = (expires_in: unknown = 3599) => ({
  access_token: "ya29.token",
  expires_in,
  token_type: "Bearer",
});

describe("fetchGcp", () => {
  it("asks the metadata server with Metadata-Flavor: Google; the registry gets oauth2accesstoken", async () => {
    const { transport, seen } = fakeTransport(() => json(token(), 200, GOOGLE));
    const before = Date.now();
    const obtained = await fetchGcp(entry("http://127.0.0.1:1004/"), context(transport));
    expect(obtained.credentials).toEqual({
      username: "oauth2accesstoken",
      password: "ya29.token",
      sameHostOnly: true,
    });
    expect(obtained.expiresAt).toBeGreaterThanOrEqual(before + 3599_000);
    expect(obtained.expiresAt).toBeLessThanOrEqual(Date.now() + 3599_000);
    expect(seen).toHaveLength(1);
    expect(seen[0].method).toBe("GET");
    expect(seen[0].url.toString()).toBe(
      "http://127.0.0.1:1004/computeMetadata/v1/instance/service-accounts/default/token",
    );
    expect(seen[0].headers["metadata-flavor"]).toBe("Google");
  });

  it("defaults to the link-local metadata address", () => {
    expect(gcpEndpoints(entry())).toEqual(["http://169.254.169.254"]);
  });

  it("takes a lifetime of years as 12 h", async () => {
    const { transport } = fakeTransport(() => json(token(1e12), 200, GOOGLE));
    const obtained = await fetchGcp(entry("http://127.0.0.1:1004"), context(transport));
    expect(obtained.expiresAt).toBeLessThanOrEqual(Date.now() + MAX_LIFETIME_MS);
  });

  it.each<[string, () => Response, string]>([
    [
      "it lacks Metadata-Flavor: Google (not the metadata server)",
      () => json(token()),
      "the GKE metadata server's answer has no Metadata-Flavor: Google",
    ],
    [
      "it answers 404",
      () => text("no such account", 404),
      "the GKE metadata server answered HTTP 404",
    ],
    [
      "the token is not Bearer",
      () => json({ ...token(), token_type: "MAC" }, 200, GOOGLE),
      "the GKE metadata server gave a token that is not a Bearer token",
    ],
    [
      "expires_in is negative",
      () => json(token(-5), 200, GOOGLE),
      "the GKE metadata server gave credentials already expired",
    ],
    [
      "expires_in is a string",
      () => json(token("3599"), 200, GOOGLE),
      "the GKE metadata server gave no expires_in number",
    ],
    [
      "the answer is 1 MiB",
      () => new Response("x".repeat(1024 * 1024), { headers: GOOGLE }),
      "the GKE metadata server could not be read: its answer is over the 65536 byte limit",
    ],
    [
      "the answer is garbage",
      () => new Response("\u0000{", { headers: GOOGLE }),
      "the GKE metadata server is not a JSON object",
    ],
  ])("fails when %s", async (_, answer, message) => {
    const { transport } = fakeTransport(answer);
    await expect(fetchGcp(entry("http://127.0.0.1:1004"), context(transport))).rejects.toThrow(
      message,
    );
  });

  it("gives up on a metadata server that does not answer, at the fetch's deadline", async () => {
    const { transport } = fakeTransport(r => never(r.signal));
    await expect(
      fetchGcp(
        entry("http://127.0.0.1:1004"),
        context(transport, {}, { signal: AbortSignal.timeout(50) }),
      ),
    ).rejects.toThrow("the GKE metadata server did not answer in time");
  });
});
