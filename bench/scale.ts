// Memory flat in cluster size (issue 28): `npm run bench:scale` (a benchmark, not part of `npm test`).
//
// For each size (pods and nodes paired: 10,000 + 1,000, 30,000 + 5,000, 100,000 + 15,000), the
// stand-in API in this process is filled with realistic objects (bench/cluster-objects.ts: pods
// with real-sized specs and status, GPU nodes with 50 images, conditions, taints and
// nvidia.com/gpu; one namespace per 100 pods, each with a ResourceQuota, two ServiceAccounts, a
// GPU Deployment, a LimitRange in every fifth), then the built bundle runs against it twice, each
// process started after the objects exist, as at a restart:
//
//  1. the watcher (PEPR_WATCH_MODE=true):
//     - start → every report right: every namespace's PolicyReport equals, but for its time
//       stamps, the report built here from the engine's answer() for each of its pods and its
//       Deployment (summary, every result, the results-omitted count); "counts right" is the
//       weaker check (summary and the number of objects named in the results equal);
//     - RSS settled: after every report is right, the CPU quiet, SETTLE s idle, then the median of
//       SETTLE s of samples (every 200 ms); peak: VmHWM (the kernel's high-water mark) and the
//       largest sample, from the process's start;
//     - churn: 200 pods/s replaced (a delete and a create) for CHURN s; how long a change takes
//       to show in its report, two ways: probes (one in four replacements of a violating pod, on
//       the pod's last replacement of the run: the time until its new uid appears in its
//       namespace's report, polled every 250 ms) and the watcher's own histogram
//       admission_guard_report_lag_seconds (the difference over the churn, quantiles interpolated
//       in its buckets as Prometheus' histogram_quantile does); and from the last replacement
//       until every report is right again (the expected reports after the churn are built before
//       it starts, the replacements being known);
//  2. the admission controller: start → every cache synced (/metrics admission_guard_cache_synced
//     all 1), RSS settled (as above) and peak, then validate latency: a fixed pod, a privileged
//     one (denied) and a GPU pod that node fit judges against every node, each mutated once and
//     its validate review sent 100 times in a row (after 10 unmeasured); p50/p99 as the client
//     sees them, and × the first size of the run.
//
// Reports are written at the module's default interval (30 s) unless --interval says otherwise:
// the lag is what an operator sees. The stand-in API runs in this process: it shares the 2 cores,
// and a list without `limit` is one JSON string (over V8's 512 MiB string limit at 100,000 pods).
//
//   npm run bench:scale                      10k/1k, 30k/5k, 100k/15k (hours on 2 cores)
//   npm run bench:scale -- --quick           2,000 pods, 200 nodes: the harness itself (~4 min)
//   npm run bench:scale -- --sizes 10k,30k   chosen sizes (2k, 10k, 30k, 100k, or PODS/NODES)
//   ... --bundle <path>                      another build of the module (a baseline)
//   ... --label <name>                       named in the output file
//   ... --only watcher|admission  --churn <s>  --settle <s>  --interval <s>
//   ... --node-options <flags>               NODE_OPTIONS for the controllers (a heap cap)
//   ... --memory-limit <MiB>                 the watcher in a memory cgroup of that size, as in
//       its pod: with --node-options --max-old-space-size=259, the heap Node takes under 512 MiB
//
// Every phase has a timeout and the run stops by itself (a watchdog per size). Raw numbers:
// bench/runs/scale-<label>-<timestamp>.json, written after each size.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { basename, join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { getHeapStatistics } from "node:v8";
import { Log } from "pepr";
import { SnapshotCluster } from "../lib/cluster/view";
import { answer, type EngineDeps } from "../lib/engine";
import type { KubeObject } from "../lib/objects/pod";
import {
  buildReport,
  objectResults,
  type ObjectResults,
  type PolicyReport,
  type Summary,
} from "../lib/reports/policy-report";
import { settingsFromEnv } from "../lib/settings";
import { applyPatch, podCreateReview } from "../test/support/admission";
import {
  bundlePath,
  REPO_ROOT,
  startController,
  startWatcher,
  type Controller,
} from "../test/support/controller";
import { startStandIn, type StandInApi } from "../test/support/stand-in-api";
import {
  clusterOf,
  deploymentObject,
  limitRangeObject,
  namespaceObject,
  nodeObject,
  resourceQuotaObject,
  serviceAccountObject,
} from "./cluster-objects";
import { MemoryCgroup } from "./memory-cgroup";
import { cpuSeconds, memoryMb } from "./proc";
import { thinned } from "./series";

// ---------------------------------------------------------------------------------------------
// Arguments

interface Size {
  pods: number;
  nodes: number;
}
const PAIRS: Record<string, Size> = {
  "2k": { pods: 2_000, nodes: 200 },
  "10k": { pods: 10_000, nodes: 1_000 },
  "30k": { pods: 30_000, nodes: 5_000 },
  "100k": { pods: 100_000, nodes: 15_000 },
};

function parseArgs(argv: string[]) {
  const opts = {
    sizes: [PAIRS["10k"], PAIRS["30k"], PAIRS["100k"]],
    bundle: bundlePath(),
    label: "",
    only: undefined as "watcher" | "admission" | undefined,
    churnS: 30,
    settleS: 10,
    intervalS: undefined as number | undefined,
    /** NODE_OPTIONS for both controllers (e.g. a heap cap: --max-old-space-size=256). */
    nodeOptions: undefined as string | undefined,
    /** The watcher in a memory cgroup of this many MiB, as in its pod (bench/memory-cgroup.ts). */
    memoryLimitMib: undefined as number | undefined,
  };
  const value = (i: number) => {
    if (i + 1 >= argv.length) throw new Error(`${argv[i]} needs a value`);
    return argv[i + 1];
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--quick") opts.sizes = [PAIRS["2k"]];
    else if (a === "--sizes") {
      opts.sizes = value(i++)
        .split(",")
        .map(s => {
          if (PAIRS[s]) return PAIRS[s];
          const m = /^(\d+)\/(\d+)$/.exec(s);
          if (!m) throw new Error(`--sizes: ${s} is none of ${Object.keys(PAIRS)} nor PODS/NODES`);
          return { pods: Number(m[1]), nodes: Number(m[2]) };
        });
    } else if (a === "--bundle") opts.bundle = resolve(value(i++));
    else if (a === "--label") opts.label = value(i++);
    else if (a === "--only") {
      const v = value(i++);
      if (v !== "watcher" && v !== "admission") throw new Error("--only watcher|admission");
      opts.only = v;
    } else if (a === "--churn") opts.churnS = Number(value(i++));
    else if (a === "--settle") opts.settleS = Number(value(i++));
    else if (a === "--interval") opts.intervalS = Number(value(i++));
    else if (a === "--node-options") opts.nodeOptions = value(i++);
    else if (a === "--memory-limit") opts.memoryLimitMib = Number(value(i++));
    else throw new Error(`unknown argument ${a}`);
  }
  return opts;
}
const OPTS = parseArgs(process.argv.slice(2));

