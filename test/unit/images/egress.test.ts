// A registry and a pod author are untrusted (issue 26, items 1, 2, 5 and 6): where image lookups
// may connect (the egress policy, on every hop and the token realm), what a hostile registry can
// make the module hold (bounded bytes, bounded caches, capped lookups and bytes in flight), one
// deadline per request across every role, and image results kept per credential source.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { policies } from "../../../capabilities";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { LiveCluster } from "../../../lib/cluster/live";
import { review } from "../../../lib/engine";
import {
  addressAllowed,
  blockListOf,
  egressPolicy,
  egressPolicyOf,
  guardedLookup,
  refusal,
} from "../../../lib/images/egress";
import { ImageInspector } from "../../../lib/images/inspector";
import { bounded, LookupLimits } from "../../../lib/images/limits";
import { fetchImageConfig, REASONS, type ClientOptions } from "../../../lib/images/registry-client";
import { parseImage, type ImageRef } from "../../../lib/objects/image-reference";
import type { KubeObject } from "../../../lib/objects/pod";
import { parseSettings } from "../../../lib/settings";
import { TestRegistry } from "../../support/registry";

const AMD64 = { os: "linux", architecture: "amd64" };
let registry: TestRegistry;
/** A loopback "metadata" server no lookup may ever reach. */
let metadata: Server;
let metadataRequests: string[];
let metadataHost: string;

beforeEach(async () => {
  registry = new TestRegistry();
  await registry.start();
  metadataRequests = [];
  metadata = createServer((req, res) => {
    metadataRequests.push(req.url ?? "");
    res.writeHead(200, { "Content-Type": "application/json" }).end('{"token":"stolen"}');
  });
  await new Promise<void>(ok => metadata.listen(0, "127.0.0.1", ok));
  metadataHost = `127.0.0.1:${(metadata.address() as AddressInfo).port}`;
});
afterEach(async () => {
  metadata.closeAllConnections();
  await new Promise(ok => metadata.close(ok));
  await registry.stop();
});

const ref = (image: string): ImageRef => {
  const parsed = parseImage(image);
  if (!parsed.ok) throw new Error(parsed.reason);
  return parsed.ref;
};
const img = (path: string) => ref(`${registry.host}/${path}`);
/** A lookup as the webhook makes it: the guarded transport, the registry admin-listed (plainHttp). */
const read = (image: ImageRef, extra: Partial<ClientOptions> = {}) =>
  fetchImageConfig(image, AMD64, {
    plainHttp: new Set([registry.host]),
    egress: egressPolicy({ plainHttp: [registry.host] }),
    signal: AbortSignal.timeout(5000),
    ...extra,
  });
const redirectTo = (location: string) =>
  registry.overrides.push({
    path: /\/manifests\//,
    handle: (_req, res) => void res.writeHead(302, { Location: location }).end(),
  });

