// The PolicyReport scan at 10,000 pods (`npm run bench:reports`; not part of `npm test`): what the
// watcher's scan (lib/reports/scanner.ts) costs, and whether it keeps up with a cluster's churn.
//
// 1. In process, no network: 10,000 pods in 50 namespaces (70% as the module leaves them, 30%
//    with violations: privileged, an image from a registry outside registries.allowed, no
//    securityContext at all on the default ServiceAccount), realistic in size (labels, owner,
//    managedFields, two containers with env, probes, resources, a full Running status); the
//    cluster: the 50 Namespaces, a ResourceQuota and a LimitRange in 10 of them, a ServiceAccount
//    in each, 20 Nodes. Reports go to an in-memory store that counts writes and bytes.
//      answer     the engine's answer() on each pod, what the validating webhook runs per request:
//                 the baseline
//      scan       scanner.observe() on each pod, all at once, as the watcher's initial list
//                 delivers them (one synchronous loop over the list, no await in between), then
//                 every namespace's report written (flushPending + idle)
//      unchanged  the same 10,000 pods observed again with only their status changed (a status
//                 update is the most frequent watch event): must judge nothing, write nothing
//    Both bursts in the same shape, so scan ÷ answer is what the scan adds to the judging. Rounds
//    interleave answer and scan (alternating which goes first); medians. Event-loop delay
//    (perf_hooks.monitorEventLoopDelay, 10 ms resolution) over each burst: a burst that never
//    yields shows as one long delay.
// 2. End to end, through Pepr's real watcher: the built bundle (PEPR_WATCH_MODE=true), against the
//    stand-in API preloaded with the same objects. Time from the process start until every
//    namespace's PolicyReport holds what the in-process scan of the same pods says (labels,
//    summary, every result but its time stamp); the watcher's CPU seconds and RSS (/proc); then
//    churn: 1,000 violating pods replaced by fixed ones (delete + create) at 200/s, and the lag
//    from the last change until every report says so, the writes meanwhile (at most one per
//    namespace per interval, ADMISSION_GUARD_REPORTS_INTERVAL_SECONDS=5), the CPU until the
//    watcher is quiet again, and the RSS after. A worker thread probes the watcher's /healthz every
//    100 ms: its slowest answer is how long the watcher's event loop was blocked (the kubelet's
//    liveness probe times out after 1 s). Four watchers in turn, each adding one thing, so the
//    differences in churn CPU are what each thing costs:
//      reports off   reports and Events off: Pepr's watches alone (the control)
//      no writes     reports on, interval 1 h: the churn is judged, no report written during it
//      every 5 s     reports on, interval 5 s, Events off
//      + Events      the module's defaults but the 5 s interval: an Event on each new fixed pod
//
// The stand-in API runs in this process, so the end-to-end figures include a busy neighbour; trust
// ratios and orders of magnitude, not absolute figures (a 2-core machine shared with other work).
//
//   npm run bench:reports                 full run (~3 min on 2 cores, after the build)
//   npm run bench:reports -- --quick      2,000 pods, 400 replaced, 2 rounds (a smoke run, ~1.5 min)
//
// Raw numbers: bench/runs/reports-<timestamp>.json.
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { Worker } from "node:worker_threads";
import { Log } from "pepr";
import { SnapshotCluster } from "../lib/cluster/view";
import { answer, type EngineDeps } from "../lib/engine";
import type { KubeObject } from "../lib/objects/pod";
import type { PolicyReport } from "../lib/reports/policy-report";
import { ReportScanner, type ReportStore } from "../lib/reports/scanner";
import { settingsFromEnv } from "../lib/settings";
import { REPO_ROOT, startWatcher, type Controller } from "../test/support/controller";
import { startStandIn, type StandInApi } from "../test/support/stand-in-api";
import { cpuSeconds, memoryMb, pidOnPort } from "./proc";
import {
  clusterOf,
  limitRangeObject,
  namespaceObject,
  nodeObject,
  resourceQuotaObject,
  serviceAccountObject,
} from "./cluster-objects";

