// Steady-state A/B of server CPU per request: Pepr's floor, the module, and variants of the module
// with other settings, side by side on the same stand-in API, in rounds (each round: each server in
// turn), medians. For the question "what does this policy / setting / change cost?", which the full
// benchmark answers only roughly (short runs, many scenarios).
//
//   npm run ab -- validate                                  floor vs ours, 8 rounds of 2 s
//   npm run ab -- mutate --rounds 12 --warmup 10   10 s of load on each server first (default 3;
//                                                ours settles after ~10k requests)
//   npm run ab -- validate --variant quota-off:ADMISSION_GUARD_RESOURCE_QUOTA_ENABLED=false \
//                          --variant no-log:LOG_LEVEL=error
//   npm run ab -- validate --bundle before=/tmp/old-bundle.js   another build of the module
//   npm run ab -- validate --images       also ours reading image configs (cached) from a registry
//                                         of the tests' own that mirrors the seeds' registries
//   npm run ab -- validate --no-pin       servers and load on any CPU (by default the servers
//                                         share the last CPU and the load has the others)
//
// The seeds' pods (examples/), 8 connections, LOG_LEVEL=warn unless a variant says otherwise.
import { join } from "node:path";
import {
  bundlePath,
  REPO_ROOT,
  startController,
  type Controller,
} from "../test/support/controller";
import { seedWorkloads } from "../test/support/manifests";
import { startStandIn } from "../test/support/stand-in-api";
import { cachesSynced } from "../test/support/wait";
import { drive, seedPodBodies } from "./bodies";
import { parseImage } from "../lib/objects/image-reference";
import type { KubeObject } from "../lib/objects/pod";
import { TestRegistry } from "../test/support/registry";
import { buildFloor } from "./floor";
import { cpuSeconds, pidOnPort, pinApart } from "./proc";

interface Config {
  name: string;
  bundle: string;
  env: Record<string, string>;
  /** Another build, which may predate settings this one knows (images.inspect). */
  foreign?: boolean;
}