describe("addresses a host no admin listed may resolve to", () => {
  const blocked = blockListOf();
  it.each([
    "127.0.0.1",
    "127.1.2.3",
    "10.0.0.1",
    "172.16.5.4",
    "172.31.255.255",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "224.0.0.1",
    "255.255.255.255",
    "::",
    "::1",
    "fe80::1",
    "fe80::1%eth0",
    "fd00:ec2::254",
    "fc00::1",
    "ff02::1",
    "::ffff:127.0.0.1",
    "::ffff:7f00:1",
    "::ffff:169.254.169.254",
    "::ffff:a9fe:a9fe",
    "64:ff9b::a9fe:a9fe",
    "::127.0.0.1",
    // SIIT's IPv4-translated form ::ffff:0:0:0/96
    "::ffff:0:a9fe:a9fe",
    "::ffff:0:127.0.0.1",
    // 6to4 2002::/16 carries its IPv4 in the second and third words
    "2002:a9fe:a9fe::1",
    "2002:7f00:1::",
    "2002:c0a8:101::1",
    // local-use NAT64 (RFC 8215) and the rest of 64:ff9b::/32 outside the well-known /96
    "64:ff9b:1::a9fe:a9fe",
    "64:ff9b:1:a9fe:a9:fe00::",
    "64:ff9b:0:0:1::8.8.8.8",
    // Teredo (2001::/32) and the other IETF protocol assignments of 2001::/23
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",
    "2001:2::1",
    "2001:db8::1", // documentation
    "3fff::1", // documentation (RFC 9637)
    "fec0::1", // site-local
    "100::1", // discard-only
    "5f00::1", // SRv6 SIDs
    "192.0.0.170",
    "192.0.2.1",
    "198.18.0.1",
    "198.51.100.7",
    "203.0.113.9",
    "192.88.99.1",
    "::ffff:203.0.113.9",
    "not-an-address",
  ])("%s is refused", address => {
    expect(addressAllowed(address, blocked)).toBe(false);
  });

  it.each([
    "8.8.8.8",
    "140.82.112.3",
    "172.32.0.1",
    "100.128.0.1",
    "2606:4700::1111",
    "::ffff:8.8.8.8",
    "::ffff:0:8.8.8.8",
    "64:ff9b::808:808",
    "2002:808:808::1",
    "2001:4860:4860::8888",
    "2a00:1450:4001:80b::200e",
  ])("%s (public) is allowed", address => {
    expect(addressAllowed(address, blocked)).toBe(true);
  });

  it("images.blockedCidrs adds the cluster's public Service and Pod ranges", () => {
    const withCluster = blockListOf(["34.118.224.0/20", "2600:1900:4000::/44"]);
    expect(addressAllowed("34.118.230.7", withCluster)).toBe(false);
    expect(addressAllowed("2600:1900:4000::5", withCluster)).toBe(false);
    expect(addressAllowed("::ffff:34.118.230.7", withCluster)).toBe(false);
    expect(addressAllowed("34.118.240.1", withCluster)).toBe(true);
    // Every IPv6 form that carries the IPv4 address is judged by it.
    expect(addressAllowed("64:ff9b::2276:e607", withCluster)).toBe(false);
    expect(addressAllowed("2002:2276:e607::1", withCluster)).toBe(false);
    expect(addressAllowed("::ffff:0:2276:e607", withCluster)).toBe(false);
    expect(() => parseSettings({ images: { blockedCidrs: ["34.118.224.0/40"] } })).toThrow(
      /images\.blockedCidrs\[0\]: must be a CIDR/,
    );
  });

  it("IP literals are judged before connecting, in every form a URL normalises", () => {
    const policy = egressPolicy({});
    for (const url of [
      "https://127.0.0.1/v2/",
      "https://2130706433/v2/", // 127.0.0.1 as one number
      "https://0x7f.1/v2/",
      "https://[::1]/v2/",
      "https://[::ffff:127.0.0.1]/v2/",
      "https://169.254.169.254/latest/meta-data/",
      "https://[64:ff9b::169.254.169.254]/latest/meta-data/",
      "https://[::ffff:0:169.254.169.254]/latest/meta-data/",
      "https://[2002:a9fe:a9fe::]/latest/meta-data/",
      "https://[64:ff9b:1::a9fe:a9fe]/latest/meta-data/",
      "https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]:5000/v2/",
      "https://[fec0::1]/v2/",
    ])
      expect(refusal(new URL(url), policy)).toMatch(/egress policy refuses/);
    expect(refusal(new URL("https://ghcr.io/v2/"), policy)).toBeUndefined();
    expect(refusal(new URL("file:///etc/passwd"), policy)).toMatch(/not http/);
  });

  it("an admin-listed host:port is reached whatever it is; listing is per host and port", () => {
    const policy = egressPolicy({ allowedHosts: ["10.0.0.5:5000"], plainHttp: ["127.0.0.1:5000"] });
    expect(refusal(new URL("https://10.0.0.5:5000/v2/"), policy)).toBeUndefined();
    expect(refusal(new URL("https://10.0.0.5:5001/v2/"), policy)).toMatch(/refuses/);
    expect(refusal(new URL("http://127.0.0.1:5000/v2/"), policy)).toBeUndefined();
    // Plain HTTP only to images.plainHttp, even to a listed host.
    expect(refusal(new URL("http://10.0.0.5:5000/v2/"), policy)).toMatch(/not in images.plainHttp/);
  });

  it("the settings list allowedHosts, plainHttp, and the hosts of registries.allowed and of mirrors", () => {
    const policy = egressPolicyOf(
      parseSettings({
        images: { allowedHosts: ["blobs.internal:9000"], plainHttp: ["127.0.0.1:5000"] },
        registries: {
          allowed: ["harbor.internal/ml", "docker.io"],
          mirrors: { "quay.io": "mirror.internal:8443/quay" },
        },
      }),
    );
    expect([...policy.listed].sort()).toEqual(
      [
        "127.0.0.1:5000",
        "blobs.internal:9000",
        "docker.io",
        "harbor.internal",
        "mirror.internal:8443",
        "registry-1.docker.io",
      ].sort(),
    );
  });

  it("names are checked on the addresses DNS gives, at connect time: refused ones dropped", done => {
    const resolve = ((_host: string, _options: object, callback: (e: null, a: object[]) => void) =>
      callback(null, [
        { address: "169.254.169.254", family: 4 },
        { address: "10.1.2.3", family: 4 },
        { address: "140.82.112.3", family: 4 },
      ])) as never;
    const lookup = guardedLookup("registry.example", egressPolicy({ resolve }));
    lookup("registry.example", { all: true }, (error, addresses) => {
      expect(error).toBeNull();
      expect(addresses).toEqual([{ address: "140.82.112.3", family: 4 }]);
      done();
    });
  });

  it("a name that resolves only to refused addresses fails before any connection", done => {
    const resolve = ((_h: string, _o: object, callback: (e: null, a: object[]) => void) =>
      callback(null, [{ address: "::ffff:169.254.169.254", family: 6 }])) as never;
    guardedLookup("rebind.example", egressPolicy({ resolve }))("rebind.example", {}, error => {
      expect(error?.message).toMatch(/rebind\.example resolves only to addresses/);
      done();
    });
  });
});

