// What the first look at an image costs the admission request that makes it (the securityContext
// fix reads the image's config: manifest, then config blob): p50/p99 of ImageInspector.inspect()
// for images never seen before, against the tests' registry on loopback with 0, 10 and 100 ms of
// added latency per request, and the cached cost after it. In process, no webhook: the cost of
// the lookup alone.
//
//   npm run bench:images                 200 first lookups per latency
//   npm run bench:images -- --count 50
import { ImageInspector } from "../lib/images/inspector";
import { parseImage } from "../lib/objects/image-reference";
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
}

main().catch(e => {
  console.error(e);
  process.exit(1);
});