const PODS_PER_NAMESPACE = 100;
const CHURN_RATE = 200;
/** The module's settings in the watcher, the admission controller and the expected reports. */
const SETTINGS_ENV: Record<string, string> = {
  ADMISSION_GUARD_REGISTRIES_ALLOWED: "ghcr.io/org,registry.internal",
  ...(OPTS.intervalS ? { ADMISSION_GUARD_REPORTS_INTERVAL_SECONDS: String(OPTS.intervalS) } : {}),
};
const SETTINGS = settingsFromEnv(SETTINGS_ENV);
/** The controllers' environment: the settings, and NODE_OPTIONS when asked. */
const CONTROLLER_ENV: Record<string, string> = {
  LOG_LEVEL: "warn",
  ...SETTINGS_ENV,
  ...(OPTS.nodeOptions ? { NODE_OPTIONS: OPTS.nodeOptions } : {}),
};
const INTERVAL_S = SETTINGS.reports.intervalSeconds;
/** Phase timeouts (s): a phase that overruns is recorded as such, and the run goes on. */
const TIMEOUT = {
  start: 300,
  reportsRight: 600,
  quiet: 90,
  probes: INTERVAL_S + 270,
  synced: 300,
};
/** Per size, everything included; then the run stops with what it has. */
const SIZE_WATCHDOG_MS = 75 * 60_000;
/** This process (the stand-in's objects and reports) may use at most this much. */
const BENCH_RSS_LIMIT_MB = 16 * 1024;
/** A child over this ends its phase and is stopped (today's watcher at a size it cannot hold). */
const CHILD_RSS_LIMIT_MB = 8 * 1024;
const RUNS = join(REPO_ROOT, "bench/runs");

/** Targets from issue 28. */
const TARGETS = {
  watcherSettledMb: 400,
  watcherPeakMb: 512,
  admissionMb: 256,
  reportsRightS: 120,
};

// ---------------------------------------------------------------------------------------------
// Helpers

const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));
const now = () => performance.now();
const MiB = 2 ** 20;
const log = (s: string) =>
  process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${s}\n`);

function quantile(xs: number[], q: number): number | undefined {
  if (!xs.length) return undefined;
  const s = [...xs].sort((a, b) => a - b);
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  return s[lo] + (s[Math.min(lo + 1, s.length - 1)] - s[lo]) * (pos - lo);
}

const load = () => loadavg().map(x => Number(x.toFixed(2)));
const benchMem = () => {
  const m = process.memoryUsage();
  return { rssMb: Math.round(m.rss / MiB), heapMb: Math.round(m.heapUsed / MiB) };
};

/**
 * The bundle's process: our child running it (the harness does not expose its pid, and sampling
 * must begin before it listens).
 */
function childRunning(bundle: string): number | undefined {
  const name = basename(bundle);
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid !== process.pid) continue;
      if (readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(name)) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

interface Sample {
  /** Seconds since the sampler started. */
  t: number;
  /** The child's VmRSS (MiB). */
  mb: number;
  /** The child's CPU seconds, and this process's (the stand-in's): who is busy when. */
  cpu: number;
  benchCpu: number;
}

/** The busiest `windowS` of each process between two times: CPU seconds per second. */
function busiest(samples: Sample[], fromS: number, toS: number, windowS = 10) {
  const xs = samples.filter(x => x.t >= fromS && x.t <= toS);
  let child = 0;
  let bench = 0;
  for (let i = 0, j = 0; i < xs.length; i++) {
    while (xs[i].t - xs[j].t > windowS) j++;
    const dt = xs[i].t - xs[j].t;
    if (dt < windowS / 2) continue;
    child = Math.max(child, (xs[i].cpu - xs[j].cpu) / dt);
    bench = Math.max(bench, (xs[i].benchCpu - xs[j].benchCpu) / dt);
  }
  return { child: Number(child.toFixed(2)), bench: Number(bench.toFixed(2)) };
}

/** VmRSS and CPU every 200 ms from the child's start (`since` reads a phase's samples). */
function rssSampler(bundle: string) {
  let pid: number | undefined;
  const samples: Sample[] = [];
  const t0 = now();
  let over = false;
  const timer = setInterval(() => {
    pid ??= childRunning(bundle);
    if (!pid) return;
    try {
      const { rss } = memoryMb(pid);
      const bench = process.cpuUsage();
      samples.push({
        t: (now() - t0) / 1000,
        mb: rss,
        cpu: cpuSeconds(pid),
        benchCpu: (bench.user + bench.system) / 1e6,
      });
      if (rss > CHILD_RSS_LIMIT_MB) over = true;
    } catch {
      // exited
    }
  }, 200);
  return {
    pid: () => pid,
    samples,
    over: () => over,
    since: (t: number) => samples.filter(s => s.t >= t),
    elapsed: () => (now() - t0) / 1000,
    stop: () => clearInterval(timer),
  };
}

/** Waits until the process's CPU stops moving (< 30 ms in 500 ms); false when it never did. */
async function quiet(pid: number, timeoutS = TIMEOUT.quiet): Promise<boolean> {
  const deadline = Date.now() + timeoutS * 1000;
  let last = cpuSeconds(pid);
  for (;;) {
    await sleep(500);
    const cpu = cpuSeconds(pid);
    if (cpu - last < 0.03) return true;
    if (Date.now() > deadline) return false;
    last = cpu;
  }
}

/** SETTLE s idle, then the median of SETTLE s of RSS samples. */
async function settled(pid: number, sampler: ReturnType<typeof rssSampler>) {
  const wasQuiet = await quiet(pid);
  await sleep(OPTS.settleS * 1000);
  const from = sampler.elapsed();
  await sleep(OPTS.settleS * 1000);
  const xs = sampler.since(from).map(s => s.mb);
  return { quiet: wasQuiet, rssMb: quantile(xs, 0.5), samples: xs.length };
}

/** One histogram of a Prometheus text exposition: cumulative counts by upper bound. */
function histogram(text: string, name: string): { le: number; count: number }[] {
  const out: { le: number; count: number }[] = [];
  const re = new RegExp(`^${name}_bucket\\{[^}]*le="([^"]+)"[^}]*\\} (\\S+)`, "gm");
  for (const m of text.matchAll(re))
    out.push({ le: m[1] === "+Inf" ? Infinity : Number(m[1]), count: Number(m[2]) });
  return out.sort((a, b) => a.le - b.le);
}