const args = new Set(process.argv.slice(2));
for (const a of args) if (a !== "--quick") throw new Error(`unknown argument ${a}`);
const QUICK = args.has("--quick");
const PODS = QUICK ? 2_000 : 10_000;
const ROUNDS = QUICK ? 2 : 5;
const NAMESPACES = 50;
const NODES = 20;
/** Pods replaced during the churn, and how fast. */
const CHURN = QUICK ? 400 : 1_000;
const CHURN_RATE = 200;
const INTERVAL_SECONDS = 5;
/** The module's settings in both halves: images only from these registries. */
const SETTINGS_ENV = {
  ADMISSION_GUARD_REGISTRIES_ALLOWED: "ghcr.io/org,registry.internal",
  ADMISSION_GUARD_REPORTS_INTERVAL_SECONDS: String(INTERVAL_SECONDS),
};
const RUNS = join(REPO_ROOT, "bench/runs");

// A full GC before memory readings, without a node flag (`tsx bench/reports.ts` passes none).
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

// ---------------------------------------------------------------------------------------------
// The cluster

// The objects are bench/cluster-objects.ts's (shared with bench/scale.ts).
const { nsName, nodeName, shapeOf, makePod, statusUpdate } = clusterOf({
  namespaces: NAMESPACES,
  nodes: NODES,
});

function clusterObjects(): KubeObject[] {
  const objects: KubeObject[] = [];
  for (let n = 0; n < NAMESPACES; n++) {
    const name = nsName(n);
    objects.push(namespaceObject(name, n), serviceAccountObject(name, "workload"));
    if (n % 5 === 0) objects.push(resourceQuotaObject(name), limitRangeObject(name));
  }
  for (let n = 0; n < NODES; n++) objects.push(nodeObject(nodeName(n), n));
  return objects;
}

// ---------------------------------------------------------------------------------------------
// In process

class CountingStore implements ReportStore {
  readonly stored = new Map<string, PolicyReport>();
  writes = 0;
  bytes = 0;
  largest = 0;
  async read(namespace: string) {
    return this.stored.get(namespace);
  }
  async write(report: PolicyReport) {
    const size = Buffer.byteLength(JSON.stringify(report));
    this.writes++;
    this.bytes += size;
    this.largest = Math.max(this.largest, size);
    this.stored.set(report.metadata.namespace, report);
  }
  async remove(namespace: string) {
    this.stored.delete(namespace);
  }
}

const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms));

/**
 * Event-loop delay over some work. A burst that never yields shows as one sample of its whole
 * length, recorded when the loop next turns; the histogram's timer must have ticked once before
 * (it measures from its previous tick; reset() forgets that tick too): hence the short waits.
 */
async function loopDelay() {
  const h = monitorEventLoopDelay({ resolution: 10 });
  h.enable();
  await sleep(25);
  return async () => {
    await sleep(30);
    h.disable();
    return { maxMs: h.max / 1e6, p99Ms: h.percentile(99) / 1e6, samples: h.count };
  };
}

async function answerRound(pods: KubeObject[], deps: EngineDeps) {
  gc();
  const loop = await loopDelay();
  const t0 = performance.now();
  const answers = await Promise.all(
    pods.map(object => answer({ object, operation: "CREATE", dryRun: false }, deps, deps.policies)),
  );
  const t1 = performance.now();
  const delay = await loop();
  if (answers.some(a => !a.handled)) throw new Error("answer(): a pod was not judged");
  return { totalMs: t1 - t0, usPerPod: ((t1 - t0) * 1000) / pods.length, loop: delay };
}