describe("every connection under the egress policy", () => {
  it("a redirect to a loopback server that no admin listed is not followed", async () => {
    registry.putImage("app", "1", {});
    redirectTo(`http://${metadataHost}/latest/meta-data/iam/security-credentials/node-role`);
    const result = await read(img("app:1"));
    expect(result).toMatchObject({ ok: false, reason: REASONS.egress });
    expect(metadataRequests).toEqual([]);
  });

  it("an https redirect to a loopback name (resolved at connect time) is not followed", async () => {
    registry.putImage("app", "1", {});
    redirectTo(`https://localhost:${metadataHost.split(":")[1]}/latest/meta-data/`);
    expect(await read(img("app:1"))).toMatchObject({ ok: false, reason: REASONS.egress });
    expect(metadataRequests).toEqual([]);
  });

  it("a redirect hop to http:// goes only to an images.plainHttp host, even an allowed one", async () => {
    registry.putImage("app", "1", {});
    redirectTo(`http://${metadataHost}/v2/app/manifests/1`);
    const result = await read(img("app:1"), {
      egress: egressPolicy({ plainHttp: [registry.host], allowedHosts: [metadataHost] }),
    });
    expect(result).toMatchObject({ ok: false, reason: REASONS.egress });
    expect(result.ok || result.detail).toMatch(/plain HTTP .* not in images.plainHttp/);
    expect(metadataRequests).toEqual([]);
  });

  it("a redirect to a listed host is followed (a registry's blob store)", async () => {
    const blobs = new TestRegistry();
    await blobs.start();
    try {
      registry.putImage("app", "1", { User: "1001" });
      const digest = blobs.putImage("app", "1", { User: "1001" });
      redirectTo(`http://${blobs.host}/v2/app/manifests/${digest}`);
      const result = await read(img("app:1"), {
        plainHttp: new Set([registry.host, blobs.host]),
        egress: egressPolicy({ plainHttp: [registry.host, blobs.host] }),
      });
      expect(result).toMatchObject({ ok: true, config: { user: "1001" } });
    } finally {
      await blobs.stop();
    }
  });

  it("a token realm on a foreign host is under the same policy (not a same-host rule)", async () => {
    registry.putImage("private/app", "1", {});
    registry.overrides.push({
      path: /\/v2\//,
      handle: (_req, res) =>
        void res
          .writeHead(401, {
            "WWW-Authenticate": `Bearer realm="http://${metadataHost}/latest/api/token",service="x"`,
          })
          .end(),
    });
    expect(await read(img("private/app:1"))).toMatchObject({ ok: false, reason: REASONS.egress });
    registry.overrides.length = 0;
    registry.overrides.push({
      path: /\/v2\//,
      handle: (_req, res) =>
        void res
          .writeHead(401, { "WWW-Authenticate": `Bearer realm="https://${metadataHost}/token"` })
          .end(),
    });
    expect(await read(img("private/app:1"))).toMatchObject({ ok: false, reason: REASONS.egress });
    expect(metadataRequests).toEqual([]);
  });

  it("a registry no admin listed, on a loopback address, is never connected to", async () => {
    const result = await read(ref(`${metadataHost}/app:1`), { plainHttp: new Set([metadataHost]) });
    // plainHttp names it for the scheme, but this policy does not list it.
    expect(result).toMatchObject({ ok: false, reason: REASONS.egress });
    expect(metadataRequests).toEqual([]);
  });
});