/** histogram_quantile over the difference of two scrapes. */
function histogramQuantile(
  before: { le: number; count: number }[],
  after: { le: number; count: number }[],
  q: number,
): number | undefined {
  const diff = after.map(b => ({
    le: b.le,
    count: b.count - (before.find(x => x.le === b.le)?.count ?? 0),
  }));
  const total = diff[diff.length - 1]?.count ?? 0;
  if (!total) return undefined;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const b of diff) {
    if (b.count >= rank) {
      if (b.le === Infinity) return prevLe;
      return prevLe + ((b.le - prevLe) * (rank - prevCount)) / Math.max(1, b.count - prevCount);
    }
    prevLe = b.le;
    prevCount = b.count;
  }
  return undefined;
}

const metricsOf = async (c: Controller) => {
  // Once more on a connection the server closed as it was reused (EPIPE, ECONNRESET).
  const res = await c.get("/metrics").catch(() => c.get("/metrics"));
  if (res.status !== 200) throw new Error(`/metrics: HTTP ${res.status}`);
  return res.body;
};

/** One unlabelled (or first-labelled) sample of a metric, undefined when absent. */
function gauge(text: string, name: string, labels = ""): number | undefined {
  const m = new RegExp(
    `^${name}${labels ? `\\{${labels}\\}` : "(?:\\{[^}]*\\})?"} (\\S+)`,
    "m",
  ).exec(text);
  return m ? Number(m[1]) : undefined;
}

/** V8's heap as the process says on /metrics: used (live and not yet collected), total, external. */
async function heapOf(c: Controller) {
  const text = await metricsOf(c);
  const mbOf = (v: number | undefined) => (v === undefined ? undefined : Math.round(v / MiB));
  return {
    used: mbOf(gauge(text, "nodejs_heap_size_used_bytes")),
    total: mbOf(gauge(text, "nodejs_heap_size_total_bytes")),
    external: mbOf(gauge(text, "nodejs_external_memory_bytes")),
  };
}

/**
 * The process's own view every 2 s from /metrics (prom-client's default metrics and the module's):
 * V8's heap (live data vs. what the process holds), the scan's queue, report writes. Tells a peak
 * of garbage from one of data, and a watcher that falls behind from one that waits.
 */
function metricsSampler(c: Controller) {
  const t0 = now();
  const series: number[][] = [];
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    metricsOf(c)
      .then(text => {
        const mbOf = (v: number | undefined) => (v === undefined ? -1 : Math.round(v / MiB));
        series.push([
          Number(((now() - t0) / 1000).toFixed(1)),
          mbOf(gauge(text, "nodejs_heap_size_used_bytes")),
          mbOf(gauge(text, "nodejs_heap_size_total_bytes")),
          mbOf(gauge(text, "nodejs_external_memory_bytes")),
          gauge(text, "admission_guard_watcher_queue_depth") ?? -1,
          gauge(text, "admission_guard_report_writes_total", 'outcome="ok"') ?? 0,
        ]);
      })
      .catch(() => undefined)
      .finally(() => (busy = false));
  }, 2000);
  return {
    columns: ["s", "heapUsedMb", "heapTotalMb", "externalMb", "queueDepth", "reportWrites"],
    series,
    /** The largest value of a column from `fromS` on. */
    max: (column: number, fromS = 0) =>
      Math.max(-1, ...series.filter(r => r[0] >= fromS).map(r => r[column])),
    elapsed: () => (now() - t0) / 1000,
    stop: () => clearInterval(timer),
  };
}

// ---------------------------------------------------------------------------------------------
// The cluster of one size

function layoutOf(size: Size) {
  const namespaces = Math.max(1, Math.round(size.pods / PODS_PER_NAMESPACE));
  return { namespaces, nodes: size.nodes, ...clusterOf({ namespaces, nodes: size.nodes }) };
}
type ClusterLayout = ReturnType<typeof layoutOf>;

/** Everything but the pods and workloads: what the engine reads. */
function* clusterObjects(l: ClusterLayout): Generator<KubeObject> {
  for (let n = 0; n < l.namespaces; n++) {
    const ns = l.nsName(n);
    yield namespaceObject(ns, n);
    yield serviceAccountObject(ns, "default");
    yield serviceAccountObject(ns, "workload");
    yield resourceQuotaObject(ns);
    if (n % 5 === 0) yield limitRangeObject(ns);
  }
  for (let n = 0; n < l.nodes; n++) yield nodeObject(l.nodeName(n), n);
}

/** Pod indices of namespace n (pod i lives in namespace i % namespaces). */
function* podsOf(l: ClusterLayout, pods: number, n: number) {
  for (let i = n; i < pods; i += l.namespaces) yield i;
}

interface Expected {
  digest: string;
  summary: Summary;
  /** Objects named in the results (at most maxResults results). */
  named: number;
  judged: number;
}

/** What decides that a stored report is right: all but its time stamps and the API's metadata. */
function contentDigest(r: PolicyReport): string {
  return createHash("sha1")
    .update(
      JSON.stringify([
        r.metadata.labels,
        r.metadata.annotations ?? {},
        r.summary,
        r.results.map(x => ({ ...x, timestamp: undefined })),
      ]),
    )
    .digest("base64");
}

const namedIn = (r: PolicyReport) =>
  new Set(r.results.flatMap(x => x.resources.map(ref => ref.uid ?? `${ref.kind}/${ref.name}`)))
    .size;

/**
 * Every namespace's report as the engine says it should be: answer() on each pod and workload, as
 * the scan asks it (a dry run of a CREATE, scan: true), built into a report with the module's
 * maxResults. A namespace at a time: nothing of the pods is kept.
 */
async function expectedReports(
  l: ClusterLayout,
  pods: number,
  deps: EngineDeps,
  /** Each pod's generation (how often it was replaced): the reports after a churn. */
  generations?: Uint16Array,
) {
  const out = new Map<string, Expected>();
  for (let n = 0; n < l.namespaces; n++) {
    const ns = l.nsName(n);
    const results: ObjectResults[] = [];
    const judge = async (object: KubeObject) => {
      const found = await answer(
        { object, operation: "CREATE", dryRun: true, scan: true },
        deps,
        deps.policies,
      );
      if (found.handled) results.push(objectResults(object, ns, found));
    };
    for (const i of podsOf(l, pods, n))
      await judge(l.makePod(i, l.shapeOf(i), generations?.[i] ?? 0));
    await judge(deploymentObject(ns, n));
    // The event loop turns between namespaces: the RSS and /metrics samplers keep their pace, and
    // the keep-alive connection to the controller does not idle out under a request.
    await new Promise(resolve => setImmediate(resolve));
    const report = buildReport(ns, results, deps.settings.reports.maxResults, 0);
    out.set(ns, {
      digest: contentDigest(report),
      summary: report.summary,
      named: namedIn(report),
      judged: results.length,
    });
  }
  return out;
}