async function scanRound(pods: KubeObject[], deps: EngineDeps) {
  const store = new CountingStore();
  const scanner = new ReportScanner(() => deps, store, {
    intervalMs: deps.settings.reports.intervalSeconds * 1000,
    maxResults: deps.settings.reports.maxResults,
  });
  gc();
  const before = process.memoryUsage();
  const loop = await loopDelay();
  const t0 = performance.now();
  await Promise.all(pods.map(p => scanner.observe(p)));
  const t1 = performance.now();
  scanner.flushPending();
  await scanner.idle();
  const t2 = performance.now();
  const delay = await loop();
  const peak = process.memoryUsage();
  gc();
  const after = process.memoryUsage();
  if (scanner.size() !== pods.length)
    throw new Error(`scanned ${scanner.size()} of ${pods.length}`);
  if (store.writes !== NAMESPACES)
    throw new Error(`${store.writes} report writes for ${NAMESPACES} namespaces`);
  const scan = {
    judgeMs: t1 - t0,
    usPerPod: ((t1 - t0) * 1000) / pods.length,
    writtenMs: t2 - t0,
    writeMs: t2 - t1,
    writes: store.writes,
    reportBytes: store.bytes,
    largestReport: store.largest,
    results: [...store.stored.values()].reduce((n, r) => n + r.results.length, 0),
    rssDeltaMb: (peak.rss - before.rss) / 2 ** 20,
    heapRetainedMb: (after.heapUsed - before.heapUsed) / 2 ** 20,
    loop: delay,
  };

  // The unchanged path: status updates only. Built beforehand: the API server's copies, not ours.
  const updates = pods.map(statusUpdate);
  const stats = { ...scanner.stats };
  const unchangedLoop = await loopDelay();
  const t3 = performance.now();
  await Promise.all(updates.map(p => scanner.observe(p)));
  const t4 = performance.now();
  const unchangedDelay = await unchangedLoop();
  scanner.flushPending();
  await scanner.idle();
  const unchanged = {
    usPerEvent: ((t4 - t3) * 1000) / pods.length,
    judged: scanner.stats.judged - stats.judged,
    skipped: scanner.stats.unchanged - stats.unchanged,
    writes: store.writes - scan.writes,
    loop: unchangedDelay,
  };
  if (unchanged.judged || unchanged.writes || unchanged.skipped !== pods.length)
    throw new Error(`status updates judged ${unchanged.judged}, wrote ${unchanged.writes}`);
  return { scan, unchanged, reports: store.stored };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function inProcess(pods: KubeObject[], deps: EngineDeps) {
  const answers: Awaited<ReturnType<typeof answerRound>>[] = [];
  const scans: Awaited<ReturnType<typeof scanRound>>[] = [];
  // One of each first, not counted: the first pass compiles and fills the caches.
  await answerRound(pods.slice(0, 2000), deps);
  await scanRound(pods.slice(0, 2000), deps).catch(() => undefined);
  for (let round = 1; round <= ROUNDS; round++) {
    if (round % 2) {
      answers.push(await answerRound(pods, deps));
      scans.push(await scanRound(pods, deps));
    } else {
      scans.push(await scanRound(pods, deps));
      answers.push(await answerRound(pods, deps));
    }
    const [a, s] = [answers[answers.length - 1], scans[scans.length - 1]];
    process.stderr.write(
      `round ${round}/${ROUNDS}: answer ${a.usPerPod.toFixed(0)} µs/pod, scan ${s.scan.usPerPod.toFixed(0)} µs/pod, written after ${s.scan.writtenMs.toFixed(0)} ms, unchanged ${s.unchanged.usPerEvent.toFixed(1)} µs/event\n`,
    );
  }
  const m = (f: (s: (typeof scans)[number]) => number) => median(scans.map(f));
  const summary = {
    answerUsPerPod: median(answers.map(a => a.usPerPod)),
    answerMs: median(answers.map(a => a.totalMs)),
    answerLoopMaxMs: median(answers.map(a => a.loop.maxMs)),
    scanUsPerPod: m(s => s.scan.usPerPod),
    judgeMs: m(s => s.scan.judgeMs),
    writtenMs: m(s => s.scan.writtenMs),
    writeMs: m(s => s.scan.writeMs),
    writes: m(s => s.scan.writes),
    reportBytes: m(s => s.scan.reportBytes),
    largestReport: m(s => s.scan.largestReport),
    results: m(s => s.scan.results),
    rssDeltaMb: m(s => s.scan.rssDeltaMb),
    heapRetainedMb: m(s => s.scan.heapRetainedMb),
    loopMaxMs: m(s => s.scan.loop.maxMs),
    loopP99Ms: m(s => s.scan.loop.p99Ms),
    unchangedUsPerEvent: m(s => s.unchanged.usPerEvent),
    unchangedWrites: m(s => s.unchanged.writes),
    unchangedLoopMaxMs: m(s => s.unchanged.loop.maxMs),
  };
  return {
    summary: { ...summary, ratio: summary.scanUsPerPod / summary.answerUsPerPod },
    rounds: { answers, scans: scans.map(s => ({ scan: s.scan, unchanged: s.unchanged })) },
    reports: scans[scans.length - 1].reports,
  };
}

// ---------------------------------------------------------------------------------------------
// End to end

/** What decides that a report says what it should: all but the time stamps and the API's metadata. */
const contentOf = (r: PolicyReport) =>
  JSON.stringify([
    r.metadata.labels,
    r.metadata.annotations ?? {},
    r.summary,
    r.results.map(x => ({ ...x, timestamp: undefined })),
  ]);

/** Every namespace's expected report content, from an in-process scan of these pods. */
async function expectedContents(pods: KubeObject[], deps: EngineDeps) {
  // Its writes never come: only reportOf() is read.
  const scanner = new ReportScanner(() => deps, new CountingStore(), {
    intervalMs: 0,
    maxResults: deps.settings.reports.maxResults,
    debounceMs: 1e9,
  });
  for (const p of pods) await scanner.observe(p);
  const out = new Map<string, string>();
  for (let n = 0; n < NAMESPACES; n++) {
    const report = scanner.reportOf(nsName(n));
    if (!report) throw new Error(`no expected report for ${nsName(n)}`);
    out.set(nsName(n), contentOf(report));
  }
  return out;
}

/** Namespaces whose stored report is not the expected one yet (content checked once per version). */
function behind(api: StandInApi, expected: Map<string, string>, seen: Map<string, string>) {
  const late: string[] = [];
  for (const [ns, content] of expected) {
    const r = api.get("PolicyReport", "admission-guard", ns) as unknown as
      | (PolicyReport & { metadata: { resourceVersion?: string } })
      | undefined;
    const version = `${r?.metadata.resourceVersion}|${content.length}|${content.slice(0, 64)}`;
    if (!r) late.push(ns);
    else if (seen.get(ns) !== version) {
      if (contentOf(r) === content) seen.set(ns, version);
      else late.push(ns);
    }
  }
  return late;
}

async function until(what: string, check: () => string[], timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const late = check();
    if (!late.length) return performance.now();
    if (Date.now() > deadline)
      throw new Error(
        `${what}: ${late.length} reports still behind (${late.slice(0, 5).join(", ")})`,
      );
    await sleep(100);
  }
}