describe("what a hostile registry can make the module hold", () => {
  it("bounded() cuts to 200 bytes of UTF-8 and copies", () => {
    expect(bounded("short")).toBe("short");
    const cut = bounded("é".repeat(1000));
    expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(200);
    expect(cut.endsWith("…")).toBe(true);
    expect(cut).not.toContain("\uFFFD");
  });

  it("a 4 MiB manifest is refused without being held; the body is not read past the cap", async () => {
    const limits = new LookupLimits();
    registry.overrides.push({
      path: /\/manifests\//,
      handle: (_req, res) => {
        res.writeHead(200, { "Content-Type": "application/vnd.oci.image.manifest.v1+json" });
        res.end(Buffer.alloc(4 * 1024 * 1024, "a"));
      },
    });
    const result = await read(img("app:1"), { limits });
    expect(result).toEqual({
      ok: false,
      reason: REASONS.invalid,
      detail: "the manifest is over the 262144 byte limit",
    });
    expect(limits.usage).toEqual({ lookups: 0, bytes: 0 });
  });

  it("malformed answers with huge texts: a generic reason, a detail of 200 bytes at most", async () => {
    const huge = "x".repeat(200_000);
    const answers = [
      JSON.stringify({ mediaType: `text/${huge}`, config: {} }),
      JSON.stringify({
        mediaType: "application/vnd.oci.image.index.v1+json",
        manifests: Array.from({ length: 2000 }, () => ({
          platform: { os: huge.slice(0, 100), architecture: "z" },
        })),
      }),
    ];
    for (const body of answers) {
      registry.overrides.length = 0;
      registry.overrides.push({
        path: /\/manifests\//,
        handle: (_req, res) => void res.writeHead(200).end(body),
      });
      const result = await read(img("app:1"));
      expect(result.ok).toBe(false);
      if (result.ok) continue;
      expect([REASONS.invalid, "the image has no linux/amd64 manifest"]).toContain(result.reason);
      expect(Buffer.byteLength(result.detail)).toBeLessThanOrEqual(200);
      expect(result.reason).not.toContain("xxxx");
    }
    registry.overrides.length = 0;
    registry.overrides.push({
      path: /\/v2\//,
      handle: (_req, res) =>
        void res
          .writeHead(401, { "WWW-Authenticate": `Bearer realm="${huge.slice(0, 8000)}"` })
          .end(),
    });
    const realm = await read(img("app:1"));
    expect(realm.ok || Buffer.byteLength(realm.detail)).toBeLessThanOrEqual(200);
  });

  it("a success keeps only User, WorkingDir and HOME, each bounded: not the Env", async () => {
    const long = "/w".repeat(50_000);
    registry.putImage("fat", "1", {
      User: "9".repeat(50_000),
      WorkingDir: long,
      Env: [`HOME=${long}`, ...Array.from({ length: 2000 }, (_, i) => `V${i}=${"v".repeat(200)}`)],
    });
    const result = await read(img("fat:1"));
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(Object.keys(result.config).sort()).toEqual(["digest", "home", "user", "workingDir"]);
    for (const text of [result.config.user, result.config.workingDir, result.config.home!])
      expect(Buffer.byteLength(text)).toBeLessThanOrEqual(200);
  });

  it("caches stay within their bytes, however many long image names fail", async () => {
    const images = new ImageInspector({
      budgetMs: 1000,
      maxCacheBytes: 20_000,
      fetch: async () => new Response(null, { status: 404 }),
    });
    const refs = Array.from({ length: 300 }, (_, i) =>
      ref(`ghcr.io/${"a".repeat(100)}/${"b".repeat(100)}/image-${i}:1`),
    );
    for (let i = 0; i < refs.length; i += 10) await images.inspect(refs.slice(i, i + 10), AMD64);
    expect(images.cacheBytes.failures).toBeGreaterThan(10_000);
    expect(images.cacheBytes.failures).toBeLessThanOrEqual(20_000);
  });

  it("past the cap on lookups at once, an image is unknown at once and nothing queues", async () => {
    registry.overrides.push({ path: /./, handle: () => true }); // never answers
    const limits = new LookupLimits(2);
    const images = new ImageInspector({ plainHttp: [registry.host], budgetMs: 300, limits });
    const refs = [1, 2, 3, 4, 5].map(i => img(`stall-${i}:1`));
    const answers = await images.inspect(refs, AMD64);
    const reasons = [...answers.values()].map(a => (a.state === "unknown" ? a.reason : "known"));
    expect(reasons.filter(r => r === REASONS.busy)).toHaveLength(3);
    expect(reasons.filter(r => r.includes("did not answer within 300 ms"))).toHaveLength(2);
    expect(registry.requests).toHaveLength(2);
    // "Busy" says nothing of the image: not remembered.
    expect(images.cached(refs[4], AMD64)).toBeUndefined();
  });

  it("past the cap on bytes in flight, a body is dropped and the image unknown", async () => {
    registry.putImage("app", "1", { User: "1001" });
    const limits = new LookupLimits(16, 100);
    const result = await read(img("app:1"), { limits });
    expect(result).toMatchObject({ ok: false, reason: REASONS.busy });
    expect(limits.usage.bytes).toBe(0);
  });
});

