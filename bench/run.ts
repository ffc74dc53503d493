// Side-by-side benchmark of the real built controller (`npm run bench`; not part of `npm test`).
//
// Configurations, all child processes on 127.0.0.1, driven over HTTPS with keep-alive by autocannon
// with AdmissionReview v1 bodies shaped as the API server sends them (test/support/admission.ts):
//   bare         a bare Node.js HTTPS server: reads and parses the review, answers a fixed "allowed"
//   pepr-floor   Pepr with only hello-pepr (bench/pepr-floor.ts, acting in every namespace)
//   ours         dist/pepr-<uuid>.js: every capability of capabilities/index.ts
//                (both at the module's deployed log level, package.json pepr.logLevel: warn)
//   ... @info    the same two bundles at Pepr's default log level
//   ... +patch   the same two bundles on a copy of Pepr with docs/upstream/pepr-1.1.4.patch applied
// Runs are interleaved (for each repetition, each scenario, each configuration) so that a busy
// machine slows all configurations alike: trust the ratios, not the absolute figures.
//
// Figures: server CPU per request from /proc/<pid>/stat (utime+stime) over the saturation run, the
// primary figure; requests/s at saturation (16 connections); p50/p90/p99 at 1 and 16 connections
// (autocannon, 1 ms resolution) and at a fixed 200 requests/s, paced open-loop per request
// (bench/paced.ts: autocannon's rate mode sends each second's requests in one burst); errors; RSS.
//
//   npm run bench                 full run (~7 min on 2 cores, after the build)
//   npm run bench -- --quick      one repetition, short runs (~3 min)
//   npm run bench -- --soak       also RSS after 10k and 100k requests (several minutes more)
//   npm run bench -- --soak-only  only that
import { spawn, type ChildProcess } from "node:child_process";
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import autocannon from "autocannon";
import { buildFloor } from "./floor";
import { cpuSeconds, memoryMb, pidOnPort } from "./proc";
import { pacedLoad } from "./paced";
import type { KubeObject } from "../lib/objects/pod";
import { applyPatch, podCreateReview, workloadReview } from "../test/support/admission";
import {
  bundlePath,
  REPO_ROOT,
  startController,
  type Controller,
} from "../test/support/controller";
import { seedWorkloads } from "../test/support/manifests";
import { startStandIn, type StandInApi } from "../test/support/stand-in-api";
import { cachesSynced } from "../test/support/wait";

const args = new Set(process.argv.slice(2));
const QUICK = args.has("--quick");
const SOAK = args.has("--soak");
const SOAK_ONLY = args.has("--soak-only");
const REPS = QUICK ? 1 : 3;
/** Seconds per run: saturation (CPU, req/s, c16 latency), 1 connection, paced 200 req/s. */
const DUR = QUICK
  ? { sat: 1, c1: 0.5, rate: 1.5, growth: 0.7 }
  : { sat: 1.5, c1: 0.75, rate: 3, growth: 1 };
const RUNS = join(REPO_ROOT, "bench/runs");
/** The fixed rate of the latency runs (requests/s). */
const PACED_RATE = 200;
// Not in patches/: postinstall must not patch the Pepr the tests run (the controller image ships
// stock Pepr); only the benchmark's own copy of Pepr gets it.
const PATCH = join(REPO_ROOT, "docs/upstream/pepr-1.1.4.patch");
const PKG = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8"));
/** The level the module is deployed with (package.json pepr.logLevel); Pepr's default is info. */
const DEPLOYED_LOG_LEVEL: string = PKG.pepr.logLevel ?? "info";

// ---------------------------------------------------------------------------------------------
// Builds

function patchApplies(dir: string, reverse: boolean): boolean {
  try {
    execFileSync("patch", ["-p1", "-f", "-s", "--dry-run", ...(reverse ? ["-R"] : []), "-d", dir], {
      input: readFileSync(PATCH),
      stdio: ["pipe", "ignore", "ignore"],
    });
    return true;
  } catch {
    return false;
  }
}

