// How the registry client uses the cloud identity's credentials (lib/images/registry-client.ts):
// only on the registry's own host (never to a token realm or redirect elsewhere, where a registry
// would collect them), while a docker config's still go to Docker Hub's realm; and credentials that
// could not be obtained make the image "not inspected" with their own reason.
import { createHash } from "node:crypto";
import {
  fetchImageConfig,
  REASONS,
  type CredentialAnswer,
} from "../../../../lib/images/registry-client";
import { parseImage } from "../../../../lib/objects/image-reference";
import { ImageInspector } from "../../../../lib/images/inspector";
import { registry as metrics } from "../../../../lib/metrics";
import { fakeTransport, json, type Seen } from "./fake-cloud";

const AMD64 = { os: "linux", architecture: "amd64" };
const REGISTRY = "myreg.azurecr.io";
const config = JSON.stringify({ architecture: "amd64", os: "linux", config: { User: "1001" } });
const configDigest = `sha256:${createHash("sha256").update(config).digest("hex")}`;
const manifest = {
  schemaVersion: 2,
  mediaType: "application/vnd.oci.image.manifest.v1+json",
  config: {
    mediaType: "application/vnd.oci.image.config.v1+json",
    digest: configDigest,
    size: config.length,
  },
  layers: [],
};

/**
 * A registry that wants `Bearer <token>` and names `realm` in its challenge; the realm gives the
 * token to anyone (so a test sees what was sent to it). The config blob is redirected to
 * `blobHost` when set, as registries send blobs to their storage.
 */
function registry(realm: string, blobHost?: string) {
  return fakeTransport((r: Seen) => {
    if (r.url.href.startsWith(realm)) return json({ token: "t0k" });
    if (r.url.host === blobHost) return new Response(config);
    if (r.headers.authorization !== "Bearer t0k")
      return new Response(null, {
        status: 401,
        headers: { "www-authenticate": `Bearer realm="${realm}",service="${REGISTRY}"` },
      });
    if (r.url.pathname.includes("/blobs/"))
      return blobHost
        ? new Response(null, { status: 307, headers: { location: `https://${blobHost}/b` } })
        : new Response(config);
    return json(manifest, 200, { "content-type": manifest.mediaType });
  });
}

const read = (transport: ReturnType<typeof registry>["transport"], answer: CredentialAnswer) => {
  const parsed = parseImage(`${REGISTRY}/team/app:1`);
  if (!parsed.ok) throw new Error(parsed.reason);
  return fetchImageConfig(parsed.ref, AMD64, {
    plainHttp: new Set(),
    fetch: transport,
    signal: AbortSignal.timeout(5000),
    credentials: registry => (registry === REGISTRY ? answer : undefined),
  });
};
const cloud = {
  username: "00000000-0000-0000-0000-000000000000",
  password: "rt",
  sameHostOnly: true,
};
const basic = (c: { username: string; password: string }) =>
  `Basic ${Buffer.from(`${c.username}:${c.password}`).toString("base64")}`;

describe("cloud credentials (sameHostOnly)", () => {
  it("go to a token realm on the registry's own host (ACR's /oauth2/token, Artifact Registry's /v2/token)", async () => {
    const { transport, seen } = registry(`https://${REGISTRY}/oauth2/token`);
    expect(await read(transport, cloud)).toMatchObject({ ok: true, config: { user: "1001" } });
    const realm = seen.find(r => r.url.pathname === "/oauth2/token");
    expect(realm?.headers.authorization).toBe(basic(cloud));
  });

  it("never go to a realm on another host, which gets an anonymous token request", async () => {
    const { transport, seen } = registry("https://collector.example/token");
    await read(transport, cloud);
    const realm = seen.filter(r => r.url.host === "collector.example");
    expect(realm).toHaveLength(1);
    expect(realm[0].headers.authorization).toBeUndefined();
    expect(JSON.stringify(seen)).not.toContain(basic(cloud));
  });

  it("while a docker config's still go to a realm elsewhere, as Docker Hub's auth.docker.io needs", async () => {
    const { transport, seen } = registry("https://auth.example/token");
    const docker = { username: "robot", password: "pw" };
    await read(transport, docker);
    expect(seen.find(r => r.url.host === "auth.example")?.headers.authorization).toBe(
      basic(docker),
    );
  });

  it("never follow a redirect to another host (the blob store gets no Authorization)", async () => {
    const { transport, seen } = registry(`https://${REGISTRY}/oauth2/token`, "blobs.example");
    expect(await read(transport, cloud)).toMatchObject({ ok: true });
    const blob = seen.find(r => r.url.host === "blobs.example");
    expect(blob).toBeDefined();
    expect(blob?.headers.authorization).toBeUndefined();
  });
});

describe("credentials that could not be obtained", () => {
  it("make a registry that asks for credentials 'not inspected' with the credentials' reason", async () => {
    const { transport, seen } = registry(`https://${REGISTRY}/oauth2/token`);
    const result = await read(transport, {
      unavailable: "the acr credentials are not obtained yet",
    });
    expect(result).toEqual({
      ok: false,
      reason: REASONS.credentials,
      detail: "the registry asks for credentials: the acr credentials are not obtained yet",
    });
    expect(REASONS.credentials).toBe(
      "the module's cloud credentials for this registry could not be obtained",
    );
    expect(seen).toHaveLength(1); // no token asked for
  });

  it("do not stop a registry that serves the image anonymously", async () => {
    const { transport } = fakeTransport(r =>
      r.url.pathname.includes("/blobs/")
        ? new Response(config)
        : json(manifest, 200, { "content-type": manifest.mediaType }),
    );
    expect(await read(transport, { unavailable: "down" })).toMatchObject({ ok: true });
  });
});

describe("the inspector with credentials that could not be obtained", () => {
  it("answers 'unknown' with the credentials' reason, counted as outcome credentials", async () => {
    const count = async () =>
      (await metrics.getSingleMetric("admission_guard_image_lookups_total")!.get()).values.find(
        v => v.labels.outcome === "credentials",
      )?.value ?? 0;
    const before = await count();
    const { transport } = registry(`https://${REGISTRY}/oauth2/token`);
    const failures: string[] = [];
    const inspector = new ImageInspector({
      budgetMs: 5000,
      fetch: transport,
      credentials: () => ({ unavailable: "the acr credentials are not obtained yet" }),
      onFailure: (_, detail) => void failures.push(detail),
    });
    const parsed = parseImage(`${REGISTRY}/team/app:1`);
    if (!parsed.ok) throw new Error(parsed.reason);
    const answers = await inspector.inspect([parsed.ref], AMD64);
    expect([...answers.values()]).toEqual([{ state: "unknown", reason: REASONS.credentials }]);
    expect(failures).toEqual([
      "the registry asks for credentials: the acr credentials are not obtained yet",
    ]);
    expect(await count()).toBe(before + 1);
  });
});