/** The time each PolicyReport write (server-side apply) reached the stand-in, by namespace. */
function recordWrites(api: StandInApi) {
  const writes: { ns: string; t: number }[] = [];
  const push = api.requests.push.bind(api.requests);
  api.requests.push = (...requests) => {
    for (const r of requests) {
      const m = /\/namespaces\/([^/]+)\/policyreports\//.exec(r.path);
      if (m && r.method === "PATCH") writes.push({ ns: m[1], t: performance.now() });
    }
    return push(...requests);
  };
  return writes;
}

/** Writes since `from` (ms): how many, the most in one namespace, the shortest gap in one (s). */
function writesSince(writes: { ns: string; t: number }[], from: number) {
  const per = new Map<string, number[]>();
  for (const w of writes) if (w.t >= from) per.set(w.ns, [...(per.get(w.ns) ?? []), w.t]);
  let gap = Infinity;
  for (const ts of per.values())
    for (let i = 1; i < ts.length; i++) gap = Math.min(gap, ts[i] - ts[i - 1]);
  return {
    total: [...per.values()].reduce((n, ts) => n + ts.length, 0),
    max: Math.max(0, ...[...per.values()].map(ts => ts.length)),
    minGapS: gap === Infinity ? undefined : gap / 1000,
  };
}