describe("one deadline per request", () => {
  it("the inspector waits until the request's deadline, not a budget of its own", async () => {
    registry.overrides.push({ path: /./, handle: () => true });
    const images = new ImageInspector({ plainHttp: [registry.host], budgetMs: 5000 });
    const started = Date.now();
    const answers = await images.inspect([img("stall:1")], AMD64, { deadline: started + 150 });
    expect(Date.now() - started).toBeLessThan(1000);
    expect(answers.get(img("stall:1").normalised)).toMatchObject({ state: "unknown" });
  });

  const rayOf = (images: string[]): KubeObject => ({
    apiVersion: "ray.io/v1",
    kind: "RayCluster",
    metadata: { name: "rc", namespace: "ml" },
    spec: {
      headGroupSpec: {
        template: {
          spec: { containers: [{ name: "ray", image: `${registry.host}/${images[0]}` }] },
        },
      },
      workerGroupSpecs: images.slice(1).map((image, i) => ({
        groupName: `g${i}`,
        replicas: 1,
        template: { spec: { containers: [{ name: "ray", image: `${registry.host}/${image}` }] } },
      })),
    },
  });
  const judgeWith = (budgetMs: number, ray: KubeObject) =>
    review(policies, ray, {
      settings: parseSettings({ images: { plainHttp: [registry.host], budgetMs } }),
      cluster: new SnapshotCluster(
        [{ apiVersion: "v1", kind: "Namespace", metadata: { name: "ml" } }],
        undefined,
        new ImageInspector({ plainHttp: [registry.host], budgetMs }),
      ),
    });
  const FIVE = ["head:1", "worker-1:1", "worker-2:1", "worker-3:1", "worker-4:1"];

  it("a RayCluster of 5 groups on a registry that never answers waits about one budget, fixes and checks together", async () => {
    registry.overrides.push({ path: /./, handle: () => true });
    const budgetMs = 300;
    const started = Date.now();
    const r = await judgeWith(budgetMs, rayOf(FIVE));
    const elapsed = Date.now() - started;
    expect(r.warnings.join("\n")).toContain(`did not answer within ${budgetMs} ms`);
    // A budget per role was 5 budgets in the fixes and 5 again in the checks.
    expect(elapsed).toBeLessThan(3 * budgetMs);
  });

  it("the lookups of every role start at once: a slow registry answers them all within one budget", async () => {
    for (const image of FIVE) registry.putImage(image.split(":")[0], "1", { User: "1001" });
    registry.delayMs = 150; // 300 ms an image (manifest, then config): 1,500 one role after another
    const r = await judgeWith(900, rayOf(FIVE));
    expect(r.warnings.join("\n")).not.toContain("was not inspected");
    expect(r.warnings.join("\n")).not.toContain("did not answer");
  });
});

