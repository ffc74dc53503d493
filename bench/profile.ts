// Where the controller's CPU goes on one scenario: `npm run profile -- validate` (or `mutate`;
// `--floor` profiles Pepr's floor instead).
// Runs the built controller (dist/) against the stand-in API with the seeds' cluster, drives it with
// the seeds' pods for 10 s at 8 connections, profiles exactly that load with V8's sampling profiler
// and prints µs per request: by package, and for our own code by source file and function
// (inclusive), mapped back to the TypeScript through the bundle's source map. The profile itself is
// written to bench/runs/<mode>.cpuprofile (open it in Chrome DevTools for the flame chart).
//
// Profiled figures are inflated by the profiler and the shared machine; compare them with each other,
// and measure costs with `npm run bench`.
import { mkdirSync, readFileSync } from "node:fs";
import { SourceMap } from "node:module";
import { join } from "node:path";
import { bundlePath, REPO_ROOT } from "../test/support/controller";
import { drive, withSeededController } from "./bodies";
import { buildFloor } from "./floor";

const MODE: "mutate" | "validate" = process.argv[2] === "mutate" ? "mutate" : "validate";
// --floor: profile Pepr's floor (bench/pepr-floor.ts) instead, to set its packages beside ours.
const FLOOR = process.argv.includes("--floor");
const SECONDS = 10;
const OUT = join(REPO_ROOT, "bench/runs", `${MODE}${FLOOR ? "-floor" : ""}.cpuprofile`);

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Where a profiled function comes from: a package, node itself, or our source file and line. */
function placeOf(map: SourceMap, bundle: string, frame: ProfileNode["callFrame"]) {
  if (frame.url.endsWith(bundle)) {
    const e = map.findEntry(frame.lineNumber, frame.columnNumber) as {
      originalSource?: string;
      originalLine?: number;
      name?: string;
    };
    const file = (e.originalSource ?? "?").replace(/^.*?(?=(lib|capabilities|cli)\/)/, "");
    return {
      group: file,
      fn: `${e.name || frame.functionName} ${file}:${(e.originalLine ?? 0) + 1}`,
    };
  }
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(frame.url)?.[1];
  const group = pkg ?? (frame.url ? "node" : frame.functionName || "(native)");
  return { group, fn: `${frame.functionName || "(anonymous)"} ${group}` };
}

function summarize(profile: Profile, bundle: string, requests: number) {
  const map = new SourceMap(JSON.parse(readFileSync(`${bundle}.map`, "utf8")));
  const self = new Map<number, number>();
  profile.samples.forEach((id, i) =>
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)),
  );
  const byId = new Map(profile.nodes.map(n => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const places = new Map(profile.nodes.map(n => [n.id, placeOf(map, bundle, n.callFrame)]));

  const byGroup = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const add = (m: Map<string, number>, k: string, us: number) => m.set(k, (m.get(k) ?? 0) + us);
  for (const n of profile.nodes) {
    const us = self.get(n.id) ?? 0;
    if (!us) continue;
    add(byGroup, places.get(n.id)!.group, us);
    // Inclusive time of our functions: each counted once per sample however deep it recurses.
    const seen = new Set<string>();
    for (let id: number | undefined = n.id; id !== undefined; id = parent.get(id)) {
      if (!byId.get(id)!.callFrame.url.endsWith(bundle)) continue;
      const fn = places.get(id)!.fn;
      if (seen.has(fn)) continue;
      seen.add(fn);
      add(inclusive, fn, us);
    }
  }
  const busy = [...byGroup].filter(([g]) => g !== "(idle)").reduce((s, [, us]) => s + us, 0);
  const table = (title: string, m: Map<string, number>, n: number) => {
    console.log(`\n${title}`);
    for (const [k, us] of [...m].sort((a, b) => b[1] - a[1]).slice(0, n))
      console.log(`${(us / requests).toFixed(1).padStart(8)} µs  ${k}`);
  };
  console.log(`${requests} requests; busy CPU ${(busy / requests).toFixed(0)} µs per request`);
  table("by package (self time), µs per request", byGroup, 20);
  table("our code, by function (inclusive), µs per request", inclusive, 30);
}

async function main() {
  mkdirSync(join(REPO_ROOT, "bench/runs"), { recursive: true });
  const bundle = FLOOR ? join(REPO_ROOT, "bench/runs/floor/profile-floor.js") : bundlePath();
  if (FLOOR) await buildFloor(bundle);
  const env = { PROFILE_OUT: OUT };
  const options = { mode: MODE, preload: "profile-preload.mjs", env, bundle, watches: !FLOOR };
  await withSeededController(options, async ({ controller, pid, path, bodies }) => {
    await drive(controller.url, path, bodies, 3); // warm-up: JIT, caches
    process.kill(pid, "SIGUSR2");
    const result = await drive(controller.url, path, bodies, SECONDS);
    process.kill(pid, "SIGUSR1");
    await new Promise(resolve => setTimeout(resolve, 1500));
    console.log(`${MODE}: ${result["2xx"]} answers, ${result.non2xx + result.errors} errors`);
    summarize(JSON.parse(readFileSync(OUT, "utf8")), bundle, result["2xx"]);
    console.log(`\nprofile: ${OUT}`);
  });
}

main().catch(e => {
  console.error(e);
  process.exit(1);
});
