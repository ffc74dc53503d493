// What the first look at an image costs the admission request that makes it (the securityContext
// fix reads the image's config: manifest, then config blob): p50/p99 of ImageInspector.inspect()
// for images never seen before, against the tests' registry on loopback with 0, 10 and 100 ms of
// added latency per request, and the cached cost after it. In process, no webhook: the cost of
// the lookup alone.
//
// Then a named USER (issue 41) in a realistic ML image: five gzip layers, the user made in the
// second, a 1 GiB layer above it: the first resolution (every layer above the user's read), the
// cached one, and another image sharing the layers (served by the layer cache).
//
// Then the cloud identity's credentials (issue 43), side by side with none: the same images read by
// an inspector whose credentials are today's (the docker config Secrets' store, none listed) and by
// one that also asks images.cloudCredentials (a GKE entry, its token from an in-process metadata
// server), from a registry that demands that token. The cached lookup is the admission path's
// usual one: it asks no credentials, so the ratio should stay at 1.
//
//   npm run bench:images                 200 first lookups per latency
//   npm run bench:images -- --count 50
import { createHash, randomBytes } from "node:crypto";
import { gzipSync } from "node:zlib";
import { CloudCredentials } from "../lib/images/cloud/store";
import { CredentialsStore } from "../lib/images/credentials";
import { ImageInspector } from "../lib/images/inspector";
import { parseImage } from "../lib/objects/image-reference";
import { END, GZIP, gnuTar, header, passwdOf, putLayeredImage } from "../test/support/layers";
import { TestRegistry } from "../test/support/registry";

const count = Number(process.argv[process.argv.indexOf("--count") + 1]) || 200;
const AMD64 = { os: "linux", architecture: "amd64" };

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const ms = (n: number) => `${n.toFixed(n < 1 ? 3 : 1)} ms`;

async function main() {
  const rows: string[][] = [];
  for (const delayMs of [0, 10, 100]) {
    const registry = new TestRegistry();
    await registry.start();
    for (let i = 0; i < count; i++)
      registry.putImage(`bench/app${i}`, "1", { User: String(1000 + i), WorkingDir: "/app" });
    registry.delayMs = delayMs;
    const inspector = new ImageInspector({ plainHttp: [registry.host], budgetMs: 8000 });
    const refs = Array.from({ length: count }, (_, i) => {
      const parsed = parseImage(`${registry.host}/bench/app${i}:1`);
      if (!parsed.ok) throw new Error(parsed.reason);
      return parsed.ref;
    });
    const first: number[] = [];
    for (const ref of refs) {
      const start = process.hrtime.bigint();
      const answer = (await inspector.inspect([ref], AMD64)).get(ref.normalised);
      first.push(Number(process.hrtime.bigint() - start) / 1e6);
      if (answer?.state !== "known")
        throw new Error(`${ref.normalised}: ${JSON.stringify(answer)}`);
    }
    const cached: number[] = [];
    for (let round = 0; round < 5; round++)
      for (const ref of refs) {
        const start = process.hrtime.bigint();
        await inspector.inspect([ref], AMD64);
        cached.push(Number(process.hrtime.bigint() - start) / 1e6);
      }
    await registry.stop();
    first.sort((a, b) => a - b);
    cached.sort((a, b) => a - b);
    rows.push([
      `${delayMs} ms`,
      ms(percentile(first, 50)),
      ms(percentile(first, 99)),
      ms(percentile(cached, 50)),
      ms(percentile(cached, 99)),
    ]);
  }
  const line = (cells: string[]) => `| ${cells.join(" | ")} |`;
  console.log(
    `first lookups of ${count} images each (2 round trips: manifest, config), then 5 cached rounds:\n`,
  );
  console.log(
    line(["registry latency per request", "first p50", "first p99", "cached p50", "cached p99"]),
  );
  console.log(line(["---", "---:", "---:", "---:", "---:"]));
  for (const row of rows) console.log(line(row));
  await namedUser(line);
  await cloudCredentials(line);
}

const MiB = 1024 * 1024;