/**
 * A directory holding both bundles next to its own copy of Pepr (stock or patched): Node resolves
 * `require("pepr")` from the bundle's directory first; everything else from the repo's node_modules.
 * node_modules/pepr itself is never changed here (other work shares it).
 */
function peprVariant(name: "stock" | "patched", bundles: Record<string, string>) {
  const dir = join(RUNS, name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(join(dir, "node_modules"), { recursive: true });
  cpSync(join(REPO_ROOT, "node_modules/pepr"), join(dir, "node_modules/pepr"), {
    recursive: true,
    dereference: true,
  });
  const applied = patchApplies(dir, true);
  if (name === "patched" && !applied) patch(dir, false);
  if (name === "stock" && applied) patch(dir, true);
  const out: Record<string, string> = {};
  for (const [key, file] of Object.entries(bundles)) {
    out[key] = join(dir, `${key}.js`);
    cpSync(file, out[key]);
  }
  return out;
}

function patch(dir: string, reverse: boolean) {
  execFileSync("patch", ["-p1", "-f", "-s", ...(reverse ? ["-R"] : []), "-d", dir], {
    input: readFileSync(PATCH),
  });
}

// ---------------------------------------------------------------------------------------------
// Servers

interface Server {
  name: string;
  url: string;
  pid: number;
  /** POST path of each kind of review. */
  paths: { mutate: string; validate: string };
  stop(): Promise<void>;
}

/** The bare floor: node's https module, body read and parsed, a fixed "allowed" answer. */
const BARE_SERVER = `
const https = require("node:https");
const fs = require("node:fs");
const server = https.createServer(
  { key: fs.readFileSync(process.env.SSL_KEY_PATH), cert: fs.readFileSync(process.env.SSL_CERT_PATH) },
  (req, res) => {
    const chunks = [];
    req.on("data", c => chunks.push(c));
    req.on("end", () => {
      let uid = "";
      try { uid = JSON.parse(Buffer.concat(chunks).toString("utf8")).request.uid; } catch {}
      const body = JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview",
        response: { uid, allowed: true } });
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(body);
    });
  });
server.keepAliveTimeout = 60000;
server.listen(0, "127.0.0.1", () => console.log(String(server.address().port)));
process.on("SIGTERM", () => process.exit(0));
`;

async function startBare(api: StandInApi): Promise<Server> {
  const child: ChildProcess = spawn(process.execPath, ["-e", BARE_SERVER], {
    env: { SSL_KEY_PATH: api.certs.keyPath, SSL_CERT_PATH: api.certs.certPath },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const port = await new Promise<string>((ok, fail) => {
    child.stdout!.once("data", d => ok(String(d).trim()));
    child.once("exit", code => fail(new Error(`bare server exited (${code})`)));
  });
  return {
    name: "bare",
    url: `https://127.0.0.1:${port}`,
    pid: child.pid!,
    paths: { mutate: "/mutate", validate: "/validate" },
    stop: async () => {
      child.kill("SIGTERM");
    },
  };
}

async function startPepr(
  name: string,
  api: StandInApi,
  bundle: string,
  logLevel = DEPLOYED_LOG_LEVEL,
): Promise<Server> {
  const controller: Controller = await startController({
    // The module as deployed: no example capability.
    examples: false,
    api,
    bundle,
    env: { LOG_LEVEL: logLevel },
  });
  const pid = pidOnPort(controller.port);
  return {
    name,
    url: controller.url,
    pid,
    paths: { mutate: `/mutate/${controller.apiPath}`, validate: `/validate/${controller.apiPath}` },
    stop: () => controller.stop(),
  };
}

// ---------------------------------------------------------------------------------------------
// Workloads

/** A pod with n containers, each like an ML serving container (env, ports, mounts, resources). */
function podWithContainers(n: number, namespace = "llama-index"): KubeObject {
  const container = (i: number) => ({
    name: `worker-${i}`,
    image: `ghcr.io/run-llama/llama-index-worker:0.${i}.1`,
    args: ["--shard", String(i), "--model", "/models/llama-3-8b", "--max-batch", "32"],
    env: Array.from({ length: 30 }, (_, j) => ({
      name: `SHARD_${i}_SETTING_${j}`,
      value: `value-${i}-${j}-${"x".repeat(24)}`,
    })),
    ports: [{ name: `http-${i}`, containerPort: 8000 + i }],
    resources: { requests: { cpu: "100m", memory: "256Mi" }, limits: { memory: "512Mi" } },
    volumeMounts: [{ name: "models", mountPath: "/models", readOnly: true }],
    readinessProbe: { httpGet: { path: "/healthz", port: 8000 + i }, periodSeconds: 10 },
  });
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: `sharded-${n}`, namespace, labels: { app: "llama-shards" } },
    spec: {
      containers: Array.from({ length: n }, (_, i) => container(i)),
      volumes: [{ name: "models", persistentVolumeClaim: { claimName: "models", readOnly: true } }],
    },
  };
}

interface Body {
  mutate: boolean;
  body: string;
}

interface Scenario {
  name: string;
  bodies: Body[];
}

const reviewBody = (review: unknown) => JSON.stringify(review);

/** Mutate and validate bodies for pods: validate gets the object as our mutation left it. */
async function podScenarios(
  label: string,
  pods: KubeObject[],
  mutator: Controller,
): Promise<[Scenario, Scenario]> {
  const mutate: Body[] = [];
  const validate: Body[] = [];
  for (const pod of pods) {
    const review = podCreateReview(pod);
    mutate.push({ mutate: true, body: reviewBody(review) });
    const answer = await mutator.mutate(review);
    const patched = applyPatch(review.request!.object as KubeObject, answer.response!);
    validate.push({
      mutate: false,
      body: reviewBody({ ...review, request: { ...review.request, object: patched } }),
    });
  }
  return [
    { name: `mutate ${label}`, bodies: mutate },
    { name: `validate ${label}`, bodies: validate },
  ];
}

/** The cluster the controllers see: seed namespaces, and n namespaces, nodes and quotas. */
function clusterOf(n: number, seedCluster: KubeObject[]): KubeObject[] {
  const objects: KubeObject[] = [...seedCluster];
  const seedNamespaces = seedCluster
    .filter(o => o.kind === "Namespace")
    .map(o => o.metadata!.name!);
  for (let i = 0; i < n; i++) {
    // Namespaces that existed before the controller started (a new one gets a ServiceAccount).
    objects.push({
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: `team-${i}`, creationTimestamp: new Date("2024-05-12T14:00:00Z") },
    });
    objects.push({
      apiVersion: "v1",
      kind: "Node",
      metadata: { name: `node-${i}`, labels: { "kubernetes.io/hostname": `node-${i}` } },
      status: {
        allocatable: { cpu: "16", memory: "64Gi", pods: "110" },
        capacity: { cpu: "16", memory: "64Gi", pods: "110" },
      },
    } as KubeObject);
    objects.push(quota(`quota-${i}`, `team-${i}`));
  }
  for (const ns of seedNamespaces) objects.push(quota("compute", ns));
  return objects;
}