/** Waits until the watcher's CPU stops moving (< 30 ms in 500 ms): what it was busy with is done. */
async function quiet(pid: number, timeoutMs = 180_000) {
  const deadline = Date.now() + timeoutMs;
  let last = cpuSeconds(pid);
  for (;;) {
    await sleep(500);
    const now = cpuSeconds(pid);
    if (now - last < 0.03) return;
    if (Date.now() > deadline) throw new Error("the watcher never went quiet");
    last = now;
  }
}

/** Probes /healthz in a worker thread (its own event loop): the slowest answer per phase. */
function healthProbe(url: string, ca: string) {
  const worker = new Worker(
    `
    const { parentPort, workerData } = require("node:worker_threads");
    const https = require("node:https");
    const agent = new https.Agent({ keepAlive: true, ca: workerData.ca });
    let max = 0, count = 0, failed = 0;
    parentPort.on("message", () => { parentPort.postMessage({ max, count, failed }); max = 0; count = 0; failed = 0; });
    (async function loop() {
      for (;;) {
        const t0 = performance.now();
        await new Promise(done => {
          const req = https.get(workerData.url + "/healthz", { agent, timeout: 30000 }, res => { res.resume(); res.on("end", done); });
          req.on("error", () => { failed++; done(); });
        });
        max = Math.max(max, performance.now() - t0); count++;
        await new Promise(r => setTimeout(r, 100));
      }
    })();`,
    { eval: true, workerData: { url, ca } },
  );
  worker.unref();
  return {
    /** The slowest /healthz since the last read (ms), how many probes, how many failed. */
    read: () =>
      new Promise<{ max: number; count: number; failed: number }>(ok => {
        worker.once("message", ok);
        worker.postMessage("read");
      }),
    stop: () => worker.terminate(),
  };
}

interface Churn {
  replaced: KubeObject[];
  replacements: KubeObject[];
}

/** The churn: violating pods, spread over the namespaces, each replaced by a fixed pod. */
function churnOf(pods: KubeObject[]): Churn {
  const indices = pods
    .map((_, i) => i)
    .filter(i => shapeOf(i) !== "fixed")
    .slice(0, CHURN);
  return {
    replaced: indices.map(i => pods[i]),
    replacements: indices.map(i => makePod(i, "fixed", 1)),
  };
}

/** A configuration of the watcher, and the reports it should write (none: not waited for). */
interface Variant {
  name: string;
  env: Record<string, string>;
  before?: Map<string, string>;
  after?: Map<string, string>;
}

/**
 * One run of the built watcher against a stand-in holding `objects`: until every report says what
 * it should (`before`) or, without, until its CPU is quiet; then the churn, until the reports say
 * so (`after`) or its CPU is quiet.
 */