/** Where each namespace's stored report stands; verdicts cached by resourceVersion. */
function reportChecker(api: StandInApi, expected: Map<string, Expected>) {
  const cache = new Map<string, { version: string; counts: boolean; content: boolean }>();
  return () => {
    let missing = 0;
    let countsWrong = 0;
    let contentWrong = 0;
    const examples: string[] = [];
    for (const [ns, want] of expected) {
      const r = api.get("PolicyReport", "admission-guard", ns) as unknown as
        | (PolicyReport & { metadata: { resourceVersion?: string } })
        | undefined;
      if (!r) {
        missing++;
        if (examples.length < 3) examples.push(`${ns}: no report`);
        continue;
      }
      const version = String(r.metadata.resourceVersion);
      let verdict = cache.get(ns);
      if (verdict?.version !== version) {
        const counts =
          JSON.stringify(r.summary) === JSON.stringify(want.summary) && namedIn(r) === want.named;
        verdict = { version, counts, content: counts && contentDigest(r) === want.digest };
        cache.set(ns, verdict);
        if (!verdict.content && examples.length < 3)
          examples.push(
            `${ns}: summary ${JSON.stringify(r.summary)} (want ${JSON.stringify(want.summary)}), ` +
              `${namedIn(r)} objects named (want ${want.named})`,
          );
      }
      if (!verdict.counts) countsWrong++;
      if (!verdict.content) contentWrong++;
    }
    return { missing, countsWrong, contentWrong, examples };
  };
}

/**
 * Counts what the processes asked the stand-in, per resource: list requests (pages), the lists
 * they make (a first page: no continue token), those with a limit, watches; and report writes.
 * Keeps no bodies.
 */