function parseArgs(argv: string[]) {
  const mode: "mutate" | "validate" = argv[0] === "mutate" ? "mutate" : "validate";
  const configs: Config[] = [];
  let rounds = 8;
  let seconds = 2;
  let warmup = 3;
  let images = false;
  let pin = true;
  for (let i = 1; i < argv.length; i++) {
    const [flag, value] = [argv[i], argv[i + 1] ?? ""];
    if (flag === "--images") {
      images = true;
      continue;
    }
    if (flag === "--no-pin") {
      pin = false;
      continue;
    }
    if (flag === "--rounds") rounds = Number(value);
    else if (flag === "--seconds") seconds = Number(value);
    else if (flag === "--warmup") warmup = Number(value);
    else if (flag === "--variant") {
      // name:ENV=value,ENV=value
      const at = value.indexOf(":");
      if (at < 1) throw new Error(`--variant ${value}: expected name:ENV=value,...`);
      const env = Object.fromEntries(
        value
          .slice(at + 1)
          .split(",")
          .map(kv => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
      );
      configs.push({ name: value.slice(0, at), bundle: bundlePath(), env });
    } else if (flag === "--bundle") {
      // name=path of another build of the module
      const at = value.indexOf("=");
      if (at < 1) throw new Error(`--bundle ${value}: expected name=path`);
      configs.push({
        name: value.slice(0, at),
        bundle: value.slice(at + 1),
        env: {},
        foreign: true,
      });
    } else throw new Error(`unknown argument ${flag}`);
    i++;
  }
  if (!(rounds > 0 && seconds > 0 && warmup >= 0))
    throw new Error("--rounds and --seconds must be positive, --warmup not negative");
  return { mode, configs, rounds, seconds, warmup, images, pin };
}

/** The middle value; of an even count, the mean of the two middle ones. */
const median = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

async function main() {
  const {
    mode,
    configs: variants,
    rounds,
    seconds,
    warmup,
    images,
    pin,
  } = parseArgs(process.argv.slice(2));
  const floorBundle = join(REPO_ROOT, "bench/runs/floor/ab-floor.js");
  await buildFloor(floorBundle);
  const configs: Config[] = [
    { name: "pepr-floor", bundle: floorBundle, env: {} },
    { name: "ours", bundle: bundlePath(), env: {} },
    ...variants,
  ];
  const seeds = seedWorkloads();
  const pods = seeds.workloads.map(m => m.object).filter(o => o.kind === "Pod");
  const registry = images ? await imageRegistryFor(pods) : undefined;
  if (registry) configs.push({ name: "ours+images", bundle: bundlePath(), env: registry.env });
  const api = await startStandIn({ objects: seeds.cluster });
  const servers: { config: Config; controller: Controller; pid: number; us: number[] }[] = [];
  try {
    const bodies = await seedPodBodies(api, pods, mode);
    for (const config of configs) {
      const controller = await startController({
        // The module as deployed: no example capability.
        examples: false,
        api,
        bundle: config.bundle,
        env: { LOG_LEVEL: "warn", ...config.env },
        imagesOff: !config.foreign,
      });
      servers.push({ config, controller, pid: pidOnPort(controller.port), us: [] });
    }
    await cachesSynced(api);
    const pinned = pin && pinApart(servers.map(s => s.pid));
    const load = (controller: Controller, duration: number) =>
      drive(controller.url, `/${mode}/${controller.apiPath}`, bodies, duration);
    for (const s of servers) if (warmup) await load(s.controller, warmup); // JIT, caches
    for (let round = 1; round <= rounds; round++) {
      // Each round in the other order than the last: a drift within a round favours no server.
      for (const s of round % 2 ? servers : [...servers].reverse()) {
        const before = cpuSeconds(s.pid);
        const r = await load(s.controller, seconds);
        const errors = r.non2xx + r.errors + r.timeouts;
        if (errors) throw new Error(`${s.config.name}: ${errors} errors`);
        s.us.push(((cpuSeconds(s.pid) - before) * 1e6) / r["2xx"]);
      }
      process.stderr.write(`round ${round}/${rounds}\n`);
    }
    console.log(
      `${mode}, ${warmup} s warm-up, ${rounds} rounds of ${seconds} s, ${pinned ? "servers pinned apart from the load" : "unpinned"}, CPU µs per request (median; ×floor: the median of each round's ratio to the floor's, which the machine's drift from round to round cancels out of; rounds)`,
    );
    const floor = servers[0].us;
    for (const s of servers) {
      const ratio = median(s.us.map((us, round) => us / floor[round]));
      console.log(
        `${s.config.name.padEnd(24)} ${median(s.us).toFixed(0).padStart(6)} µs  ×${ratio.toFixed(2)}  (${s.us.map(u => u.toFixed(0)).join(" ")})`,
      );
    }
  } finally {
    for (const s of servers) await s.controller.stop().catch(() => undefined);
    await api.stop();
    await registry?.registry.stop();
  }
}

/**
 * A registry serving a config for every image of these pods, at the path its registry's mirror
 * (registries.mirrors) points to, and the controller environment that reads from it.
 */
async function imageRegistryFor(pods: KubeObject[]) {
  const registry = new TestRegistry();
  await registry.start();
  const sources = new Set<string>();
  for (const pod of pods)
    for (const c of (pod.spec as { containers?: { image?: string }[] })?.containers ?? []) {
      const parsed = parseImage(c.image);
      if (!parsed.ok) continue;
      sources.add(parsed.ref.registry);
      registry.putImage(
        `${parsed.ref.registry}/${parsed.ref.repository}`,
        parsed.ref.tag ?? "latest",
        {
          WorkingDir: "/workspace",
        },
      );
    }
  const env = {
    ADMISSION_GUARD_IMAGES_INSPECT: "true",
    ADMISSION_GUARD_IMAGES_PLAIN_HTTP: registry.host,
    ADMISSION_GUARD_REGISTRIES_MIRRORS: JSON.stringify(
      Object.fromEntries([...sources].map(r => [r, `${registry.host}/${r}`])),
    ),
  };
  return { registry, env };
}

main().catch(e => {
  console.error(e);
  process.exit(1);
});