/** A named user under a 1 GiB gzip layer: what resolving it costs first, cached, and shared. */
async function namedUser(line: (cells: string[]) => string) {
  const registry = new TestRegistry();
  await registry.start();
  const small = (path: string, files: Parameters<typeof gnuTar>[0]) => ({
    body: gzipSync(gnuTar([{ path }, ...files])),
    mediaType: GZIP,
  });
  // 1 GiB of incompressible bytes as gzip members (one MiB each, the same bytes): a layer of
  // model weights, 1 GiB on the wire and after decompression.
  const member = gzipSync(randomBytes(MiB), { level: 1 });
  const head = gzipSync(header({ name: "opt/model.bin", size: 1024 * MiB }));
  const tail = gzipSync(END);
  const hash = createHash("sha256").update(head);
  for (let i = 0; i < 1024; i++) hash.update(member);
  const bigDigest = `sha256:${hash.update(tail).digest("hex")}`;
  registry.overrides.push({
    path: new RegExp(`/blobs/${bigDigest}$`),
    handle: (_req, res) => {
      res.writeHead(200, { "Content-Length": head.length + 1024 * member.length + tail.length });
      let i = 0;
      const pump = () => {
        for (; i < 1026; i++) {
          const chunk = i === 0 ? head : i <= 1024 ? member : tail;
          if (i === 1025) return void res.end(chunk);
          if (!res.write(chunk)) return void res.once("drain", () => (i++, pump()));
        }
      };
      pump();
    },
  });
  const layers = [
    small("bin", [{ path: "etc" }, { path: "etc/passwd", content: passwdOf() }]),
    small("home", [
      { path: "etc" },
      { path: "etc/passwd", content: passwdOf("jovyan:1000:100:/home/jovyan") },
      { path: "home/jovyan", uid: 1000, gid: 100 },
    ]),
    { digest: bigDigest, mediaType: GZIP, size: head.length + 1024 * member.length + tail.length },
    small("workspace", [{ path: "workspace/train.py", content: "print('hi')\n" }]),
    small("opt", [{ path: "opt/conf.yaml", content: "lr: 0.1\n" }]),
  ];
  putLayeredImage(
    registry,
    "bench/notebook",
    "1",
    { User: "jovyan", WorkingDir: "/workspace" },
    layers,
  );
  putLayeredImage(registry, "bench/notebook2", "1", { User: "jovyan", Env: ["A=1"] }, layers);
  const inspector = new ImageInspector({
    plainHttp: [registry.host],
    budgetMs: 120_000,
    lookupTimeoutMs: 120_000,
    files: { maxBytes: 2048 * MiB, maxUncompressedBytes: 4096 * MiB },
  });
  const refOf = (image: string) => {
    const parsed = parseImage(`${registry.host}/${image}`);
    if (!parsed.ok) throw new Error(parsed.reason);
    return parsed.ref;
  };
  const timed = async (image: string) => {
    const ref = refOf(image);
    const start = process.hrtime.bigint();
    const answer = (await inspector.inspect([ref], AMD64)).get(ref.normalised);
    const took = Number(process.hrtime.bigint() - start) / 1e6;
    if (answer?.state !== "known" || answer.config.files?.user?.uid !== 1000)
      throw new Error(`${image}: ${JSON.stringify(answer)}`);
    return took;
  };
  const heapBefore = process.memoryUsage().rss;
  const first = await timed("bench/notebook:1");
  const rssGrowth = (process.memoryUsage().rss - heapBefore) / MiB;
  const cached: number[] = [];
  for (let i = 0; i < 100; i++) cached.push(await timed("bench/notebook:1"));
  cached.sort((a, b) => a - b);
  const shared = await timed("bench/notebook2:1");
  await registry.stop();
  console.log(
    "\nnamed USER jovyan, five gzip layers, the user made in the 2nd, a 1 GiB layer above it:\n",
  );
  console.log(line(["resolution", "time", "note"]));
  console.log(line(["---", "---:", "---"]));
  console.log(line(["first", ms(first), `RSS +${rssGrowth.toFixed(0)} MiB`]));
  console.log(line(["cached (p50 of 100)", ms(percentile(cached, 50)), "no request"]));
  console.log(line(["another image, same layers", ms(shared), "its manifest and config only"]));
}