async function endToEnd(objects: KubeObject[], churn: Churn, variant: Variant) {
  const api = await startStandIn({ objects });
  const writes = recordWrites(api);
  let watcher: Controller | undefined;
  let probe: ReturnType<typeof healthProbe> | undefined;
  try {
    const t0 = performance.now();
    watcher = await startWatcher({
      api,
      env: { LOG_LEVEL: "warn", ...SETTINGS_ENV, ...variant.env },
      startTimeoutMs: 120_000,
    });
    const tHealthy = performance.now();
    const pid = pidOnPort(watcher.port);
    const healthyCpu = cpuSeconds(pid);
    probe = healthProbe(watcher.url, api.certs.caPem);
    let tFirst = 0;
    let tComplete = 0;
    const { before, after } = variant;
    if (before) {
      const seen = new Map<string, string>();
      tComplete = await until(
        "initial scan",
        () => {
          const late = behind(api, before, seen);
          if (!tFirst && late.length < before.size) tFirst = performance.now();
          return late;
        },
        240_000,
      );
    }
    const atComplete = { cpu: cpuSeconds(pid), mem: memoryMb(pid), health: await probe.read() };
    // Settled: the rejudging a cache sync asks for, any write still pending, Pepr's own work.
    await sleep((INTERVAL_SECONDS + 3) * 1000);
    await quiet(pid);
    const settled = { cpu: cpuSeconds(pid), mem: memoryMb(pid), health: await probe.read() };
    const initialWrites = writesSince(writes, 0);

    // Churn at a steady rate: every 50 ms, that many replacements.
    const cpu0 = cpuSeconds(pid);
    const tChurn = performance.now();
    const perTick = CHURN_RATE / 20;
    for (let k = 0; k < churn.replaced.length; k++) {
      const old = churn.replaced[k];
      api.remove("Pod", old.metadata!.name!, old.metadata!.namespace);
      api.put(churn.replacements[k]);
      if ((k + 1) % perTick === 0) {
        const due = tChurn + ((k + 1) / CHURN_RATE) * 1000;
        await sleep(Math.max(0, due - performance.now()));
      }
    }
    const tLast = performance.now();
    let tReflected = 0;
    if (after) {
      const seen = new Map<string, string>();
      tReflected = await until("churn", () => behind(api, after, seen), 120_000);
    }
    const churnWrites = writesSince(writes, tChurn);
    const reflectedHealth = await probe.read();
    await quiet(pid);
    const churnCpu = cpuSeconds(pid) - cpu0;
    const churned = { mem: memoryMb(pid), health: await probe.read() };
    return {
      healthyS: (tHealthy - t0) / 1000,
      healthyCpuS: healthyCpu,
      firstReportS: before ? (tFirst - t0) / 1000 : undefined,
      completeS: before ? (tComplete - t0) / 1000 : undefined,
      completeCpuS: atComplete.cpu,
      completeRssMb: atComplete.mem.rss,
      initialWrites: initialWrites.total,
      initialMaxWritesPerNs: initialWrites.max,
      initialHealthMaxMs: atComplete.health.max,
      initialHealthFailed: atComplete.health.failed,
      settledCpuS: settled.cpu,
      settledRssMb: settled.mem.rss,
      settledHwmMb: settled.mem.hwm,
      settledHealthMaxMs: settled.health.max,
      churn: churn.replaced.length,
      churnSeconds: (tLast - tChurn) / 1000,
      churnRate: churn.replaced.length / ((tLast - tChurn) / 1000),
      lagS: after ? (tReflected - tLast) / 1000 : undefined,
      churnCpuS: churnCpu,
      churnCpuUsPerPod: (churnCpu * 1e6) / churn.replaced.length,
      churnWrites: churnWrites.total,
      churnMaxWritesPerNs: churnWrites.max,
      churnMinGapS: churnWrites.minGapS,
      churnWindowS: after ? (tReflected - tChurn) / 1000 : undefined,
      churnRssMb: churned.mem.rss,
      churnHwmMb: churned.mem.hwm,
      churnHealthMaxMs: Math.max(reflectedHealth.max, churned.health.max),
      churnHealthFailed: reflectedHealth.failed + churned.health.failed,
      fixEvents: api.list("Event").length,
      writeTimes: writes.map(w => ({ ns: w.ns, s: Number(((w.t - t0) / 1000).toFixed(3)) })),
    };
  } catch (e) {
    if (watcher) process.stderr.write(watcher.logs().slice(-3000) + "\n");
    throw e;
  } finally {
    await probe?.stop();
    await watcher?.stop();
    await api.stop();
  }
}

// ---------------------------------------------------------------------------------------------

const f0 = (n: number) => Math.round(n).toLocaleString("en-US");
const f1 = (n: number) => n.toFixed(1);