function quota(name: string, namespace: string): KubeObject {
  const hard = { "requests.cpu": "64", "requests.memory": "256Gi", "limits.memory": "512Gi" };
  return {
    apiVersion: "v1",
    kind: "ResourceQuota",
    metadata: { name, namespace },
    spec: { hard },
    status: { hard, used: { "requests.cpu": "2", "requests.memory": "4Gi" } },
  } as KubeObject;
}

// ---------------------------------------------------------------------------------------------
// Load

interface LoadResult {
  responses: number;
  errors: number;
  seconds: number;
  rps: number;
  latency: { p50: number; p90: number; p99: number };
}

function load(
  server: Server,
  scenario: Scenario,
  opts: { connections: number; duration?: number; amount?: number },
): Promise<LoadResult> {
  const requests = scenario.bodies.map(b => ({
    method: "POST" as const,
    path: b.mutate ? server.paths.mutate : server.paths.validate,
    headers: { "content-type": "application/json" },
    body: b.body,
  }));
  return new Promise((ok, fail) => {
    // Only the options given: autocannon takes an undefined value as a value.
    const given = Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined));
    autocannon(
      { url: server.url, requests, timeout: 10, ...given },
      (err: Error | null, r: autocannon.Result) => {
        if (err) return fail(err);
        const responses = r["2xx"];
        ok({
          responses,
          errors: r.errors + r.timeouts + r.non2xx,
          seconds: r.duration,
          rps: responses / r.duration,
          latency: { p50: r.latency.p50, p90: r.latency.p90, p99: r.latency.p99 },
        });
      },
    );
  });
}