function requestCounter(api: StandInApi) {
  const counts = {
    lists: {} as Record<string, { pages: number; lists: number; paged: number; watches: number }>,
    reportWrites: 0,
  };
  const push = api.requests.push.bind(api.requests);
  api.requests.push = (...requests) => {
    for (const r of requests) {
      if (r.method === "PATCH" && r.path.includes("/policyreports/")) counts.reportWrites++;
      if (r.method !== "GET") continue;
      const url = new URL(r.path, "http://x");
      const plural = url.pathname.split("/").filter(Boolean).pop() ?? "";
      if (/\/(api\/v1|apis\/[^/]+\/[^/]+)(\/namespaces\/[^/]+)?\/[a-z]+$/.test(url.pathname)) {
        const c = (counts.lists[plural] ??= { pages: 0, lists: 0, paged: 0, watches: 0 });
        const q = url.searchParams;
        if (q.get("watch") === "true" || q.get("watch") === "1") c.watches++;
        else {
          c.pages++;
          if (!q.has("continue")) c.lists++;
          if (q.has("limit")) c.paged++;
        }
      }
    }
    return push(...requests);
  };
  // The log keeps every request and its body (a report is ~300 KB): emptied as it goes.
  const timer = setInterval(() => api.requests.splice(0), 1000);
  return {
    counts,
    stop: () => {
      clearInterval(timer);
      api.requests.push = push;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The watcher

async function watcherRun(
  api: StandInApi,
  l: ClusterLayout,
  size: Size,
  deps: EngineDeps,
  expected: Map<string, Expected>,
) {
  const sampler = rssSampler(OPTS.bundle);
  const requests = requestCounter(api);
  const out: Record<string, unknown> = { loadAtStart: load() };
  let watcher: Controller | undefined;
  let metrics: ReturnType<typeof metricsSampler> | undefined;
  const t0 = now();
  const s = (t: number) => Number(((t - t0) / 1000).toFixed(2));
  // The pod's memory limit, when asked: the watcher moved into it as soon as it is seen.
  const cgroup = OPTS.memoryLimitMib ? MemoryCgroup.create(OPTS.memoryLimitMib) : undefined;
  const adopting = cgroup
    ? setInterval(() => {
        const pid = childRunning(OPTS.bundle);
        if (!pid) return;
        cgroup.adopt(pid);
        clearInterval(adopting);
        out.cgroupAdoptedAtS = s(now());
      }, 5)
    : undefined;
  try {
    watcher = await startWatcher({
      api,
      bundle: OPTS.bundle,
      env: CONTROLLER_ENV,
      startTimeoutMs: TIMEOUT.start * 1000,
    });
    out.healthyS = s(now());
    metrics = metricsSampler(watcher);
    const pid = sampler.pid() ?? childRunning(OPTS.bundle);
    if (!pid) throw new Error("the watcher's process was not found");
    log(`watcher healthy after ${out.healthyS} s (pid ${pid})`);

    // Until every report is right.
    const check = reportChecker(api, expected);
    const deadline = now() + TIMEOUT.reportsRight * 1000;
    let state = check();
    let lastLog = now();
    for (;;) {
      if (out.countsRightS === undefined && !state.missing && !state.countsWrong)
        out.countsRightS = s(now());
      if (!state.missing && !state.contentWrong) {
        out.reportsRightS = s(now());
        break;
      }
      if (now() > deadline || sampler.over()) {
        out.reportsRightS = undefined;
        out.reportsBehind = state;
        log(`reports not right after ${s(now())} s: ${JSON.stringify(state)}`);
        break;
      }
      if (now() - lastLog > 15_000) {
        lastLog = now();
        const last = sampler.samples[sampler.samples.length - 1];
        log(
          `  ${s(now())} s: ${state.missing} reports missing, ${state.contentWrong} not right; watcher RSS ${last?.mb.toFixed(0)} MB`,
        );
      }
      await sleep(500);
      state = check();
    }
    out.cpuAtRightS = cpuSeconds(pid);
    out.startBusiest = busiest(sampler.samples, 0, sampler.elapsed());
    out.hwmAtRightMb = memoryMb(pid).hwm;
    out.reportWritesAtRight = requests.counts.reportWrites;
    if (out.reportsRightS !== undefined) log(`every report right after ${out.reportsRightS} s`);

    const settle = await settled(pid, sampler);
    out.settled = settle;
    out.settledRssMb = settle.rssMb;
    out.hwmStartMb = memoryMb(pid).hwm;
    out.maxSampleStartMb = Math.max(...sampler.samples.map(x => x.mb));
    out.heapSettledMb = await heapOf(watcher);
    log(
      `watcher settled at ${settle.rssMb?.toFixed(0)} MB (V8 heap ${JSON.stringify(out.heapSettledMb)}), peak ${out.hwmStartMb} MB`,
    );

    // Churn: 200 pods/s replaced; probes on violating pods.
    // What every report says after it, built beforehand (the watcher is idle now).
    const t1 = now();
    const after = await expectedReports(l, size.pods, deps, churnPlan(size.pods).after);
    out.expectedAfterChurnS = Number(((now() - t1) / 1000).toFixed(1));
    const checkAfter = reportChecker(api, after);
    const rightAfter = () => {
      const st = checkAfter();
      return !st.missing && !st.contentWrong;
    };
    out.heapMaxStartMb = { used: metrics.max(1), total: metrics.max(2) };
    const lagBefore = histogram(await metricsOf(watcher), "admission_guard_report_lag_seconds");
    // The CPU each side spends from the churn's start until every report is right again.
    const cpu0 = { watcher: cpuSeconds(pid), bench: process.cpuUsage() };
    const churnFromS = metrics.elapsed();
    const churnFromSample = sampler.elapsed();
    const churn = await churnRun(api, l, size.pods, sampler, rightAfter);
    const benchCpu = process.cpuUsage(cpu0.bench);
    out.churnCpu = {
      /** CPU seconds per second in the busiest 10 s: 1 is a whole core (a saturated event loop). */
      busiest: busiest(sampler.samples, churnFromSample, sampler.elapsed()),
      watcherS: Number((cpuSeconds(pid) - cpu0.watcher).toFixed(1)),
      benchS: Number(((benchCpu.user + benchCpu.system) / 1e6).toFixed(1)),
      wallS: Number((metrics.elapsed() - churnFromS).toFixed(1)),
      maxQueueDepth: metrics.max(4, churnFromS),
      heapMax: { used: metrics.max(1, churnFromS), total: metrics.max(2, churnFromS) },
    };
    if (churn.rightAfterS === undefined) out.behindAfterChurn = checkAfter();
    out.churn = churn;
    const lagAfter = histogram(await metricsOf(watcher), "admission_guard_report_lag_seconds");
    out.lagMetric = {
      count:
        (lagAfter[lagAfter.length - 1]?.count ?? 0) - (lagBefore[lagBefore.length - 1]?.count ?? 0),
      p50S: histogramQuantile(lagBefore, lagAfter, 0.5),
      p99S: histogramQuantile(lagBefore, lagAfter, 0.99),
      buckets: lagAfter,
    };
    await quiet(pid);
    out.afterChurnRssMb = memoryMb(pid).rss;
    out.hwmMb = memoryMb(pid).hwm;
    out.maxSampleMb = Math.max(...sampler.samples.map(x => x.mb));
    out.cpuTotalS = cpuSeconds(pid);
    out.loadAtEnd = load();
    out.requests = requests.counts;
    log(
      `churn: lag p50/p99 ${fmt(churn.probeP50S)}/${fmt(churn.probeP99S)} s (probes), right ${fmt(churn.rightAfterS)} s after the last change, ${fmt((out.lagMetric as { p50S?: number }).p50S)}/${fmt((out.lagMetric as { p99S?: number }).p99S)} s (metric); peak ${out.hwmMb} MB`,
    );
  } catch (e) {
    out.error = String(e instanceof Error ? e.message : e).slice(0, 2000);
    log(`watcher: ${out.error}`);
    const pid = sampler.pid();
    if (pid)
      try {
        out.hwmMb = memoryMb(pid).hwm;
      } catch {
        // exited
      }
  } finally {
    requests.stop();
    metrics?.stop();
    // What it warned about (re-lists, failed writes), success or not.
    if (watcher) out.logTail = watcher.logs().slice(-6000);
    clearInterval(adopting);
    if (cgroup) {
      out.cgroupPeakMib = cgroup.peakMiB();
      out.oomKills = cgroup.oomKills();
    }
    await watcher?.stop();
    cgroup?.remove();
    sampler.stop();
  }
  if (metrics) out.metricsSeries = { columns: metrics.columns, rows: metrics.series };
  out.maxSampleMb ??= sampler.samples.length
    ? Math.max(...sampler.samples.map(x => x.mb))
    : undefined;
  out.rssSeries = thin(sampler.samples);
  return out;
}

/** Keeps at most ~600 samples of a series (every k-th, and the largest). */
const thin = (samples: Sample[]) =>
  thinned(
    samples,
    x => x.mb,
    x => [
      Number(x.t.toFixed(1)),
      Math.round(x.mb),
      Number(x.cpu.toFixed(2)),
      Number(x.benchCpu.toFixed(2)),
    ],
  );

/**
 * Which pods the churn replaces, in order: replacement j is pod (j × stride) mod pods, a stride
 * prime to the pod count, so that they spread over namespaces; and each pod's generation after.
 */
function churnPlan(pods: number) {
  let stride = 7919;
  while (gcd(stride, pods) !== 1) stride += 2;
  const total = CHURN_RATE * OPTS.churnS;
  const after = new Uint16Array(pods);
  for (let j = 0; j < total; j++) after[(j * stride) % pods]++;
  return { stride, total, after };
}

async function churnRun(
  api: StandInApi,
  l: ClusterLayout,
  pods: number,
  sampler: ReturnType<typeof rssSampler>,
  /** Whether every report is what it should be after the churn. */
  rightAfter: () => boolean,
) {
  const { stride, total } = churnPlan(pods);
  const generation = new Uint16Array(pods);
  const probes: { ns: string; uid: string; t: number; seen?: number }[] = [];
  const tStart = now();
  const sampleFrom = sampler.elapsed();
  let done = false;
  let tEnd = Infinity;
  // Polls reports for the probes' new pods while the churn runs.
  const seenIn = new Map<string, { version: string; uids: Set<string> }>();
  let tRight: number | undefined;
  const poll = (async () => {
    const deadline = () => (done ? tEnd + TIMEOUT.probes * 1000 : Infinity);
    for (;;) {
      const waiting = probes.filter(p => p.seen === undefined);
      const t = now();
      if (done && tRight === undefined && rightAfter()) tRight = t;
      if (done && !waiting.length && tRight !== undefined) return;
      if (now() > deadline()) return;
      for (const p of waiting) {
        const r = api.get("PolicyReport", "admission-guard", p.ns) as unknown as
          | (PolicyReport & { metadata: { resourceVersion?: string } })
          | undefined;
        if (!r) continue;
        const version = String(r.metadata.resourceVersion);
        let known = seenIn.get(p.ns);
        if (known?.version !== version) {
          known = {
            version,
            uids: new Set(r.results.flatMap(x => x.resources.map(ref => String(ref.uid)))),
          };
          seenIn.set(p.ns, known);
        }
        if (known.uids.has(p.uid)) p.seen = t;
      }
      await sleep(250);
    }
  })();
  const perTick = CHURN_RATE / 20;
  for (let j = 0; j < total; j++) {
    const i = (j * stride) % pods;
    const shape = l.shapeOf(i);
    const old = l.makePod(i, shape, generation[i]);
    generation[i]++;
    const next = l.makePod(i, shape, generation[i]);
    api.remove("Pod", old.metadata!.name!, old.metadata!.namespace);
    api.put(next);
    // A probe on a pod's last replacement of the run only: one replaced again before its report
    // was written would never show (at 2,000 pods each is replaced three times in 30 s).
    if (shape !== "fixed" && j % 4 === 0 && j + pods >= total)
      probes.push({ ns: next.metadata!.namespace!, uid: String(next.metadata!.uid), t: now() });
    if ((j + 1) % perTick === 0) {
      const due = tStart + ((j + 1) / CHURN_RATE) * 1000;
      await sleep(Math.max(0, due - now()));
    }
  }
  tEnd = now();
  done = true;
  await poll;
  const lags = probes.filter(p => p.seen !== undefined).map(p => (p.seen! - p.t) / 1000);
  const during = sampler.since(sampleFrom).map(x => x.mb);
  return {
    replaced: total,
    seconds: Number(((tEnd - tStart) / 1000).toFixed(2)),
    rate: Number((total / ((tEnd - tStart) / 1000)).toFixed(1)),
    probes: probes.length,
    probesSeen: lags.length,
    probeP50S: quantile(lags, 0.5),
    probeP99S: quantile(lags, 0.99),
    probeMaxS: lags.length ? Math.max(...lags) : undefined,
    /** From the last replacement until every report is right again (undefined: not in time). */
    rightAfterS: tRight === undefined ? undefined : Number(((tRight - tEnd) / 1000).toFixed(2)),
    maxRssMb: during.length ? Math.max(...during) : undefined,
  };
}

const gcd = (a: number, b: number): number => (b ? gcd(b, a % b) : a);

// ---------------------------------------------------------------------------------------------
// The admission controller

/** The pods whose validate latency is measured: each mutated once, then validated 100 times. */
function reviewPods(l: ClusterLayout): KubeObject[] {
  const ns = l.nsName(0);
  const fixed = l.makePod(0, "fixed");
  const privileged = l.makePod(l.namespaces * 7, "privileged");
  const gpu = deploymentObject(ns, 0);
  const strip = (pod: KubeObject, name: string): KubeObject => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: ns,
      labels: pod.metadata?.labels,
      annotations: pod.metadata?.annotations,
    },
    spec: { ...(pod.spec as Record<string, unknown>), nodeName: undefined },
  });
  const template = (gpu.spec as { template: KubeObject }).template;
  return [
    strip(fixed, "bench-fixed"),
    strip(privileged, "bench-privileged"),
    {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "bench-gpu", namespace: ns, labels: template.metadata?.labels },
      spec: template.spec,
    },
  ];
}