describe("image results per credential source (images.workloadPullSecrets)", () => {
  const b64 = (s: string) => Buffer.from(s).toString("base64");
  const secretOf = (user: string, password: string) => (namespace: string, name: string) =>
    Promise.resolve({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name, namespace },
      data: {
        ".dockerconfigjson": b64(
          JSON.stringify({ auths: { [registry.host]: { auth: b64(`${user}:${password}`) } } }),
        ),
      },
    } as KubeObject);

  it("a result read with tenant A's pull secret never answers tenant B", async () => {
    registry.bearer = { token: "t", basic: { username: "team-a", password: "pw" } };
    registry.putImage("private/train", "1", { User: "1001" });
    const images = new ImageInspector({ plainHttp: [registry.host], budgetMs: 2000 });
    const reads: Record<string, ReturnType<typeof secretOf>> = {
      "team-a/regcred": secretOf("team-a", "pw"),
      "team-b/regcred": secretOf("team-b", "guess"),
    };
    const live = new LiveCluster(undefined, {
      images,
      readSecret: (namespace, name) => reads[`${namespace}/${name}`](namespace, name),
    });
    const image = img("private/train:1");
    const a = await live.imageConfigs([image], AMD64, { namespace: "team-a", names: ["regcred"] });
    expect(a.get(image.normalised)).toMatchObject({ state: "known", config: { user: "1001" } });
    const b = await live.imageConfigs([image], AMD64, { namespace: "team-b", names: ["regcred"] });
    expect(b.get(image.normalised)).toMatchObject({ state: "unknown" });
    const none = await live.imageConfigs([image], AMD64);
    expect(none.get(image.normalised)).toMatchObject({ state: "unknown" });
  });

  it("tenant B's wrong pull secret does not make the image unknown for others", async () => {
    registry.bearer = { token: "t", basic: { username: "admin", password: "pw" } };
    registry.putImage("private/train", "1", { User: "1001" });
    const images = new ImageInspector({
      plainHttp: [registry.host],
      budgetMs: 2000,
      credentials: () => ({ username: "admin", password: "pw" }),
    });
    const live = new LiveCluster(undefined, { images, readSecret: secretOf("team-b", "wrong") });
    const image = img("private/train:1");
    const b = await live.imageConfigs([image], AMD64, { namespace: "team-b", names: ["regcred"] });
    expect(b.get(image.normalised)).toMatchObject({ state: "unknown" });
    // The admin's credentials, shared: not answered from B's failure.
    const others = await live.imageConfigs([image], AMD64);
    expect(others.get(image.normalised)).toMatchObject({
      state: "known",
      config: { user: "1001" },
    });
  });

  it("a pod's pull Secrets are read 8 at most", async () => {
    const reads: string[] = [];
    const live = new LiveCluster(undefined, {
      images: new ImageInspector({ plainHttp: [registry.host], budgetMs: 500 }),
      readSecret: (namespace, name) => {
        reads.push(name);
        return secretOf("u", "p")(namespace, name);
      },
    });
    registry.putImage("app", "1", {});
    const names = Array.from({ length: 50 }, (_, i) => `s${i}`);
    await live.imageConfigs([img("app:1")], AMD64, { namespace: "t", names: [...names, ...names] });
    expect(reads).toEqual(names.slice(0, 8));
  });
});
