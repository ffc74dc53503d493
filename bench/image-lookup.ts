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
//   npm run bench:images                 200 first lookups per latency
//   npm run bench:images -- --count 50
import { createHash, randomBytes } from "node:crypto";
import { gzipSync } from "node:zlib";
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

main().catch(e => {
  console.error(e);
  process.exit(1);
});