async function admissionRun(api: StandInApi, l: ClusterLayout) {
  const sampler = rssSampler(OPTS.bundle);
  const requests = requestCounter(api);
  const out: Record<string, unknown> = { loadAtStart: load() };
  let controller: Controller | undefined;
  const t0 = now();
  const s = (t: number) => Number(((t - t0) / 1000).toFixed(2));
  try {
    controller = await startController({
      // The module as deployed: no example capability.
      examples: false,
      api,
      bundle: OPTS.bundle,
      env: CONTROLLER_ENV,
      startTimeoutMs: TIMEOUT.start * 1000,
    });
    out.healthyS = s(now());
    const pid = sampler.pid() ?? childRunning(OPTS.bundle);
    if (!pid) throw new Error("the admission controller's process was not found");
    // Synced: every cache on /metrics says 1, nodes among them.
    const deadline = now() + TIMEOUT.synced * 1000;
    for (;;) {
      const text = await metricsOf(controller);
      const caches = [...text.matchAll(/^admission_guard_cache_synced\{cache="([^"]+)"\} (\S+)/gm)];
      out.caches = Object.fromEntries(caches.map(m => [m[1], Number(m[2])]));
      if (caches.some(m => m[1] === "nodes") && caches.every(m => m[2] === "1")) break;
      if (now() > deadline || sampler.over())
        throw new Error(`caches not synced: ${JSON.stringify(out.caches)}`);
      await sleep(200);
    }
    out.syncedS = s(now());
    out.cpuAtSyncedS = cpuSeconds(pid);
    log(
      `admission controller healthy after ${out.healthyS} s, caches synced after ${out.syncedS} s`,
    );
    const settle = await settled(pid, sampler);
    out.settled = settle;
    out.settledRssMb = settle.rssMb;
    out.hwmMb = memoryMb(pid).hwm;
    out.heapSettledMb = await heapOf(controller);

    // Validate latency, the client's view.
    const perPod: Record<string, { p50Ms?: number; p99Ms?: number; allowed: boolean }> = {};
    const all: number[] = [];
    for (const pod of reviewPods(l)) {
      const review = podCreateReview(pod);
      const mutated = await controller.mutate(review);
      const patched = applyPatch(review.request!.object as KubeObject, mutated.response!);
      const validate = { ...review, request: { ...review.request!, object: patched } };
      const times: number[] = [];
      let allowed = false;
      for (let k = 0; k < 110; k++) {
        const t = now();
        const answer = await controller.validate(validate);
        if (k >= 10) times.push(now() - t);
        allowed = answer.response!.allowed;
      }
      all.push(...times);
      perPod[String(pod.metadata!.name)] = {
        p50Ms: quantile(times, 0.5),
        p99Ms: quantile(times, 0.99),
        allowed,
      };
    }
    out.validate = { p50Ms: quantile(all, 0.5), p99Ms: quantile(all, 0.99), perPod };
    out.afterValidateRssMb = memoryMb(pid).rss;
    out.hwmMb = memoryMb(pid).hwm;
    out.maxSampleMb = Math.max(...sampler.samples.map(x => x.mb));
    out.cpuTotalS = cpuSeconds(pid);
    out.loadAtEnd = load();
    out.requests = requests.counts;
    log(
      `admission settled at ${settle.rssMb?.toFixed(0)} MB, peak ${out.hwmMb} MB; validate p50/p99 ${fmt(quantile(all, 0.5))}/${fmt(quantile(all, 0.99))} ms`,
    );
  } catch (e) {
    out.error = String(e instanceof Error ? e.message : e).slice(0, 2000);
    log(`admission: ${out.error}`);
    if (controller) out.logTail = controller.logs().slice(-3000);
  } finally {
    requests.stop();
    await controller?.stop();
    sampler.stop();
  }
  out.rssSeries = thin(sampler.samples);
  return out;
}

// ---------------------------------------------------------------------------------------------
// One size

async function runSize(size: Size, deps0: Omit<EngineDeps, "cluster">) {
  const l = layoutOf(size);
  const result: Record<string, unknown> = {
    pods: size.pods,
    nodes: size.nodes,
    namespaces: l.namespaces,
    workloads: l.namespaces,
    startedAt: new Date().toISOString(),
    load: load(),
  };
  const t0 = now();
  const api = await startStandIn();
  try {
    // Filled object by object: nothing but the stand-in's copies is kept.
    let bytes = 0;
    const cluster: KubeObject[] = [];
    for (const o of clusterObjects(l)) {
      cluster.push(api.put(o));
    }
    for (let n = 0; n < l.namespaces; n++) api.put(deploymentObject(l.nsName(n), n));
    for (let i = 0; i < size.pods; i++) {
      const pod = l.makePod(i);
      if (i < 100) bytes += Buffer.byteLength(JSON.stringify(pod));
      api.put(pod);
    }
    const nodeBytes = Buffer.byteLength(JSON.stringify(api.get("Node", l.nodeName(0))));
    result.objectBytes = { pod: Math.round(bytes / Math.min(100, size.pods)), node: nodeBytes };
    result.standInFilledS = Number(((now() - t0) / 1000).toFixed(1));
    const filled = benchMem();
    result.benchAfterFill = filled;
    log(
      `${size.pods} pods, ${size.nodes} nodes, ${l.namespaces} namespaces in the stand-in (${result.standInFilledS} s; this process ${filled.rssMb} MB)`,
    );

    const t1 = now();
    const deps: EngineDeps = { ...deps0, cluster: new SnapshotCluster(cluster) };
    const expected = await expectedReports(l, size.pods, deps);
    result.expectedS = Number(((now() - t1) / 1000).toFixed(1));
    const sums = [...expected.values()];
    result.expected = {
      judged: sums.reduce((n, e) => n + e.judged, 0),
      results: sums.reduce((n, e) => n + Object.values(e.summary).reduce((a, b) => a + b, 0), 0),
      fail: sums.reduce((n, e) => n + e.summary.fail, 0),
    };
    log(`expected reports built in ${result.expectedS} s: ${JSON.stringify(result.expected)}`);

    if (OPTS.only !== "admission") {
      log("the watcher...");
      result.watcher = await watcherRun(api, l, size, deps, expected);
    }
    result.benchAfterWatcher = benchMem();
    if (OPTS.only !== "watcher") {
      log("the admission controller...");
      result.admission = await admissionRun(api, l);
    }
    result.benchPeakRssMb = Math.round(
      Number(readFileSync("/proc/self/status", "utf8").match(/VmHWM:\s+(\d+)/)?.[1] ?? 0) / 1024,
    );
  } finally {
    await api.stop();
  }
  result.tookS = Number(((now() - t0) / 1000).toFixed(1));
  return result;
}

// ---------------------------------------------------------------------------------------------
// The table

const fmt = (n: unknown, digits = 1) =>
  typeof n === "number" && Number.isFinite(n) ? n.toFixed(digits) : "–";
const mb = (n: unknown) => (typeof n === "number" ? `${Math.round(n)}` : "–");
const mark = (n: unknown, limit: number) =>
  typeof n === "number" ? (n <= limit ? " ✓" : " ✗") : "";

type R = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

function table(results: R[]): string {
  const k = (n: number) => (n >= 1000 ? `${n / 1000}k` : String(n));
  const head = ["", "target", ...results.map(r => `${k(r.pods)} pods / ${k(r.nodes)} nodes`)];
  const base = results[0]?.admission?.validate;
  const rows: string[][] = [
    [
      "watcher RSS settled (MiB)",
      `≤ ${TARGETS.watcherSettledMb} at 100k pods`,
      ...results.map(
        r => mb(r.watcher?.settledRssMb) + mark(r.watcher?.settledRssMb, TARGETS.watcherSettledMb),
      ),
    ],
    [
      "watcher peak, start (VmHWM, MiB)",
      `≤ ${TARGETS.watcherPeakMb} at 100k pods`,
      ...results.map(
        r => mb(r.watcher?.hwmStartMb) + mark(r.watcher?.hwmStartMb, TARGETS.watcherPeakMb),
      ),
    ],
    [
      "watcher peak, start + churn (MiB)",
      `≤ ${TARGETS.watcherPeakMb} at 100k pods`,
      ...results.map(r => mb(r.watcher?.hwmMb) + mark(r.watcher?.hwmMb, TARGETS.watcherPeakMb)),
    ],
    [
      "start → every report right (s)",
      `≤ ${TARGETS.reportsRightS}`,
      ...results.map(r =>
        r.watcher?.reportsRightS !== undefined
          ? fmt(r.watcher.reportsRightS) + mark(r.watcher.reportsRightS, TARGETS.reportsRightS)
          : r.watcher
            ? `not in ${TIMEOUT.reportsRight} ✗`
            : "–",
      ),
    ],
    [
      "  … busiest 10 s before right: watcher / bench (cores)",
      "",
      ...results.map(
        r =>
          `${fmt(r.watcher?.startBusiest?.child, 2)} / ${fmt(r.watcher?.startBusiest?.bench, 2)}`,
      ),
    ],
    [
      "  … counts right / /healthz (s)",
      "",
      ...results.map(r => `${fmt(r.watcher?.countsRightS)} / ${fmt(r.watcher?.healthyS)}`),
    ],
    [
      `churn ${CHURN_RATE}/s: report lag p50 / p99 (s), probes`,
      `interval ${INTERVAL_S} s`,
      ...results.map(
        r =>
          `${fmt(r.watcher?.churn?.probeP50S)} / ${fmt(r.watcher?.churn?.probeP99S)} (${r.watcher?.churn?.probesSeen ?? "–"}/${r.watcher?.churn?.probes ?? "–"})`,
      ),
    ],
    [
      "  … last change → every report right (s)",
      "",
      ...results.map(r => fmt(r.watcher?.churn?.rightAfterS)),
    ],
    [
      "  … lag p50 / p99 (s), watcher's histogram",
      "",
      ...results.map(
        r => `${fmt(r.watcher?.lagMetric?.p50S)} / ${fmt(r.watcher?.lagMetric?.p99S)}`,
      ),
    ],
    [
      "  … churn rate achieved (pods/s), RSS max in churn",
      "",
      ...results.map(r => `${fmt(r.watcher?.churn?.rate, 0)}, ${mb(r.watcher?.churn?.maxRssMb)}`),
    ],
    [
      "  … CPU from churn start to reports right: watcher / bench (s)",
      "",
      ...results.map(
        r =>
          `${fmt(r.watcher?.churnCpu?.watcherS, 0)} / ${fmt(r.watcher?.churnCpu?.benchS, 0)} in ${fmt(r.watcher?.churnCpu?.wallS, 0)}; busiest 10 s ${fmt(r.watcher?.churnCpu?.busiest?.child, 2)} / ${fmt(r.watcher?.churnCpu?.busiest?.bench, 2)}`,
      ),
    ],
    [
      "watcher V8 heap used / total, settled (MiB)",
      "",
      ...results.map(
        r => `${mb(r.watcher?.heapSettledMb?.used)} / ${mb(r.watcher?.heapSettledMb?.total)}`,
      ),
    ],
    [
      "admission RSS settled (MiB)",
      `≤ ${TARGETS.admissionMb} at 15k nodes`,
      ...results.map(
        r => mb(r.admission?.settledRssMb) + mark(r.admission?.settledRssMb, TARGETS.admissionMb),
      ),
    ],
    ["admission peak (VmHWM, MiB)", "", ...results.map(r => mb(r.admission?.hwmMb))],
    [
      "admission V8 heap used / total, settled (MiB)",
      "",
      ...results.map(
        r => `${mb(r.admission?.heapSettledMb?.used)} / ${mb(r.admission?.heapSettledMb?.total)}`,
      ),
    ],
    [
      "admission start → caches synced (s)",
      "",
      ...results.map(r => `${fmt(r.admission?.syncedS)} (healthy ${fmt(r.admission?.healthyS)})`),
    ],
    [
      "validate p50 / p99 (ms)",
      "unchanged",
      ...results.map(r => {
        const v = r.admission?.validate;
        if (!v) return "–";
        const ratio = base?.p50Ms ? ` (×${(v.p50Ms / base.p50Ms).toFixed(2)})` : "";
        return `${fmt(v.p50Ms, 2)} / ${fmt(v.p99Ms, 2)}${ratio}`;
      }),
    ],
    [
      "load 1 min at start (2 cores)",
      "",
      ...results.map(
        r => `${r.watcher?.loadAtStart?.[0] ?? "–"} / ${r.admission?.loadAtStart?.[0] ?? "–"}`,
      ),
    ],
    ["bench process (stand-in) peak RSS (MiB)", "", ...results.map(r => mb(r.benchPeakRssMb))],
    ["size took (s)", "", ...results.map(r => fmt(r.tookS, 0))],
  ];
  const lines = [head, head.map(() => "---"), ...rows].map(r => `| ${r.join(" | ")} |`);
  return lines.join("\n");
}

// ---------------------------------------------------------------------------------------------

/** The heap this process needs: the stand-in holds every object (~8 KB a pod) and every report. */
const HEAP_MB = 12 * 1024;

async function main() {
  // `tsx bench/scale.ts` runs with V8's default heap (~4 GiB here): again with more, when the sizes need it.
  if (
    Math.max(...OPTS.sizes.map(s => s.pods)) >= 50_000 &&
    getHeapStatistics().heap_size_limit < HEAP_MB * MiB * 0.9
  ) {
    log(`again with --max-old-space-size=${HEAP_MB}`);
    const child = spawn(
      process.execPath,
      [`--max-old-space-size=${HEAP_MB}`, ...process.execArgv, ...process.argv.slice(1)],
      { stdio: "inherit" },
    );
    // Stopped from outside: the run (and through its exit hook, its controllers) stops too.
    for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const)
      process.on(signal, () => child.kill(signal));
    child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
    return;
  }
  // Stopped from outside: exit, so that the harness's exit hook stops the controllers.
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const)
    process.on(signal, () => process.exit(130));
  Log.level = process.env.LOG_LEVEL ?? "warn";
  const { policies } = await import("../capabilities");
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  mkdirSync(RUNS, { recursive: true });
  const file = join(RUNS, `scale-${OPTS.label ? `${OPTS.label}-` : ""}${stamp}.json`);
  const run = {
    label: OPTS.label,
    bundle: OPTS.bundle,
    argv: process.argv.slice(2),
    machine: {
      cpus: cpus().length,
      memoryGiB: Math.round(totalmem() / 2 ** 30),
      node: process.version,
      load: load(),
    },
    settings: {
      ...SETTINGS_ENV,
      intervalSeconds: INTERVAL_S,
      maxResults: SETTINGS.reports.maxResults,
    },
    nodeOptions: OPTS.nodeOptions,
    churn: { rate: CHURN_RATE, seconds: OPTS.churnS },
    settleSeconds: OPTS.settleS,
    targets: TARGETS,
    sizes: [] as R[],
  };
  log(
    `heap limit ${Math.round(getHeapStatistics().heap_size_limit / MiB)} MiB; bundle ${OPTS.bundle}; sizes ${OPTS.sizes.map(s => `${s.pods}/${s.nodes}`).join(", ")}`,
  );
  // Stops the run (and, through the harness's exit hook, its children) when a size overruns.
  const guard = setInterval(() => {
    const rss = process.memoryUsage().rss / MiB;
    if (rss > BENCH_RSS_LIMIT_MB) {
      log(`this process holds ${Math.round(rss)} MB, over ${BENCH_RSS_LIMIT_MB}: stopping`);
      process.exit(3);
    }
  }, 1000);
  guard.unref();
  for (const size of OPTS.sizes) {
    const watchdog = setTimeout(() => {
      log(`the size ${size.pods}/${size.nodes} overran ${SIZE_WATCHDOG_MS / 60_000} min: stopping`);
      process.exit(2);
    }, SIZE_WATCHDOG_MS);
    const result = await runSize(size, { settings: SETTINGS, policies });
    clearTimeout(watchdog);
    run.sizes.push(result);
    writeFileSync(file, JSON.stringify(run, null, 2));
  }
  console.log(
    `\nbench:scale${OPTS.label ? ` (${OPTS.label})` : ""}: ${basename(OPTS.bundle)}, ${cpus().length} cores, reports interval ${INTERVAL_S} s, churn ${CHURN_RATE} pods/s for ${OPTS.churnS} s${OPTS.nodeOptions ? `, NODE_OPTIONS=${OPTS.nodeOptions}` : ""}\n`,
  );
  console.log(table(run.sizes));
  console.log(`\nraw numbers: ${file}`);
}

main().catch(e => {
  console.error(e);
  process.exit(1);
});