/** Lookups of `count` images through today's credentials and through the cloud identity's too. */
async function cloudCredentials(line: (cells: string[]) => string) {
  const ACCESS_TOKEN = "ya29.bench-access-token";
  const plain = new TestRegistry();
  const guarded = new TestRegistry();
  // Artifact Registry's way: a Bearer challenge whose realm (on the registry host) takes Basic
  // oauth2accesstoken:<the metadata server's access token>.
  guarded.bearer = {
    token: "registry-token",
    basic: { username: "oauth2accesstoken", password: ACCESS_TOKEN },
  };
  for (const registry of [plain, guarded]) {
    await registry.start();
    for (let i = 0; i < count; i++)
      registry.putImage(`bench/app${i}`, "1", { User: String(1000 + i), WorkingDir: "/app" });
  }
  // Today: the Secrets' store (none listed answers nothing), as lib/pepr/module-start.ts has it.
  const secrets = new CredentialsStore([]);
  const cloud = new CloudCredentials(
    [{ provider: "gcp", registries: [guarded.host], metadataEndpoint: "http://127.0.0.1:1" }],
    {
      env: {},
      // The GKE metadata server, in process: the token endpoint's answer.
      transport: async () =>
        new Response(
          JSON.stringify({ access_token: ACCESS_TOKEN, expires_in: 3599, token_type: "Bearer" }),
          { headers: { "Content-Type": "application/json", "Metadata-Flavor": "Google" } },
        ),
    },
  );
  cloud.start();
  await cloud.ready(5000);
  const runs = [
    {
      name: "none (today)",
      registry: plain,
      credentials: (registry: string) => secrets.get(registry),
    },
    {
      name: "cloudCredentials (gcp)",
      registry: guarded,
      credentials: (registry: string) => secrets.get(registry) ?? cloud.get(registry),
    },
  ].map(run => ({
    ...run,
    inspector: new ImageInspector({
      plainHttp: [run.registry.host],
      budgetMs: 8000,
      credentials: run.credentials,
    }),
    refs: Array.from({ length: count }, (_, i) => {
      const parsed = parseImage(`${run.registry.host}/bench/app${i}:1`);
      if (!parsed.ok) throw new Error(parsed.reason);
      return parsed.ref;
    }),
    first: [] as number[],
    cached: [] as number[],
    answer: [] as number[],
  }));
  const lookup = async (run: (typeof runs)[number], into: number[]) => {
    for (const ref of run.refs) {
      const start = process.hrtime.bigint();
      const answer = (await run.inspector.inspect([ref], AMD64)).get(ref.normalised);
      into.push(Number(process.hrtime.bigint() - start) / 1e6);
      if (answer?.state !== "known")
        throw new Error(`${ref.normalised}: ${JSON.stringify(answer)}`);
    }
  };
  for (const run of runs) await lookup(run, run.first);
  const firstRequests = runs.map(run => run.registry.requests.length / count);
  // Interleaved, each going first in turn: neither gets the warmer process.
  for (let round = 0; round < 20; round++)
    for (const run of round % 2 ? [...runs].reverse() : runs) await lookup(run, run.cached);
  // What asking for a registry's credentials costs (when a registry is contacted), per call.
  for (let round = 0; round < 10; round++)
    for (const run of runs) {
      const start = process.hrtime.bigint();
      for (let i = 0; i < 10_000; i++) run.credentials(run.registry.host);
      run.answer.push(Number(process.hrtime.bigint() - start) / 1e6 / 10_000);
    }
  cloud.stop();
  const guardedReads = guarded.countOf(/\/token/);
  await Promise.all([plain.stop(), guarded.stop()]);
  if (guardedReads < 1) throw new Error("the guarded registry was never asked for a token");
  for (const run of runs)
    for (const list of [run.first, run.cached, run.answer]) list.sort((a, b) => a - b);
  const [none, configured] = runs;
  const ratio = (pick: (run: (typeof runs)[number]) => number) =>
    `${(pick(configured) / pick(none)).toFixed(2)}×`;
  console.log(
    `\ncloud credentials side by side: ${count} images each, first lookups, then 20 cached rounds (interleaved):\n`,
  );
  console.log(line(["", ...runs.map(r => r.name), "ratio"]));
  console.log(line(["---", "---:", "---:", "---:"]));
  const row = (
    label: string,
    pick: (run: (typeof runs)[number]) => number,
    unit: (n: number) => string = ms,
  ) => console.log(line([label, ...runs.map(r => unit(pick(r))), ratio(pick)]));
  const µs = (n: number) => `${(n * 1000).toFixed(2)} µs`;
  row("cached p50", r => percentile(r.cached, 50), µs);
  row("cached p99", r => percentile(r.cached, 99), µs);
  row("first p50 (the guarded registry: + token round trip)", r => percentile(r.first, 50));
  console.log(
    line([
      "registry requests per first lookup",
      ...firstRequests.map(String),
      `${(firstRequests[1] / firstRequests[0]).toFixed(2)}×`,
    ]),
  );
  row(
    "credentials answer per call (p50 of 10 × 10,000)",
    r => percentile(r.answer, 50),
    n => `${(n * 1e6).toFixed(0)} ns`,
  );
}

main().catch(e => {
  console.error(e);
  process.exit(1);
});
