// What the module's checks cost in the controller, cold and warm: `npm run bench:cold`.
// The seeds' pods over one connection (no request interleaves with another), the controller on a
// CPU of its own; bench/cold-preload.mjs times the `admission` capability's Validate action on Pods (every
// policy's checks and the engine around them) inside the controller:
//   - per request, as it runs: between two requests the controller runs TLS, HTTP, express and
//     Pepr, which push the module's code and data out of the CPU's caches;
//   - run again right after, twice, on the same request: how fast it warms;
//   - run 5,000 times in a row: warm, as `npm run bench:engine` measures it in process.
// Arguments NAME=value set the controller's environment (what a setting costs, cold):
//   npm run bench:cold -- ADMISSION_GUARD_RESOURCE_QUOTA_ENABLED=false
// A change that makes the checks cheaper shows here as a smaller "per request" (docs/bench.md,
// "Why the checks cost ten times more in the controller than in process").
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../test/support/controller";
import { drive, withSeededController } from "./bodies";
import { pinApart } from "./proc";

const OUT = join(REPO_ROOT, "bench/runs/cold.json");
const PHASE_SECONDS = 5;

const quantile = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];

async function main() {
  mkdirSync(join(REPO_ROOT, "bench/runs"), { recursive: true });
  const settings = process.argv.slice(2).map(arg => {
    const at = arg.indexOf("=");
    if (at < 1) throw new Error(`${arg}: expected NAME=value`);
    return [arg.slice(0, at), arg.slice(at + 1)];
  });
  const options = {
    mode: "validate" as const,
    preload: "cold-preload.mjs",
    env: { ...Object.fromEntries(settings), COLD_OUT: OUT },
  };
  await withSeededController(options, async ({ controller, pid, path, bodies }) => {
    const pinned = pinApart([pid]);
    const load = (seconds: number) => drive(controller.url, path, bodies, seconds, 1);
    const next = () => process.kill(pid, "SIGUSR2");
    await load(20); // warm-up: JIT, caches (after 10 s the first phase still ran ~10% slower)
    next();
    await load(PHASE_SECONDS); // per request
    next();
    await load(PHASE_SECONDS); // three runs per request
    next();
    await load(1); // the loop, on the first request
    process.kill(pid, "SIGUSR1");
    await new Promise(resolve => setTimeout(resolve, 1000));
    report(JSON.parse(readFileSync(OUT, "utf8")) as Record<string, number[]>, pinned);
  });
}

function report(times: Record<string, number[]>, pinned: boolean) {
  const rows: [string, number[]][] = [
    ["per request, as it runs", times.request],
    ["again: the request's first run", times.again1],
    ["again: its second run, right after", times.again2],
    ["again: its third run", times.again3],
    ["5,000 runs in a row (warm)", times.loop],
  ];
  const warm = quantile(
    [...times.loop].sort((a, b) => a - b),
    0.5,
  );
  console.log(
    `the pods capability's Validate action in the controller, the seeds' pods, one connection${pinned ? ", pinned" : ""}; µs`,
  );
  console.log(
    `${"".padEnd(36)} ${"runs".padStart(6)} ${"p50".padStart(7)} ${"mean".padStart(7)}  p50 × warm`,
  );
  for (const [name, xs] of rows) {
    const sorted = [...xs].sort((a, b) => a - b);
    const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
    const p50 = quantile(sorted, 0.5);
    console.log(
      `${name.padEnd(36)} ${String(xs.length).padStart(6)} ${p50.toFixed(1).padStart(7)} ${mean.toFixed(1).padStart(7)}  ×${(p50 / warm).toFixed(1)}`,
    );
  }
}

main().catch(e => {
  console.error(e);
  process.exit(1);
});