interface Sample {
  cpuUs: number;
  rps: number;
  errors: number;
  rssMb: number;
  c16?: LoadResult["latency"];
  c1?: LoadResult["latency"];
  rate200?: LoadResult["latency"];
}

/** One measurement: saturation at 16 connections (CPU from /proc), then optionally 1 conn and 200 req/s. */
async function measure(
  server: Server,
  scenario: Scenario,
  full: boolean,
  seconds: number,
  connections = 16,
) {
  const cpu0 = cpuSeconds(server.pid);
  const sat = await load(server, scenario, { connections, duration: seconds });
  const cpu1 = cpuSeconds(server.pid);
  const sample: Sample = {
    cpuUs: sat.responses ? ((cpu1 - cpu0) * 1e6) / sat.responses : NaN,
    rps: sat.rps,
    errors: sat.errors,
    rssMb: memoryMb(server.pid).rss,
    c16: sat.latency,
  };
  if (full) {
    const c1 = await load(server, scenario, { connections: 1, duration: DUR.c1 });
    // Open loop at 200 req/s only where the server keeps up with it: beyond its saturation rate the
    // queue grows for as long as the run lasts, and the figure says only how long that was.
    const rate =
      sat.rps >= PACED_RATE * 1.25
        ? await pacedLoad(
            {
              url: server.url,
              requests: scenario.bodies.map(b => ({
                path: b.mutate ? server.paths.mutate : server.paths.validate,
                body: b.body,
              })),
            },
            { rate: PACED_RATE, seconds: DUR.rate },
          )
        : undefined;
    sample.c1 = c1.latency;
    sample.rate200 = rate?.latency;
    sample.errors += c1.errors + (rate?.errors ?? 0);
  }
  return sample;
}

// ---------------------------------------------------------------------------------------------
// Statistics and output

