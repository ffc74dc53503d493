// Reading image configs from a registry (lib/images): against a registry of the tests' own on
// loopback, in each way a real one answers — anonymous, Bearer tokens, image indexes — and in each
// way one fails. Whatever the registry does, the answer is "known" or "unknown" within the budget:
// never a throw, never a hang.
import { LiveCluster } from "../../../lib/cluster/live";
import { ImageInspector } from "../../../lib/images/inspector";
import { egressPolicy } from "../../../lib/images/egress";
import { fetchImageConfig, parseChallenge, REASONS } from "../../../lib/images/registry-client";
import { parseImage, type ImageRef } from "../../../lib/objects/image-reference";
import { TestRegistry } from "../../support/registry";
import { eventually } from "../../support/wait";

const AMD64 = { os: "linux", architecture: "amd64" };
const { unreadable: UNREADABLE, invalid: INVALID } = REASONS;
let registry: TestRegistry;

beforeEach(async () => {
  registry = new TestRegistry();
  await registry.start();
});
afterEach(() => registry.stop());

const ref = (image: string): ImageRef => {
  const parsed = parseImage(image);
  if (!parsed.ok) throw new Error(parsed.reason);
  return parsed.ref;
};
const img = (path: string) => ref(`${registry.host}/${path}`);
const read = (image: ImageRef, extra: Partial<Parameters<typeof fetchImageConfig>[2]> = {}) =>
  fetchImageConfig(image, AMD64, {
    plainHttp: new Set([registry.host]),
    signal: AbortSignal.timeout(5000),
    ...extra,
  });

