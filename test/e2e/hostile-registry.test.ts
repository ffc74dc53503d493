// A hostile registry and a pod author probing through it (issue 26, items 1, 2 and 5), through the
// real built controller and through `check --inspect-images`: a registry that redirects to a
// loopback "metadata" server, stalls, answers 4 MiB bodies and malformed JSON with huge texts, and
// 401s with a foreign token realm. The metadata server must never be reached, a registry that is
// not allowed must never be asked, and what users are told stays short and says nothing the
// registry wrote.
import { writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { KubeObject } from "../../lib/objects/pod";
import { admit } from "../support/admission";
import { runCheck } from "../support/check-command";
import { startEnvironment, type Environment } from "../support/environment";
import { TestRegistry } from "../support/registry";
import { tempTree } from "../unit/cli/check-helpers";

const BUDGET_MS = 500;
const registry = new TestRegistry();
/** Listed for plain HTTP (the egress policy would let it be read) but not in registries.allowed. */
const notAllowed = new TestRegistry();
let metadata: Server;
const metadataRequests: string[] = [];
let metadataHost = "";
let env: Environment;

const HUGE = "x".repeat(100_000);
const ATTACKS: Record<string, Parameters<TestRegistry["overrides"]["push"]>[0]["handle"]> = {
  // A 302 to the node's metadata service.
  redirect: (_req, res) =>
    void res
      .writeHead(302, {
        Location: `http://${metadataHost}/latest/meta-data/iam/security-credentials/node-role`,
      })
      .end(),
  // Never answers.
  stall: () => true,
  // 4 MiB, chunked (no Content-Length to refuse it by).
  huge: (_req, res) => {
    res.writeHead(200, { "Content-Type": "application/vnd.oci.image.manifest.v1+json" });
    for (let i = 0; i < 64; i++) res.write(Buffer.alloc(64 * 1024, "y"));
    res.end();
  },
  // A manifest with a huge media type, and one that is not JSON at all.
  mediatype: (_req, res) =>
    void res.writeHead(200).end(JSON.stringify({ mediaType: `text/${HUGE}`, config: {} })),
  garbage: (_req, res) => void res.writeHead(200).end(`{${HUGE}`),
  // A token realm on another host: the metadata server.
  realm: (_req, res) =>
    void res
      .writeHead(401, {
        "WWW-Authenticate": `Bearer realm="http://${metadataHost}/latest/api/token",service="${HUGE.slice(0, 4000)}"`,
      })
      .end(),
};

beforeAll(async () => {
  metadata = createServer((req, res) => {
    metadataRequests.push(req.url ?? "");
    res.writeHead(200).end('{"token":"node-role-credentials"}');
  });
  await new Promise<void>(ok => metadata.listen(0, "127.0.0.1", ok));
  metadataHost = `127.0.0.1:${(metadata.address() as AddressInfo).port}`;
  await registry.start();
  await notAllowed.start();
  for (const [name, handle] of Object.entries(ATTACKS))
    registry.overrides.push({ path: new RegExp(`^/v2/${name}/`), handle });
  registry.putImage("ok/app", "1", { User: "1001" });
  notAllowed.putImage("ml/app", "1", { User: "1001" });
  env = await startEnvironment({
    objects: [{ apiVersion: "v1", kind: "Namespace", metadata: { name: "ml" } }],
    env: {
      ADMISSION_GUARD_IMAGES_INSPECT: "true",
      ADMISSION_GUARD_IMAGES_PLAIN_HTTP: `${registry.host},${notAllowed.host}`,
      ADMISSION_GUARD_IMAGES_BUDGET_MS: String(BUDGET_MS),
      ADMISSION_GUARD_REGISTRIES_ALLOWED: registry.host,
    },
  });
}, 60_000);
afterAll(async () => {
  await env?.stop();
  await registry.stop();
  await notAllowed.stop();
  metadata?.closeAllConnections();
  await new Promise(ok => metadata?.close(ok));
});

const podOf = (images: string[], name = "probe"): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "ml" },
  spec: { containers: images.map((image, i) => ({ name: `c${i}`, image })) },
});
const hostileImages = () => Object.keys(ATTACKS).map(name => `${registry.host}/${name}/app:1`);