async function main() {
  // Quiet the capabilities' set-up lines (Pepr logs at info unless told otherwise).
  Log.level = process.env.LOG_LEVEL ?? "warn";
  const { policies } = await import("../capabilities");
  const deps: EngineDeps = {
    settings: settingsFromEnv(SETTINGS_ENV),
    cluster: new SnapshotCluster(clusterObjects()),
    policies,
  };
  const pods = Array.from({ length: PODS }, (_, i) => makePod(i));
  const podBytes = pods.reduce((n, p) => n + Buffer.byteLength(JSON.stringify(p)), 0);
  process.stderr.write(
    `${f0(PODS)} pods (${f1(podBytes / PODS / 1024)} KiB each as JSON), ${NAMESPACES} namespaces, ${NODES} nodes; ${ROUNDS} rounds\n`,
  );
  const local = await inProcess(pods, deps);

  const churn = churnOf(pods);
  const gone = new Set(churn.replaced);
  const expected = {
    before: await expectedContents(pods, deps),
    after: await expectedContents([...pods.filter(p => !gone.has(p)), ...churn.replacements], deps),
  };
  const objects = [...clusterObjects(), ...pods];
  // Each adds one thing to the one before: the differences in churn CPU are what each costs.
  const noEvents = { ADMISSION_GUARD_EVENTS_ENABLED: "false" };
  const variants: Variant[] = [
    { name: "reports off", env: { ADMISSION_GUARD_REPORTS_ENABLED: "false", ...noEvents } },
    {
      // The churn judged, no report written during it (the interval is not over).
      name: "no writes",
      env: { ADMISSION_GUARD_REPORTS_INTERVAL_SECONDS: "3600", ...noEvents },
      ...expected,
      after: undefined,
    },
    { name: `every ${INTERVAL_SECONDS} s`, env: noEvents, ...expected },
    { name: `+ Events`, env: {}, ...expected },
  ];
  const runs: Awaited<ReturnType<typeof endToEnd>>[] = [];
  for (const v of variants) {
    process.stderr.write(`end to end: the built watcher, ${v.name}...\n`);
    runs.push(await endToEnd(objects, churn, v));
  }
  const [control, judged, written, e2e] = runs;
  const cost = {
    judgeUsPerPod: ((judged.churnCpuS - control.churnCpuS) * 1e6) / churn.replaced.length,
    writeMs: ((written.churnCpuS - judged.churnCpuS) * 1000) / Math.max(1, written.churnWrites),
    eventMs: ((e2e.churnCpuS - written.churnCpuS) * 1000) / Math.max(1, e2e.fixEvents),
  };

  const s = local.summary;
  console.log(`in process, ${f0(PODS)} pods, medians of ${ROUNDS} rounds`);
  table([
    ["answer() per pod (the webhook's judging)", `${f0(s.answerUsPerPod)} µs`],
    ["scan per pod (observe)", `${f0(s.scanUsPerPod)} µs (×${s.ratio.toFixed(2)} answer)`],
    ["all pods judged", `${f0(s.judgeMs)} ms`],
    [
      "all reports written (flushPending + idle)",
      `${f0(s.writtenMs)} ms (writing: ${f0(s.writeMs)})`,
    ],
    ["report writes", `${s.writes} (${NAMESPACES} namespaces)`],
    [
      "report bytes, all / largest",
      `${f0(s.reportBytes / 1024)} KiB / ${f0(s.largestReport / 1024)} KiB`,
    ],
    [
      "RSS growth in the burst / heap kept after GC",
      `${f0(s.rssDeltaMb)} / ${f0(s.heapRetainedMb)} MB`,
    ],
    ["event-loop delay in the burst, max / p99", `${f0(s.loopMaxMs)} / ${f0(s.loopP99Ms)} ms`],
    ["  the same for the answer() burst, max", `${f0(s.answerLoopMaxMs)} ms`],
    [
      "status-only update (unchanged)",
      `${f1(s.unchangedUsPerEvent)} µs/event, ${s.unchangedWrites} writes`,
    ],
    ["  event-loop delay, max", `${f0(s.unchangedLoopMaxMs)} ms`],
  ]);
  const both = (f: (r: typeof e2e) => string) => runs.map(f);
  const opt = (n: number | undefined, f = f1) => (n === undefined ? "-" : f(n));
  console.log(`\nend to end: Pepr's watcher (the built bundle), ${f0(PODS)} pods`);
  table([
    ["", ...variants.map(v => v.name)],
    ["start → /healthz 200", ...both(r => `${f1(r.healthyS)} s`)],
    [
      "start → first report / every report right",
      ...both(r => `${opt(r.firstReportS)} / ${opt(r.completeS)} s`),
    ],
    [
      "CPU at /healthz, at every report right",
      ...both(r => `${f1(r.healthyCpuS)}, ${f1(r.completeCpuS)} s`),
    ],
    [
      `settled (+${INTERVAL_SECONDS + 3} s, quiet): CPU, RSS, peak`,
      ...both(r => `${f1(r.settledCpuS)} s, ${f0(r.settledRssMb)}, ${f0(r.settledHwmMb)} MB`),
    ],
    [
      "report writes (most in one ns)",
      ...both(r => `${r.initialWrites} (${r.initialMaxWritesPerNs})`),
    ],
    [
      "slowest /healthz, start → settled",
      ...both(r => `${f0(Math.max(r.initialHealthMaxMs, r.settledHealthMaxMs))} ms`),
    ],
    [
      `churn: ${f0(churn.replaced.length)} pods replaced`,
      ...both(r => `${f1(r.churnSeconds)} s, ${f0(r.churnRate)}/s`),
    ],
    ["lag, last change → every report right", ...both(r => `${opt(r.lagS)} s`)],
    [
      "churn CPU, total / per pod replaced",
      ...both(r => `${f1(r.churnCpuS)} s / ${f0(r.churnCpuUsPerPod)} µs`),
    ],
    [
      "writes in churn (most in a ns; min gap)",
      ...both(r => `${r.churnWrites} (${r.churnMaxWritesPerNs}; ${opt(r.churnMinGapS)} s)`),
    ],
    ["RSS, peak after churn", ...both(r => `${f0(r.churnRssMb)}, ${f0(r.churnHwmMb)} MB`)],
    ["slowest /healthz in churn", ...both(r => `${f0(r.churnHealthMaxMs)} ms`)],
    ["fix Events written", ...both(r => String(r.fixEvents))],
  ]);
  console.log(
    `  churn CPU, differences: judging ${f0(cost.judgeUsPerPod)} µs per pod replaced, ` +
      `${f0(cost.writeMs)} ms per report write, ${f0(cost.eventMs)} ms per Event`,
  );
  if (Math.min(...runs.map(r => r.churnMinGapS ?? Infinity)) < INTERVAL_SECONDS - 0.5)
    console.log(`!! a namespace was written twice within its ${INTERVAL_SECONDS} s interval`);

  mkdirSync(RUNS, { recursive: true });
  const file = join(RUNS, `reports-${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
  writeFileSync(
    file,
    JSON.stringify(
      {
        quick: QUICK,
        pods: PODS,
        namespaces: NAMESPACES,
        nodes: NODES,
        podBytes,
        rounds: ROUNDS,
        intervalSeconds: INTERVAL_SECONDS,
        churnRate: CHURN_RATE,
        machine: { cpus: cpus().length, node: process.version },
        inProcess: { summary: local.summary, rounds: local.rounds },
        endToEnd: Object.fromEntries(variants.map((v, i) => [v.name, runs[i]])),
        cost,
      },
      null,
      2,
    ),
  );
  console.log(`raw numbers: ${file}`);
}

/** Rows of cells, the first column padded; a row of one cell is a heading. */
function table(rows: string[][]) {
  const widths = rows[0].map((_, c) => Math.max(...rows.map(r => (r[c] ?? "").length)));
  for (const r of rows)
    console.log(
      "  " + r.map((cell, c) => (c ? cell.padStart(widths[c]) : cell.padEnd(widths[c]))).join("  "),
    );
}

main().catch(e => {
  console.error(e);
  process.exit(1);
});