describe("fetchImageConfig", () => {
  it("reads User, WorkingDir and HOME of Env through the manifest (the rest of Env is not kept)", async () => {
    const digest = registry.putImage("ml/train", "1", {
      User: "1001:1001",
      WorkingDir: "/app",
      Env: ["PATH=/bin", "HOME=/home/app"],
    });
    expect(await read(img("ml/train:1"))).toEqual({
      ok: true,
      config: {
        digest,
        user: "1001:1001",
        workingDir: "/app",
        home: "/home/app",
      },
    });
  });

  it("an image without User or WorkingDir reads as empty (the runtime's root and /)", async () => {
    registry.putImage("ml/root", "1", {});
    expect(await read(img("ml/root:1"))).toMatchObject({
      ok: true,
      config: { user: "", workingDir: "" },
    });
  });

  it("picks the node's platform from an image index, by digest too", async () => {
    const arm = registry.putImage("multi", "arm", { User: "2" });
    const amd = registry.putImage("multi", "amd", { User: "1" });
    const index = registry.putIndex("multi", "1", [
      { digest: arm, os: "linux", architecture: "arm64" },
      { digest: amd, os: "linux", architecture: "amd64" },
    ]);
    expect(await read(img("multi:1"))).toMatchObject({
      ok: true,
      config: { digest: amd, user: "1" },
    });
    expect(await read(img(`multi@${index}`))).toMatchObject({ ok: true, config: { user: "1" } });
    expect(
      await fetchImageConfig(
        img("multi:1"),
        { os: "linux", architecture: "arm64" },
        {
          plainHttp: new Set([registry.host]),
          signal: AbortSignal.timeout(5000),
        },
      ),
    ).toMatchObject({ ok: true, config: { user: "2" } });
  });

  it("an index without the node's platform is unknown, naming what it has", async () => {
    const arm = registry.putImage("armonly", "arm", {});
    registry.putIndex("armonly", "1", [{ digest: arm, os: "linux", architecture: "arm64" }]);
    expect(await read(img("armonly:1"))).toEqual({
      ok: false,
      reason: "the image has no linux/amd64 manifest",
      detail: "the image index has no linux/amd64 manifest (it has linux/arm64)",
    });
  });

  it("answers a Bearer challenge with a token from its realm, and sends it", async () => {
    registry.bearer = { token: "t0k3n" };
    registry.putImage("private/app", "1", { User: "1001" });
    expect(await read(img("private/app:1"))).toMatchObject({ ok: true, config: { user: "1001" } });
    const authorized = registry.requests.filter(r => r.path.startsWith("/v2/private"));
    expect(authorized.at(-1)?.authorization).toBe("Bearer t0k3n");
  });

  it("sends credentials to the token realm when it has them, and is refused without", async () => {
    registry.bearer = { token: "t", basic: { username: "robot", password: "s3cret" } };
    registry.putImage("private/app", "1", { User: "7" });
    expect(await read(img("private/app:1"))).toEqual({
      ok: false,
      reason: "the registry could not be read",
      detail: "the token service answered HTTP 401",
    });
    const withCredentials = await read(img("private/app:1"), {
      credentials: host =>
        host === registry.host ? { username: "robot", password: "s3cret" } : undefined,
    });
    expect(withCredentials).toMatchObject({ ok: true, config: { user: "7" } });
  });

  it("speaks plain HTTP only to registries listed in images.plainHttp", async () => {
    registry.putImage("app", "1", {});
    // Listed as a host lookups may reach, but not for plain HTTP.
    const result = await read(img("app:1"), {
      plainHttp: new Set(),
      egress: egressPolicy({ allowedHosts: [registry.host] }),
    });
    expect(result.ok).toBe(false);
    expect(registry.requests).toEqual([]); // https was tried: the plain server saw nothing it understood
  });

  it.each([
    [
      "HTTP 500",
      (res: import("node:http").ServerResponse) => res.writeHead(500).end(),
      UNREADABLE,
      "the manifest: HTTP 500",
    ],
    [
      "garbage",
      (res: import("node:http").ServerResponse) =>
        res
          .writeHead(200, { "Content-Type": "application/vnd.oci.image.manifest.v1+json" })
          .end("{not json"),
      INVALID,
      "the manifest is not a JSON object",
    ],
    [
      "an unknown media type",
      (res: import("node:http").ServerResponse) =>
        res
          .writeHead(200)
          .end(JSON.stringify({ mediaType: "application/x-helm-chart", config: {} })),
      INVALID,
      'unknown manifest media type "application/x-helm-chart"',
    ],
    [
      "a redirect loop",
      (res: import("node:http").ServerResponse) =>
        res.writeHead(307, { Location: "/v2/app/manifests/1" }).end(),
      UNREADABLE,
      "the manifest: more than 3 redirects",
    ],
    [
      "a 401 without a challenge",
      (res: import("node:http").ServerResponse) => res.writeHead(401).end(),
      UNREADABLE,
      "HTTP 401 without a Bearer or Basic challenge",
    ],
  ])(
    "a manifest answered with %s is unknown: a generic reason, the detail for the log",
    async (_what, answer, reason, detail) => {
      registry.overrides.push({ path: /\/manifests\//, handle: (_req, res) => void answer(res) });
      expect(await read(img("app:1"))).toEqual({ ok: false, reason, detail });
    },
  );

  it("a config over the size limit is unknown, and the download stops", async () => {
    registry.putImage("huge", "1", { User: "1", Labels: { pad: "x".repeat(10 * 1024 * 1024) } });
    expect(await read(img("huge:1"))).toEqual({
      ok: false,
      reason: INVALID,
      detail: expect.stringMatching(/^the config is (\d+ bytes, )?over the 1048576 byte limit$/),
    });
  });

  it("a config whose bytes do not match its digest is unknown", async () => {
    registry.putImage("tampered", "1", { User: "1001" });
    registry.overrides.push({
      path: /\/blobs\//,
      handle: (_req, res) => void res.writeHead(200).end(JSON.stringify({ config: { User: "0" } })),
    });
    expect(await read(img("tampered:1"))).toMatchObject({
      ok: false,
      reason: INVALID,
      detail: expect.stringContaining("the config's digest is"),
    });
  });

  it("a registry that does not answer in time is unknown", async () => {
    registry.putImage("slow", "1", {});
    registry.delayMs = 500;
    expect(await read(img("slow:1"), { signal: AbortSignal.timeout(100) })).toMatchObject({
      ok: false,
      reason: "the registry did not answer in time",
    });
  });

  it("a registry that is not there is unknown: the system's reason goes to the detail only", async () => {
    await registry.stop();
    const result = await read(img("gone:1"));
    expect(result).toEqual({
      ok: false,
      reason: UNREADABLE,
      detail: expect.stringContaining("ECONNREFUSED"),
    });
  });
});

describe("parseChallenge", () => {
  it("reads quoted and bare parameters", () => {
    expect(
      parseChallenge(
        'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/nginx:pull"',
      ),
    ).toEqual({
      scheme: "bearer",
      params: {
        realm: "https://auth.docker.io/token",
        service: "registry.docker.io",
        scope: "repository:library/nginx:pull",
      },
    });
    expect(parseChallenge("Basic realm=registry")).toEqual({
      scheme: "basic",
      params: { realm: "registry" },
    });
    expect(parseChallenge("")).toBeUndefined();
  });
});

describe("ImageInspector", () => {
  const inspector = (extra: Partial<ConstructorParameters<typeof ImageInspector>[0]> = {}) =>
    new ImageInspector({ plainHttp: [registry.host], budgetMs: 1000, ...extra });

  it("asks the registry once: by digest for ever, by tag until its time-to-live", async () => {
    registry.putImage("app", "1", { User: "1001" });
    let now = 0;
    const images = inspector({ now: () => now, tagTtlMs: 1000 });
    const first = await images.inspect([img("app:1")], AMD64);
    expect(first.get(img("app:1").normalised)).toMatchObject({
      state: "known",
      config: { user: "1001" },
    });
    const manifests = () => registry.countOf(/\/manifests\//);
    expect(manifests()).toBe(1);
    await images.inspect([img("app:1"), img("app:1")], AMD64);
    expect(manifests()).toBe(1);
    now = 2000;
    await images.inspect([img("app:1")], AMD64);
    expect(manifests()).toBe(2);
  });

  it("the same image asked by two requests at once is fetched once", async () => {
    registry.putImage("app", "1", {});
    registry.delayMs = 50;
    const images = inspector();
    await Promise.all([
      images.inspect([img("app:1")], AMD64),
      images.inspect([img("app:1")], AMD64),
    ]);
    expect(registry.countOf(/\/manifests\//)).toBe(1);
  });

  it("a registry slower than the budget: unknown at once, and known on the next request", async () => {
    registry.putImage("slow", "1", { User: "1001" });
    registry.delayMs = 300;
    const images = inspector({ budgetMs: 50 });
    const first = await images.inspect([img("slow:1")], AMD64);
    expect(first.get(img("slow:1").normalised)).toEqual({
      state: "unknown",
      reason: expect.stringContaining("did not answer within 50 ms"),
    });
    // The lookup went on after the budget: a later request finds its answer.
    await eventually(
      async () => {
        const later = await images.inspect([img("slow:1")], AMD64);
        expect(later.get(img("slow:1").normalised)).toMatchObject({ state: "known" });
      },
      10_000,
      100,
    );
  });

  it("a failure is remembered for a short while, then tried again", async () => {
    let now = 0;
    const failures: string[] = [];
    const images = inspector({
      now: () => now,
      failureTtlMs: 1000,
      onFailure: (i, r) => failures.push(`${i}: ${r}`),
    });
    await images.inspect([img("missing:1")], AMD64);
    await images.inspect([img("missing:1")], AMD64);
    expect(registry.countOf(/\/manifests\//)).toBe(1);
    expect(failures).toEqual([`${img("missing:1").normalised}: the manifest: HTTP 404`]);
    now = 5000;
    await images.inspect([img("missing:1")], AMD64);
    expect(registry.countOf(/\/manifests\//)).toBe(2);
  });

  it("keeps at most maxEntries per cache", async () => {
    for (let i = 0; i < 5; i++) registry.putImage("app", String(i), { User: String(1000 + i) });
    const images = inspector({ maxEntries: 2 });
    // One by one: the order they are kept in is the order they were read.
    for (let i = 0; i < 5; i++) await images.inspect([img(`app:${i}`)], AMD64);
    expect(images.cached(img("app:4"), AMD64)).toMatchObject({ state: "known" });
    expect(images.cached(img("app:0"), AMD64)).toBeUndefined();
  });
});

describe("a pod's own pull secrets (images.workloadPullSecrets, opt-in)", () => {
  it("the live view reads them (bounded, cached) and reads the private image with them; without, the image is unknown", async () => {
    registry.bearer = { token: "t", basic: { username: "team", password: "pw" } };
    registry.putImage("private/train", "1", { User: "1001" });
    const reads: string[] = [];
    const b64 = (s: string) => Buffer.from(s).toString("base64");
    const live = new LiveCluster(undefined, {
      images: new ImageInspector({ plainHttp: [registry.host], budgetMs: 2000 }),
      readSecret: async (namespace, name) => {
        reads.push(`${namespace}/${name}`);
        return {
          apiVersion: "v1",
          kind: "Secret",
          metadata: { name, namespace },
          data: {
            ".dockerconfigjson": b64(
              JSON.stringify({ auths: { [registry.host]: { auth: b64("team:pw") } } }),
            ),
          },
        };
      },
    });
    const image = img("private/train:1");
    const without = await live.imageConfigs([image], AMD64);
    expect(without.get(image.normalised)).toMatchObject({ state: "unknown" });
    const withSecrets = await live.imageConfigs([image], AMD64, {
      namespace: "team-a",
      names: ["regcred"],
    });
    expect(withSecrets.get(image.normalised)).toMatchObject({
      state: "known",
      config: { user: "1001" },
    });
    await live.imageConfigs([image], AMD64, { namespace: "team-a", names: ["regcred"] });
    expect(reads).toEqual(["team-a/regcred"]);
  });
});