/** What a user is told stays short and repeats nothing the registry wrote. */
function expectShort(texts: string[]) {
  for (const text of texts) {
    expect(Buffer.byteLength(text)).toBeLessThan(1024);
    expect(text).not.toMatch(/x{8}|y{8}|ECONNREFUSED|ERR_|text\/x|node-role|HTTP \d{3}/);
  }
}

test("a pod whose images lead to a hostile registry: admitted within the budget, the metadata server never reached", async () => {
  for (const dryRun of [true, false]) {
    const begun = Date.now();
    const result = await admit(env.controller, podOf(hostileImages(), `probe-${dryRun}`), {
      dryRun,
    });
    expect(Date.now() - begun).toBeLessThan(2 * BUDGET_MS + 2000);
    expect(result.allowed).toBe(true);
    const notInspected = result.warnings.filter(w => w.includes("was not inspected"));
    expect(notInspected).toHaveLength(Object.keys(ATTACKS).length);
    expectShort(result.warnings);
    expect(result.warnings).toContainEqual(
      expect.stringContaining(
        "was not inspected (the registry host is not allowed by the egress policy (images.allowedHosts))",
      ),
    );
    expect(result.warnings).toContainEqual(
      expect.stringContaining("was not inspected (the registry's answer was not a valid image)"),
    );
  }
  expect(metadataRequests).toEqual([]);
  // The detail is in the log, bounded.
  const logs = env.controller.logs();
  expect(logs).toContain("image config not read");
  expect(logs).not.toMatch(/x{1000}|y{1000}/);
}, 30_000);

test("a pod whose images are all from registries that are not allowed causes no registry request at all", async () => {
  const before = notAllowed.requests.length;
  const result = await admit(
    env.controller,
    podOf([
      `${notAllowed.host}/ml/app:1`,
      `${metadataHost}/latest/meta-data:1`,
      "169.254.169.254/latest/meta-data:1",
    ]),
    { dryRun: true },
  );
  expect(result.allowed).toBe(false);
  expect(result.message).toContain("registry-not-allowed");
  expect(notAllowed.requests.length - before).toBe(0);
  expect(metadataRequests).toEqual([]);
  expect(result.warnings).toContainEqual(
    expect.stringContaining("was not inspected (not read, its registry is not allowed)"),
  );
});

test("many hostile pods: every warning stays under 1 KB and the controller keeps answering", async () => {
  const images = Array.from({ length: 20 }, (_, i) => `${registry.host}/huge/app:${i}`);
  const results = await Promise.all(
    [1, 2, 3, 4, 5].map(i => admit(env.controller, podOf(images, `flood-${i}`), { dryRun: true })),
  );
  for (const r of results) {
    expect(r.allowed).toBe(true);
    expectShort(r.warnings);
  }
  const ok = await admit(env.controller, podOf([`${registry.host}/ok/app:1`], "well-formed"));
  expect(ok.allowed).toBe(true);
  expect(metadataRequests).toEqual([]);
}, 30_000);

test("check --inspect-images under the same policy: the same short answers, no metadata request", async () => {
  const dir = tempTree({
    "settings.json": JSON.stringify({
      images: { inspect: true, plainHttp: [registry.host, notAllowed.host], budgetMs: BUDGET_MS },
      registries: { allowed: [registry.host] },
    }),
  });
  writeFileSync(join(dir, "hostile.json"), JSON.stringify(podOf(hostileImages())));
  const hostile = await runCheck(
    ["--settings", "settings.json", "--inspect-images", "hostile.json"],
    dir,
  );
  expect(hostile.code).toBe(0);
  expect(hostile.stdout).toContain("the registry host is not allowed by the egress policy");
  expectShort(hostile.stdout.split("\n"));
  const before = notAllowed.requests.length;
  writeFileSync(
    join(dir, "elsewhere.json"),
    JSON.stringify(podOf([`${notAllowed.host}/ml/app:1`, `${metadataHost}/x:1`])),
  );
  const elsewhere = await runCheck(
    ["--settings", "settings.json", "--inspect-images", "elsewhere.json"],
    dir,
  );
  expect(elsewhere.code).toBe(1);
  expect(notAllowed.requests.length - before).toBe(0);
  expect(metadataRequests).toEqual([]);
}, 60_000);