const median = (xs: number[]) => {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  if (!s.length) return NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
/** (max - min) / median, the spread of the repetitions. */
const spread = (xs: number[]) => {
  const m = median(xs);
  return xs.length > 1 && m ? (Math.max(...xs) - Math.min(...xs)) / m : 0;
};
const round = (x: number, digits = 2) => (Number.isFinite(x) ? Number(x.toFixed(digits)) : null);
const latencyMedian = (samples: Sample[], key: "c1" | "c16" | "rate200") => {
  const with_ = samples.map(s => s[key]).filter((l): l is LoadResult["latency"] => !!l);
  if (!with_.length) return undefined;
  return {
    p50: round(median(with_.map(l => l.p50)), 1),
    p90: round(median(with_.map(l => l.p90)), 1),
    p99: round(median(with_.map(l => l.p99)), 1),
  };
};

interface Entry {
  name: string;
  scenario: string;
  config: string;
  cpu_us_per_req: number | null;
  cpu_spread: number | null;
  rps: number | null;
  rps_spread: number | null;
  p50_ms: number | null;
  p99_ms: number | null;
  latency_ms: Record<string, ReturnType<typeof latencyMedian>>;
  errors: number;
  rss_mb: number | null;
  ratio_vs_pepr_floor: number | null;
  ratio_vs_bare_floor: number | null;
  repetitions: number;
}

function entryOf(scenario: string, config: string, samples: Sample[]): Entry {
  const c16 = latencyMedian(samples, "c16");
  return {
    name: `${scenario} (${config})`,
    scenario,
    config,
    cpu_us_per_req: round(median(samples.map(s => s.cpuUs)), 0),
    cpu_spread: round(spread(samples.map(s => s.cpuUs))),
    rps: round(median(samples.map(s => s.rps)), 0),
    rps_spread: round(spread(samples.map(s => s.rps))),
    p50_ms: c16?.p50 ?? null,
    p99_ms: c16?.p99 ?? null,
    latency_ms: {
      c1: latencyMedian(samples, "c1"),
      c16,
      rate200: latencyMedian(samples, "rate200"),
    },
    errors: samples.reduce((n, s) => n + s.errors, 0),
    rss_mb: round(Math.max(...samples.map(s => s.rssMb)), 0),
    ratio_vs_pepr_floor: null,
    ratio_vs_bare_floor: null,
    repetitions: samples.length,
  };
}

function addRatios(entries: Entry[]) {
  for (const e of entries) {
    const same = (config: string) =>
      entries.find(x => x.scenario === e.scenario && x.config === config)?.cpu_us_per_req ?? null;
    // Variants (+patch, @info) compare with the floor of the same variant: what our code adds.
    const variant = /[+@].*$/.exec(e.config)?.[0] ?? "";
    const floor = same(`pepr-floor${variant}`);
    const bare = same("bare");
    if (e.cpu_us_per_req !== null) {
      e.ratio_vs_pepr_floor = floor ? round(e.cpu_us_per_req / floor) : null;
      e.ratio_vs_bare_floor = bare ? round(e.cpu_us_per_req / bare) : null;
    }
  }
}

function table(entries: Entry[]): string {
  const fmt = (x: number | null | undefined) => (x === null || x === undefined ? "–" : String(x));
  const lat = (l?: { p50: number | null; p90: number | null; p99: number | null }) =>
    l ? `${fmt(l.p50)} / ${fmt(l.p90)} / ${fmt(l.p99)}` : "–";
  const rows = entries.map(e =>
    [
      e.scenario,
      e.config,
      `${fmt(e.cpu_us_per_req)} ±${Math.round((e.cpu_spread ?? 0) * 50)}%`,
      fmt(e.ratio_vs_pepr_floor),
      fmt(e.ratio_vs_bare_floor),
      fmt(e.rps),
      lat(e.latency_ms.c1),
      lat(e.latency_ms.c16),
      lat(e.latency_ms.rate200),
      fmt(e.errors),
      fmt(e.rss_mb),
    ].join(" | "),
  );
  return [
    "scenario | config | CPU µs/req | × Pepr floor | × bare | req/s (16 conn) | p50/p90/p99 ms, 1 conn | 16 conn | 200 req/s (paced) | errors | RSS MB",
    "--- | --- | --: | --: | --: | --: | --: | --: | --: | --: | --:",
    ...rows,
  ]
    .map(r => `| ${r} |`)
    .join("\n");
}

/** RSS of the controller after 10k and after 100k requests (mutate seed pods, 16 connections). */
async function soakRun(
  api: StandInApi,
  bundle: string,
  scenario: Scenario,
  log: (msg: string) => void,
  name: string,
  logLevel: string,
) {
  const server = await startPepr(name, api, bundle, logLevel);
  try {
    const first = await load(server, scenario, { connections: 16, amount: 10_000 });
    const at10k = memoryMb(server.pid).rss;
    const rest = await load(server, scenario, { connections: 16, amount: 90_000 });
    const at100k = memoryMb(server.pid).rss;
    const soak = {
      config: name,
      rss_mb_after_10k: round(at10k, 0),
      rss_mb_after_100k: round(at100k, 0),
      growth: round((at100k - at10k) / at10k),
      errors: first.errors + rest.errors,
    };
    log(`soak: ${JSON.stringify(soak)}`);
    return soak;
  } finally {
    await server.stop();
  }
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const started = Date.now();
  const log = (msg: string) =>
    console.error(`[bench ${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${msg}`);
  mkdirSync(RUNS, { recursive: true });
  const oursBundle = bundlePath();
  if (!existsSync(oursBundle)) throw new Error(`${oursBundle} is missing: run npm run build`);
  const floorBundle = join(RUNS, "floor", `pepr-${PKG.pepr.uuid}.js`);
  await buildFloor(floorBundle);
  const bundles = { ours: oursBundle, floor: floorBundle };
  const stock = peprVariant("stock", bundles);
  const patched = existsSync(PATCH) ? peprVariant("patched", bundles) : undefined;
  log(`bundles ready${patched ? " (with patched Pepr)" : " (no docs/upstream/pepr-1.1.4.patch)"}`);

  const seeds = seedWorkloads();
  const seedPods = seeds.workloads.map(m => m.object).filter(o => o.kind === "Pod");
  const deployment = seeds.workloads.map(m => m.object).find(o => o.kind === "Deployment");
  const api = await startStandIn({ objects: clusterOf(10, seeds.cluster) });
  if (SOAK_ONLY) {
    // Only the soak, stock Pepr and patched: bench/runs/soak.json.
    const scenario: Scenario = {
      name: "mutate seed pods",
      bodies: seedPods.map(p => ({ mutate: true, body: reviewBody(podCreateReview(p)) })),
    };
    try {
      const soak = [
        await soakRun(api, stock.ours, scenario, log, "ours@info", "info"),
        await soakRun(api, stock.ours, scenario, log, "ours", DEPLOYED_LOG_LEVEL),
      ];
      if (patched)
        soak.push(await soakRun(api, patched.ours, scenario, log, "ours+patch@info", "info"));
      writeFileSync(join(RUNS, "soak.json"), JSON.stringify(soak, null, 2) + "\n");
    } finally {
      await api.stop();
    }
    return;
  }
  const servers: Server[] = [];
  const stopAll = async () => {
    for (const s of servers.splice(0)) await s.stop().catch(() => undefined);
  };
  try {
    servers.push(await startBare(api));
    // At the deployed level (warn: Pepr's per-request info lines off), and at Pepr's default, info.
    servers.push(await startPepr("pepr-floor", api, stock.floor));
    servers.push(await startPepr("ours", api, stock.ours));
    servers.push(await startPepr("pepr-floor@info", api, stock.floor, "info"));
    servers.push(await startPepr("ours@info", api, stock.ours, "info"));
    if (patched) {
      servers.push(await startPepr("pepr-floor+patch", api, patched.floor));
      servers.push(await startPepr("ours+patch", api, patched.ours));
    }
    await cachesSynced(api);
    const byName = (n: string) => servers.find(s => s.name === n);
    log(`servers: ${servers.map(s => `${s.name} (pid ${s.pid})`).join(", ")}`);

    // Bodies: our own mutation gives the validate bodies (the object as the API server stores it).
    const mutator = await startController({
      // The module as deployed: no example capability.
      examples: false,
      api,
      bundle: stock.ours,
      env: { LOG_LEVEL: "warn" },
    });
    let scenarios: Scenario[];
    let growth: Scenario[];
    try {
      const [mutateSeeds, validateSeeds] = await podScenarios("seed pods", seedPods, mutator);
      const [mutateLarge, validateLarge] = await podScenarios(
        "50-container pod",
        [podWithContainers(50)],
        mutator,
      );
      scenarios = [mutateSeeds, validateSeeds, mutateLarge, validateLarge];
      if (deployment)
        scenarios.push({
          name: "validate seed Deployment",
          bodies: [{ mutate: false, body: reviewBody(workloadReview(deployment)) }],
        });
      growth = [1, 10, 50, 200].map(n => ({
        name: `mutate pod, ${n} containers`,
        bodies: [{ mutate: true, body: reviewBody(podCreateReview(podWithContainers(n))) }],
      }));
    } finally {
      await mutator.stop();
    }
    for (const s of [...scenarios, ...growth])
      log(`${s.name}: ${(s.bodies[0].body.length / 1024).toFixed(1)} KB a body`);

    const samples = new Map<string, Sample[]>();
    const record = (scenario: string, config: string, sample: Sample) => {
      const key = `${scenario}\u0000${config}`;
      samples.set(key, [...(samples.get(key) ?? []), sample]);
    };
    // The variants (patched Pepr, LOG_LEVEL=info) are measured on the pods: saturation only.
    const variantScenarios = new Set([scenarios[0].name, scenarios[1].name, scenarios[2].name]);
    // Warm-up: JIT and caches (ServiceAccount ensured, access reviews cached), not recorded.
    for (const scenario of [...scenarios, ...growth])
      for (const server of servers)
        if (!/[+@]/.test(server.name) || variantScenarios.has(scenario.name))
          await load(server, scenario, { connections: 4, duration: QUICK ? 0.3 : 0.5 });
    log("warmed up");

    for (let rep = 1; rep <= REPS; rep++) {
      for (const scenario of scenarios) {
        for (const server of servers) {
          const isVariant = /[+@]/.test(server.name);
          if (isVariant && !variantScenarios.has(scenario.name)) continue;
          record(scenario.name, server.name, await measure(server, scenario, !isVariant, DUR.sat));
        }
      }
      // 4 connections: a 200-container pod takes long enough that 16 would only queue.
      for (const scenario of growth)
        for (const name of ["pepr-floor", "ours"])
          record(scenario.name, name, await measure(byName(name)!, scenario, false, DUR.growth, 4));
      log(`repetition ${rep}/${REPS} done`);
    }

    const peak = Object.fromEntries(servers.map(s => [s.name, round(memoryMb(s.pid).hwm, 0)]));
    await stopAll();

    // Cost against cluster size: fresh stand-ins holding n namespaces, nodes and quotas each.
    const clusterSizes = QUICK ? [10, 10_000] : [10, 1_000, 10_000];
    const clusterScenarios = [scenarios[0], scenarios[1]];
    for (const n of clusterSizes) {
      const bigApi = await startStandIn({ objects: clusterOf(n, seeds.cluster) });
      try {
        const server = await startPepr("ours", bigApi, stock.ours);
        servers.push(server);
        await cachesSynced(bigApi, undefined, 60_000);
        for (const scenario of clusterScenarios)
          await load(server, scenario, { connections: 4, duration: QUICK ? 0.5 : 1 });
        for (let rep = 1; rep <= REPS; rep++)
          for (const scenario of clusterScenarios)
            record(
              `${scenario.name}, cluster of ${n.toLocaleString("en")}`,
              "ours",
              await measure(server, scenario, false, DUR.growth),
            );
        log(`cluster of ${n} done`);
      } finally {
        await stopAll();
        await bigApi.stop();
      }
    }

    const soak = SOAK
      ? await soakRun(api, stock.ours, scenarios[0], log, "ours", DEPLOYED_LOG_LEVEL)
      : undefined;

    const entries = [...samples.entries()].map(([key, list]) => {
      const [scenario, config] = key.split("\u0000");
      return entryOf(scenario, config, list);
    });
    addRatios(entries);
    const results = {
      generated: new Date().toISOString(),
      command: `npm run bench${QUICK ? " -- --quick" : ""}${SOAK ? " -- --soak" : ""}`,
      machine: { cpus: (await import("node:os")).cpus().length, node: process.version },
      repetitions: REPS,
      seconds: DUR,
      peak_rss_mb: peak,
      soak,
      scenarios: entries,
    };
    writeFileSync(
      join(REPO_ROOT, "bench/runs/results.json"),
      JSON.stringify(results, null, 2) + "\n",
    );
    const md = table(entries);
    writeFileSync(join(RUNS, "results.md"), md + "\n");
    console.log(md);
    console.log(
      `\npeak RSS (MB): ${JSON.stringify(peak)}${soak ? `\nsoak: ${JSON.stringify(soak)}` : ""}`,
    );
    log(`done: bench/runs/results.json, bench/runs/results.md`);
  } finally {
    await stopAll();
    await api.stop();
  }
}

main().catch(e => {
  console.error(e);
  process.exit(1);
});
