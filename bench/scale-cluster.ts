// Memory flat in cluster size, proven on a real control plane (issue 28): `npm run
// bench:scale-cluster` (a documented run, not a test). bench/scale.ts measures the same design
// against the stand-in API; this script shows it behind a real kube-apiserver, etcd and controller
// manager (the harness of test/cluster: test/cluster/support/*, docs/cluster.md).
//
//  1. a control plane from $KUBEBUILDER_ASSETS (or /usr/local/kubebuilder/bin), in a TMPDIR of its
//     own (--tmpdir) so that it never meets the cluster tier's state dir;
//  2. --namespaces namespaces (every fifth in audit mode, every fifth in warn, as
//     bench/cluster-objects.ts lays them out), each with a ResourceQuota and the `workload`
//     ServiceAccount; --nodes GPU Node objects (as a kubelet would leave them);
//  3. --pods realistic pods (bench/cluster-objects.ts: two containers with env, probes, resources,
//     volume mounts; 70% as the module leaves them, 10% each privileged, from a registry not
//     allowed, with no securityContext), created by the admin before the module is installed, at
//     most --concurrency in flight: the create rate is the API server's (PSA, quota, SA admission),
//     not the module's. They stay Pending: no kubelet, no scheduler, no node name;
//  4. the module installed as the cluster tier installs it (its generated RBAC, the admission
//     controller as the built bundle with a token of its ServiceAccount, its webhooks armed), the
//     PolicyReport CRD applied (deploy/policyreport-crd.yaml);
//  5. the watcher started as the watcher Deployment runs it (the same bundle and ServiceAccount,
//     PEPR_WATCH_MODE=true); its VmRSS and VmHWM read from /proc every 500 ms from its spawn;
//  6. time until every report is right, seen through a watch on PolicyReports: in every namespace
//     the report names no pod but those in it, its summary counts its results (the omitted ones
//     too), and it names every pod in the namespace (their uids) — or, when maxResults cut some
//     pods' results out altogether, its summary counts a whole pod's results for each of them;
//  7. RSS settled: the watcher's CPU quiet, then the median of 10 s of samples (once the reports
//     are right, after the change, and --idle s later: V8 gives memory back lazily);
//  8. a change a report shows: --changes pods of the audit namespaces replaced (deleted, and
//     created again under a new name, privileged: admitted by the module in audit mode, judged
//     `fail` by its report) at --change-rate per second; for each, the time from its create
//     until its namespace's report names the new pod with a `fail` and no longer the old one;
//  9. a markdown table on stdout, raw JSON in bench/runs/scale-cluster-<label>-<time>.json.
//
//   npm run bench:scale-cluster                         20,000 pods in 200 namespaces
//   npm run bench:scale-cluster -- --pods 2000          the harness itself (a few minutes)
//   ... --namespaces <n> --nodes <n> --concurrency <n> --changes <n> --change-rate <per s>
//   ... --interval <s>       the reports' write interval (default: the module's, 30 s)
//   ... --max-results <n>    results per report (default: the module's, 1,000; see below)
//   ... --rule <MiB>+<MiB>   the sizing rule to compare with: settled ≈ base + per 1,000 pods
//                            (default docs/bench.md's: 300+2)
//   ... --rule-peak <x>      its peak factor (default 1.4)
//   ... --label <name>  --tmpdir <dir>  --right-timeout <s>  --idle <s>  --deadline <min>
//
// Reports: each pod here has 39 results (a pass or a finding per rule), ~400 bytes each. The
// module's default maxResults (1,000) cuts a report of 100 pods to ~470 KB; every pod is still
// named (each has findings or skips, which come before the passes; seen at 20,000 pods). --max-results 20000 keeps
// every result: ~1.5 MB a report, at etcd's default request limit (1.5 MiB), and slow to write.
//
// Bounded everywhere: each phase has a timeout, a watchdog stops the run after --deadline minutes,
// and the control plane and every child are stopped on exit, on an error and on Ctrl-C.
import { spawn } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { request, Agent } from "node:https";
import { cpus, loadavg, totalmem } from "node:os";
import { basename, join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import type { KubeObject } from "../lib/objects/pod";
import type { ControlPlane } from "../test/cluster/support/control-plane";
import type { KubeClient } from "../test/cluster/support/kube-client";
import type { InstalledModule } from "../test/cluster/support/module";
import { clusterOf, namespaceObject, nodeObject, type Shape } from "./cluster-objects";
import { cpuSeconds, memoryMb } from "./proc";
import { thinned } from "./series";

const REPO_ROOT = resolve(__dirname, "..");

// ---------------------------------------------------------------------------------------------
// Arguments

function parseArgs(argv: string[]) {
  const opts = {
    pods: 20_000,
    namespaces: 200,
    nodes: 50,
    concurrency: 32,
    changes: 200,
    changeRate: 50,
    intervalS: undefined as number | undefined,
    maxResults: undefined as number | undefined,
    // The watcher's sizing rule (docs/bench.md, issue 28): settled ≈ 300 MiB + 2 MiB per 1,000 pods.
    rule: { base: 300, per1000: 2 },
    rulePeak: 1.4,
    label: "",
    tmpdir: "/tmp/ag-scale-cluster",
    rightTimeoutS: 600,
    idleS: 120,
    deadlineMin: 0,
  };
  const value = (i: number) => {
    if (i + 1 >= argv.length) throw new Error(`${argv[i]} needs a value`);
    return argv[i + 1];
  };
  const count = (i: number, min = 0) => {
    const n = Number(value(i));
    if (!Number.isFinite(n) || n < min) throw new Error(`${argv[i]}: a number ≥ ${min}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--pods") opts.pods = count(i++, 1);
    else if (a === "--namespaces") opts.namespaces = count(i++, 1);
    else if (a === "--nodes") opts.nodes = count(i++);
    else if (a === "--concurrency") opts.concurrency = count(i++, 1);
    else if (a === "--changes") opts.changes = count(i++);
    else if (a === "--change-rate") opts.changeRate = count(i++, 0.1);
    else if (a === "--interval") opts.intervalS = count(i++, 1);
    else if (a === "--max-results") opts.maxResults = count(i++, 10);
    else if (a === "--rule") {
      const m = /^(\d+(?:\.\d+)?)\+(\d+(?:\.\d+)?)$/.exec(value(i++));
      if (!m) throw new Error("--rule <base MiB>+<MiB per 1,000 pods>, e.g. 150+2.5");
      opts.rule = { base: Number(m[1]), per1000: Number(m[2]) };
    } else if (a === "--rule-peak") opts.rulePeak = count(i++, 1);
    else if (a === "--label") opts.label = value(i++);
    else if (a === "--tmpdir") opts.tmpdir = resolve(value(i++));
    else if (a === "--right-timeout") opts.rightTimeoutS = count(i++, 10);
    else if (a === "--idle") opts.idleS = count(i++);
    else if (a === "--deadline") opts.deadlineMin = count(i++, 1);
    else throw new Error(`unknown argument ${a}`);
  }
  opts.pods = Math.floor(opts.pods);
  opts.namespaces = Math.min(Math.floor(opts.namespaces), opts.pods);
  // Creation at ≥ 20 pods/s, the watcher's phases and the fixed costs; a hung phase ends the run.
  opts.deadlineMin ||= Math.ceil(
    15 + opts.pods / 20 / 60 + (opts.rightTimeoutS * 2 + opts.idleS) / 60,
  );
  return opts;
}
const OPTS = parseArgs(process.argv.slice(2));

/** The module's settings in the controller and the watcher. */
const SETTINGS_ENV: Record<string, string> = {
  LOG_LEVEL: "warn",
  // As bench/scale.ts: the "registry" pods fail registries, the others pass.
  ADMISSION_GUARD_REGISTRIES_ALLOWED: "ghcr.io/org,registry.internal",
  ...(OPTS.maxResults ? { ADMISSION_GUARD_REPORTS_MAX_RESULTS: String(OPTS.maxResults) } : {}),
  ...(OPTS.intervalS ? { ADMISSION_GUARD_REPORTS_INTERVAL_SECONDS: String(OPTS.intervalS) } : {}),
};
/** The module's default reports.intervalSeconds (lib/settings/schema.ts). */
const INTERVAL_S = OPTS.intervalS ?? 30;
/** The sizing rule before issue 28, when the watcher kept every object whole. */
const BEFORE_RULE = { base: 285, per1000: 33, peak: 1.5 };
const SAMPLE_MS = 500;
const SETTLE_S = 10;

// ---------------------------------------------------------------------------------------------
// Helpers

const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));
const now = () => performance.now();
const log = (s: string) =>
  process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${s}\n`);
const load = () => loadavg().map(x => Number(x.toFixed(2)));
const round = (x: number | undefined, digits = 1) =>
  x === undefined ? undefined : Number(x.toFixed(digits));

function quantile(xs: number[], q: number): number | undefined {
  if (!xs.length) return undefined;
  const s = [...xs].sort((a, b) => a - b);
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  return s[lo] + (s[Math.min(lo + 1, s.length - 1)] - s[lo]) * (pos - lo);
}

/** Runs `work` for 0..n-1 with at most `limit` in flight. */
async function pool(n: number, limit: number, work: (i: number) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, n) }, async () => {
      while (next < n) await work(next++);
    }),
  );
}

/** Polls until `probe` returns a value; throws after timeoutMs. */
async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (e) {
      last = (e as Error).message;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last && `: ${last}`}`);
    await sleep(250);
  }
}

// Cleanup: whatever was started is stopped once, in reverse order, however the run ends.
const cleanups: { what: string; run: () => Promise<unknown> }[] = [];
let shuttingDown: Promise<never> | undefined;
function shutdown(code: number, why?: string): Promise<never> {
  shuttingDown ??= (async () => {
    if (why) log(why);
    for (const c of cleanups.reverse()) {
      const timeout = sleep(30_000).then(() => log(`cleanup: ${c.what} took over 30 s, left`));
      await Promise.race([c.run().catch(e => log(`cleanup: ${c.what}: ${String(e)}`)), timeout]);
    }
    process.exit(code);
  })();
  return shuttingDown;
}
process.on("SIGINT", () => void shutdown(130, "interrupted: stopping everything"));
process.on("SIGTERM", () => void shutdown(143, "terminated: stopping everything"));
process.on("unhandledRejection", e => void shutdown(1, `unhandled rejection: ${String(e)}`));

// ---------------------------------------------------------------------------------------------
// The watcher's process, seen from /proc

/** A child of this process running the bundle in watch mode (the harness gives no pid). */
function watcherPid(): number | undefined {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid !== process.pid) continue;
      const env = readFileSync(`/proc/${entry}/environ`, "utf8").split("\0");
      if (env.includes("PEPR_WATCH_MODE=true")) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

interface Sample {
  t: number;
  rss: number;
  hwm: number;
}

/** VmRSS and VmHWM every SAMPLE_MS from the watcher's spawn (t: seconds since `t0`). */
function rssSampler(t0: number) {
  let pid: number | undefined;
  const samples: Sample[] = [];
  const find = setInterval(() => {
    pid ??= watcherPid();
    if (pid) clearInterval(find);
  }, 20);
  const timer = setInterval(() => {
    if (!pid) return;
    try {
      const m = memoryMb(pid);
      samples.push({ t: (now() - t0) / 1000, rss: m.rss, hwm: m.hwm });
    } catch {
      // exited
    }
  }, SAMPLE_MS);
  return {
    pid: () => pid,
    samples,
    last: () => samples[samples.length - 1],
    since: (t: number) => samples.filter(s => s.t >= t),
    elapsed: () => (now() - t0) / 1000,
    stop: () => {
      clearInterval(find);
      clearInterval(timer);
    },
  };
}
type Sampler = ReturnType<typeof rssSampler>;

/** Until the process's CPU stops moving (< 30 ms in 500 ms); false when it never did. */
async function quiet(pid: number, timeoutS = 90): Promise<boolean> {
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

/** CPU quiet, then the median of SETTLE_S of samples. */
async function settled(pid: number, sampler: Sampler) {
  const wasQuiet = await quiet(pid);
  const from = sampler.elapsed();
  await sleep(SETTLE_S * 1000);
  const xs = sampler.since(from).map(s => s.rss);
  return { quiet: wasQuiet, rssMb: round(quantile(xs, 0.5)), samples: xs.length };
}

// ---------------------------------------------------------------------------------------------
// The objects

const layout = clusterOf({ namespaces: OPTS.namespaces, nodes: Math.max(1, OPTS.nodes) });
const perNamespace = Math.ceil(OPTS.pods / OPTS.namespaces);
const AUDIT = (n: number) => n % 5 === 1; // namespaceObject's layout

/** What the API server accepts on create: no uid, times, managed fields, owner or status. */
function creatable(obj: KubeObject): KubeObject {
  const rest = { ...obj } as KubeObject & { status?: unknown };
  delete rest.status;
  const meta = { ...obj.metadata } as Record<string, unknown>;
  for (const k of [
    "uid",
    "creationTimestamp",
    "managedFields",
    "resourceVersion",
    "generateName",
    // A ReplicaSet that does not exist: the garbage collector would delete the pod.
    "ownerReferences",
  ])
    delete meta[k];
  return { ...rest, metadata: meta as KubeObject["metadata"] };
}

const podName = (i: number, generation = 0) =>
  `model-${Math.floor(i / OPTS.namespaces) % 20}-5d8f7c9b4-${i.toString(36).padStart(4, "0")}` +
  (generation ? `-r${generation}` : "");

/** Pod i (namespace i % namespaces), Pending: as stored before a scheduler binds it. */
function podOf(i: number, shape?: Shape, generation = 0): KubeObject {
  const pod = creatable(layout.makePod(i, shape, generation));
  pod.metadata!.name = podName(i, generation);
  delete (pod.spec as { nodeName?: string }).nodeName;
  return pod;
}

/** A quota every namespace's pods fit in twice over (the replacements are charged before the old pods are released). */
function quotaOf(namespace: string): KubeObject {
  return {
    apiVersion: "v1",
    kind: "ResourceQuota",
    metadata: { name: "compute", namespace },
    spec: {
      hard: {
        pods: String(perNamespace * 2 + 20),
        "requests.cpu": String(Math.ceil(perNamespace * 2.1 * 2) + 20),
        "requests.memory": `${Math.ceil(perNamespace * 4.2 * 2) + 40}Gi`,
      },
    },
  };
}

// ---------------------------------------------------------------------------------------------
// PolicyReports, watched

interface ReportView {
  /** uids (names when a result has none) of the pods its results name. */
  named: Set<string>;
  /** Those of them with a `fail` result. */
  failing: Set<string>;
  results: number;
  summaryTotal: number;
  omitted: number;
  /** Results per pod named: min and max. */
  perPod: [number, number];
  bytes: number;
  at: number;
}

interface RawReport {
  metadata: { namespace: string; resourceVersion: string; annotations?: Record<string, string> };
  summary?: Record<string, number>;
  results?: {
    result: string;
    resources?: { kind: string; name: string; uid?: string }[];
  }[];
}

function viewOf(r: RawReport, bytes: number): ReportView {
  const named = new Set<string>();
  const failing = new Set<string>();
  const perPod = new Map<string, number>();
  for (const x of r.results ?? [])
    for (const ref of x.resources ?? []) {
      if (ref.kind !== "Pod") continue;
      const id = ref.uid ?? ref.name;
      named.add(id);
      perPod.set(id, (perPod.get(id) ?? 0) + 1);
      if (x.result === "fail") failing.add(id);
    }
  const counts = [...perPod.values()];
  return {
    named,
    failing,
    results: r.results?.length ?? 0,
    summaryTotal: Object.values(r.summary ?? {}).reduce((a, b) => a + b, 0),
    omitted: Number(r.metadata.annotations?.["admission-guard.dev/results-omitted"] ?? 0),
    perPod: counts.length ? [Math.min(...counts), Math.max(...counts)] : [0, 0],
    bytes,
    at: now(),
  };
}

/**
 * Every PolicyReport as the API server has it, through one list and a watch (re-listed when the
 * watch ends or its resourceVersion is gone); each report kept as a view, never whole.
 */
function reportWatch(admin: KubeClient, agent: Agent, onChange: (ns: string) => void) {
  const PATH = "/apis/wgpolicyk8s.io/v1alpha2/policyreports";
  const views = new Map<string, ReportView>();
  let stopped = false;
  let current: ReturnType<typeof request> | undefined;
  let writes = 0;
  let maxBytes = 0;
  const take = (r: RawReport, bytes: number) => {
    if (r.metadata.namespace === undefined) return;
    views.set(r.metadata.namespace, viewOf(r, bytes));
    maxBytes = Math.max(maxBytes, bytes);
    onChange(r.metadata.namespace);
  };
  const watchOnce = (rv: string) =>
    new Promise<void>(done => {
      const req = request(
        `${admin.server}${PATH}?watch=1&allowWatchBookmarks=true&resourceVersion=${rv}`,
        { agent, headers: { Accept: "application/json" } },
        res => {
          if (res.statusCode !== 200) {
            res.resume();
            res.on("end", () => done());
            return;
          }
          let buffer = "";
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => {
            buffer += chunk;
            for (let nl = buffer.indexOf("\n"); nl >= 0; nl = buffer.indexOf("\n")) {
              const line = buffer.slice(0, nl);
              buffer = buffer.slice(nl + 1);
              if (!line.trim()) continue;
              const event = JSON.parse(line) as { type: string; object: RawReport };
              if (event.type === "ERROR") {
                req.destroy();
                return;
              }
              if (event.type === "DELETED") {
                views.delete(event.object.metadata.namespace);
                onChange(event.object.metadata.namespace);
              } else if (event.type !== "BOOKMARK") {
                writes++;
                take(event.object, Buffer.byteLength(line));
              }
            }
          });
          res.on("end", () => done());
          res.on("error", () => done());
        },
      );
      current = req;
      req.on("error", () => done());
      req.end();
    });
  const loop = async () => {
    while (!stopped) {
      try {
        const list = await admin.get(PATH);
        if (list.status !== 200) throw new Error(`HTTP ${list.status}: ${list.text.slice(0, 200)}`);
        const items = (list.body.items ?? []) as RawReport[];
        const listed = new Set<string>();
        for (const r of items) {
          listed.add(r.metadata.namespace);
          take(r, Buffer.byteLength(JSON.stringify(r)));
        }
        for (const ns of [...views.keys()]) if (!listed.has(ns)) views.delete(ns);
        await watchOnce(String(list.body.metadata?.resourceVersion ?? ""));
      } catch (e) {
        if (!stopped) log(`report watch: ${(e as Error).message}; again in 1 s`);
      }
      if (!stopped) await sleep(1000);
    }
  };
  void loop();
  return {
    views,
    writes: () => writes,
    maxBytes: () => maxBytes,
    stop() {
      stopped = true;
      current?.destroy();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The run

/** A run of this script, alive (its pid still running this script). */
function aliveRun(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("scale-cluster");
  } catch {
    return false;
  }
}

/**
 * One run per TMPDIR (the harness's state lives there); what a killed run left there and in
 * bench/runs is removed (its control plane is the harness's to reap, at startControlPlane).
 */
function claimTmpdir() {
  const pidFile = join(OPTS.tmpdir, "scale-cluster.pid");
  let other = 0;
  try {
    other = Number(readFileSync(pidFile, "utf8"));
  } catch {
    // no run before, or it ended
  }
  if (other && other !== process.pid && aliveRun(other))
    throw new Error(`run ${other} uses ${OPTS.tmpdir}: give this one another --tmpdir`);
  for (const entry of readdirSync(OPTS.tmpdir))
    if (/^admission-guard-(module|certs)-/.test(entry))
      rmSync(join(OPTS.tmpdir, entry), { recursive: true, force: true });
  const runs = join(REPO_ROOT, "bench/runs");
  for (const entry of existsSync(runs) ? readdirSync(runs) : []) {
    const m = /^scale-cluster-dist-(\d+)$/.exec(entry);
    if (m && !aliveRun(Number(m[1]))) rmSync(join(runs, entry), { recursive: true, force: true });
  }
  writeFileSync(pidFile, String(process.pid));
  cleanups.push({ what: "the pid file", run: async () => rmSync(pidFile, { force: true }) });
}

interface Settled {
  quiet: boolean;
  rssMb?: number;
  samples: number;
}
interface Standing {
  right: number;
  /** Of them, judged by their counts (cut at maxResults), not by every pod named. */
  byCounts: number;
  missing: number;
  named: number;
  wrong: string[];
}
interface ChangeResult {
  asked: number;
  namespaces: number;
  ratePerS: number;
  skipped?: string;
  madeInS?: number;
  made?: number;
  errors?: string[];
  shown?: number;
  p50S?: number;
  p90S?: number;
  maxS?: number;
  rightAfter?: { right: number; wrong: string[] };
}
/** Memory in MiB (/proc's kB / 1024, as bench/proc.ts reads it), times in s. */
interface WatcherResult {
  healthyS?: number;
  timeToRightS?: number;
  /** How the reports were found right (see rightIn). */
  rightBy?: string;
  /** When the namespaces' first reports arrived, s after the watcher's spawn. */
  firstReportS?: { first?: number; p50?: number; last?: number };
  notRight?: Standing;
  cpuAtRightS?: number;
  hwmAtRightMb?: number;
  reportWritesAtRight?: number;
  reports?: { count: number; maxBytes: number; resultsPerPod?: number[]; results: number };
  settled?: Settled;
  hwmSettledMb?: number;
  change?: ChangeResult;
  settledAfterChange?: Settled;
  /** The median of 10 s of samples, --idle s after the change settled. */
  idle?: { afterS: number; rssMb?: number; samples: number };
  hwmMb?: number;
  maxSampleMb?: number;
  cpuTotalS?: number;
  logLines?: number;
  forbidden?: number;
  logTail?: string;
  rssSeries?: (number | undefined)[][];
}
interface RunResult {
  startedAt: string;
  options: typeof OPTS;
  settingsEnv: Record<string, string>;
  machine: { cpus: number; memMb: number; node: string };
  /** loadavg (1, 5, 15 min) at each step. */
  load: Record<string, number[]>;
  phasesS: Record<string, number>;
  create?: {
    pods: number;
    seconds?: number;
    perSecond?: number;
    retries: number;
    concurrency: number;
  };
  watcher: WatcherResult;
  podsListed?: { listed: number; tracked: number };
  controllerForbidden?: number;
  controlPlaneCpuS: Record<
    string,
    { etcd?: number; apiServer?: number; controllerManager?: number }
  >;
  totalS?: number;
}

async function main() {
  const started = now();
  const startedAt = new Date().toISOString();
  // The harness keeps its state under $TMPDIR/admission-guard-control-plane (and reaps what a dead
  // run left there): this run's own TMPDIR, set before the harness is loaded.
  mkdirSync(OPTS.tmpdir, { recursive: true });
  claimTmpdir();
  process.env.TMPDIR = OPTS.tmpdir;
  const { startControlPlane } = await import("../test/cluster/support/control-plane");
  const { KubeClient, statusMessage } = await import("../test/cluster/support/kube-client");
  const { installModule, readModuleManifest } = await import("../test/cluster/support/module");
  const { addNode } = await import("../test/cluster/support/cluster");
  const { startWatcher, freePort } = await import("../test/support/controller");
  const { createTestCerts } = await import("../test/support/certs");
  const { bundlePath } = await import("../test/support/controller");
  const { moduleYamlPath } = await import("../test/support/module-rbac");

  // The build as it was at the start: another build of the tree during the run changes nothing.
  // Inside the repository, so that the bundle finds its node_modules.
  const dist = join(REPO_ROOT, "bench/runs", `scale-cluster-dist-${process.pid}`);
  mkdirSync(dist, { recursive: true });
  cleanups.push({
    what: "the copy of the build",
    run: async () => rmSync(dist, { recursive: true, force: true }),
  });
  for (const file of [bundlePath(), moduleYamlPath()])
    copyFileSync(file, join(dist, basename(file)));
  const bundle = join(dist, basename(bundlePath()));
  const { kubeconfigYaml } = await import("../test/support/kubeconfig");

  const phase: Record<string, number> = {};
  const mark = (name: string, since: number) => (phase[name] = round((now() - since) / 1000)!);
  const out: RunResult = {
    startedAt,
    options: OPTS,
    settingsEnv: SETTINGS_ENV,
    machine: {
      cpus: cpus().length,
      memMb: Math.round(totalmem() / 2 ** 20),
      node: process.version,
    },
    load: { start: load() },
    phasesS: phase,
    watcher: {},
    controlPlaneCpuS: {},
  };
  const watcherOut = out.watcher;

  // 1. The control plane.
  let t = now();
  const plane: ControlPlane = await startControlPlane();
  cleanups.push({ what: "the control plane", run: () => plane.stop() });
  mark("controlPlane", t);
  log(`control plane up in ${phase.controlPlane} s: ${plane.server}`);
  const admin = new KubeClient(plane.server, plane.caPem, plane.adminCredentials);
  cleanups.push({ what: "the admin client", run: async () => admin.close() });
  const must = async (what: string, call: ReturnType<KubeClient["raw"]>) => {
    const res = await call;
    if (res.status >= 300) throw new Error(`${what}: HTTP ${res.status} ${statusMessage(res)}`);
    return res;
  };
  const kubectl = (args: string[]) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((ok, fail) => {
      const child = spawn(plane.kubectl, args, {
        env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", c => (stdout += c));
      child.stderr.on("data", c => (stderr += c));
      child.on("error", fail);
      child.on("exit", code => ok({ code, stdout, stderr }));
    });

  // 2. Namespaces, their quota and ServiceAccount; nodes.
  t = now();
  await pool(OPTS.namespaces, 16, async n => {
    const ns = layout.nsName(n);
    await must(
      `namespace ${ns}`,
      admin.create("/api/v1/namespaces", creatable(namespaceObject(ns, n))),
    );
    await must(
      `quota in ${ns}`,
      admin.create(`/api/v1/namespaces/${ns}/resourcequotas`, quotaOf(ns)),
    );
    await must(
      `ServiceAccount ${ns}/workload`,
      admin.create(`/api/v1/namespaces/${ns}/serviceaccounts`, {
        apiVersion: "v1",
        kind: "ServiceAccount",
        metadata: { name: "workload", namespace: ns },
      }),
    );
  });
  const cluster = { admin } as Parameters<typeof addNode>[0];
  await pool(OPTS.nodes, 8, async n => {
    const node = nodeObject(layout.nodeName(n), n);
    await addNode(cluster, { ...creatable(node), status: node.status } as KubeObject);
  });
  // Pods are refused until the controller manager has made `default` and counted each quota.
  await until(
    "every quota counted and every default ServiceAccount made",
    async () => {
      const quotas = await admin.get("/api/v1/resourcequotas");
      const counted = ((quotas.body.items ?? []) as KubeObject[]).filter(
        q => (q.status as { hard?: object } | undefined)?.hard,
      ).length;
      const sas = await admin.get("/api/v1/serviceaccounts?fieldSelector=metadata.name%3Ddefault");
      const defaults = ((sas.body.items ?? []) as KubeObject[]).length;
      if (counted < OPTS.namespaces || defaults < OPTS.namespaces + 4)
        throw new Error(`${counted} quotas counted, ${defaults} default ServiceAccounts`);
      return true;
    },
    180_000,
  );
  mark("namespaces", t);
  log(`${OPTS.namespaces} namespaces, their quotas, ${OPTS.nodes} nodes in ${phase.namespaces} s`);

  // 3. The pods.
  /** Per namespace: its pods' uids, and name → uid (what the reports must name). */
  const expected = new Map<string, Map<string, string>>();
  for (let n = 0; n < OPTS.namespaces; n++) expected.set(layout.nsName(n), new Map());
  const createPod = async (pod: KubeObject) => {
    const ns = pod.metadata!.namespace!;
    for (let attempt = 1; ; attempt++) {
      const res = await admin
        .create(`/api/v1/namespaces/${ns}/pods`, pod)
        .catch(e => ({ status: 0, text: String(e), body: {} as KubeObject, warnings: [] }));
      if (res.status === 201) {
        expected.get(ns)!.set(pod.metadata!.name!, String(res.body.metadata?.uid));
        return { retries: attempt - 1, warnings: res.warnings };
      }
      // Quota conflicts and overload are retried; a refusal by policy is not.
      const retry =
        res.status === 0 || res.status === 409 || res.status === 429 || res.status >= 500;
      if (!retry || attempt >= 8)
        throw new Error(
          `pod ${ns}/${pod.metadata?.name}: HTTP ${res.status} ${res.text.slice(0, 300)}`,
        );
      await sleep(100 * 2 ** attempt);
    }
  };
  t = now();
  let created = 0;
  let retries = 0;
  const progress = setInterval(
    () => log(`  ${created} pods created, ${(created / ((now() - t) / 1000)).toFixed(0)}/s`),
    15_000,
  );
  try {
    await pool(OPTS.pods, OPTS.concurrency, async i => {
      retries += (await createPod(podOf(i))).retries;
      created++;
    });
  } finally {
    clearInterval(progress);
  }
  const createS = (now() - t) / 1000;
  out.create = {
    pods: created,
    seconds: round(createS),
    perSecond: round(created / createS),
    retries,
    concurrency: OPTS.concurrency,
  };
  out.load.afterCreate = load();
  log(
    `${created} pods created in ${createS.toFixed(1)} s (${(created / createS).toFixed(0)}/s, ${retries} retries)`,
  );

  // 4. The module (admission controller and its webhooks) and the PolicyReport CRD.
  t = now();
  const crd = await kubectl([
    `--kubeconfig=${plane.adminKubeconfig}`,
    "apply",
    "-f",
    join(REPO_ROOT, "deploy/policyreport-crd.yaml"),
  ]);
  if (crd.code !== 0) throw new Error(`applying the PolicyReport CRD: ${crd.stderr}`);
  await until(
    "the PolicyReport CRD served",
    async () =>
      (await admin.get("/apis/wgpolicyk8s.io/v1alpha2/policyreports")).status === 200 || undefined,
    30_000,
  );
  const installed: InstalledModule = await installModule(admin, plane.caPem, {
    env: SETTINGS_ENV,
    dist,
  });
  cleanups.push({ what: "the module", run: () => installed.uninstall() });
  mark("install", t);
  log(`module installed, its webhooks armed, in ${phase.install} s`);

  // Reports as the API server has them, from before the watcher starts.
  const agent = new Agent({
    keepAlive: true,
    ca: plane.caPem,
    cert: (plane.adminCredentials as { certPem: string }).certPem,
    key: (plane.adminCredentials as { keyPem: string }).keyPem,
  });
  const listeners = new Set<(ns: string) => void>();
  const reports = reportWatch(admin, agent, ns => listeners.forEach(l => l(ns)));
  cleanups.push({ what: "the report watch", run: async () => (reports.stop(), agent.destroy()) });

  /** Whether a namespace's report is right: every pod in it named, and only those. */
  /**
   * Whether a namespace's report is right: it names no pod but those in the namespace, its summary
   * counts its results (the omitted ones included), and either it names every pod in the namespace
   * ("named") or — cut at maxResults (a lower --max-results), some pods' results all left out — its
   * summary counts k results for every pod in it, k being what a whole pod has here ("counts": a pod
   * missing or gone would be k more or fewer).
   */
  const rightIn = (ns: string): "named" | "counts" | undefined => {
    const v = reports.views.get(ns);
    const want = expected.get(ns)!;
    if (!v || v.results + v.omitted !== v.summaryTotal) return undefined;
    const uids = new Set(want.values());
    for (const uid of v.named) if (!uids.has(uid)) return undefined;
    if (v.named.size === want.size) return "named";
    return v.omitted && v.summaryTotal === v.perPod[1] * want.size ? "counts" : undefined;
  };
  const standing = (): Standing => {
    let right = 0;
    let byCounts = 0;
    let missing = 0;
    let named = 0;
    const wrong: string[] = [];
    for (const ns of expected.keys()) {
      const v = reports.views.get(ns);
      if (!v) missing++;
      else named += v.named.size;
      const verdict = rightIn(ns);
      if (verdict) right++;
      if (verdict === "counts") byCounts++;
      else if (!verdict && v && wrong.length < 3)
        wrong.push(
          `${ns}: ${v.named.size} of ${expected.get(ns)!.size} pods named, ${v.results} results` +
            (v.omitted ? `, ${v.omitted} omitted` : ""),
        );
    }
    return { right, byCounts, missing, named, wrong };
  };

  // 5. The watcher, as its Deployment runs it: the same bundle and ServiceAccount, watch mode.
  // The controller's start (its caches listing) out of the way of the watcher's.
  await sleep(5000);
  const { namespace: saNs, name: saName } = readModuleManifest(
    join(dist, basename(moduleYamlPath())),
  ).serviceAccount;
  const token = (
    await must(
      "a token for the watcher",
      admin.create(`/api/v1/namespaces/${saNs}/serviceaccounts/${saName}/token`, {
        apiVersion: "authentication.k8s.io/v1",
        kind: "TokenRequest",
        spec: { expirationSeconds: 4 * 3600 },
      }),
    )
  ).body.status as { token: string };
  const certs = createTestCerts();
  const kubeconfigPath = join(certs.dir, "watcher.kubeconfig");
  writeFileSync(kubeconfigPath, kubeconfigYaml(plane.server, plane.caPem, token), { mode: 0o600 });
  cleanups.push({
    what: "the watcher's files",
    run: async () => rmSync(certs.dir, { recursive: true, force: true }),
  });
  const port = await freePort();
  // The control plane's CPU (etcd, kube-apiserver, kube-controller-manager, in the harness's order):
  // where the time goes when it is not the watcher's.
  const planeCpu = () => {
    const [etcd, apiServer, controllerManager] = plane.pids.map(p => round(cpuSeconds(p), 1));
    return { etcd, apiServer, controllerManager };
  };
  out.controlPlaneCpuS = { watcherStart: planeCpu() };
  out.load.watcherStart = load();
  const t0 = now();
  const sampler = rssSampler(t0);
  /** When each namespace's first report arrived (s after the watcher's spawn). */
  const firstReport = new Map<string, number>();
  listeners.add(ns => {
    if (!firstReport.has(ns)) firstReport.set(ns, (now() - t0) / 1000);
  });
  cleanups.push({ what: "the RSS sampler", run: async () => sampler.stop() });
  const watcherStarting = startWatcher({
    bundle,
    api: { url: plane.server, kubeconfigPath, certs },
    port,
    env: SETTINGS_ENV,
    startTimeoutMs: 180_000,
  });
  cleanups.push({
    what: "the watcher",
    run: async () => (await watcherStarting.catch(() => undefined))?.stop(),
  });
  const watcher = await watcherStarting;
  watcherOut.healthyS = round((now() - t0) / 1000, 2);
  const pid = await until("the watcher's pid", async () => sampler.pid(), 5_000);
  log(`watcher healthy after ${watcherOut.healthyS} s (pid ${pid})`);

  // 6. Until every report is right.
  const rightDeadline = now() + OPTS.rightTimeoutS * 1000;
  let lastLog = now();
  for (;;) {
    const s = standing();
    if (s.right === OPTS.namespaces) {
      watcherOut.timeToRightS = round((now() - t0) / 1000, 2);
      watcherOut.rightBy = s.byCounts
        ? `counts in ${s.byCounts} reports, every pod named in the others`
        : "every pod named";
      break;
    }
    if (now() > rightDeadline) {
      watcherOut.notRight = s;
      log(`reports not right after ${OPTS.rightTimeoutS} s: ${JSON.stringify(s)}`);
      break;
    }
    if (now() - lastLog > 15_000) {
      lastLog = now();
      log(
        `  ${((now() - t0) / 1000).toFixed(0)} s: ${s.right}/${OPTS.namespaces} reports right, ` +
          `${s.missing} missing, ${s.named} pods named; watcher RSS ${sampler.last()?.rss.toFixed(0)} MiB` +
          (s.wrong.length ? ` (${s.wrong.join("; ")})` : ""),
      );
    }
    await sleep(250);
  }
  watcherOut.cpuAtRightS = round(cpuSeconds(pid), 2);
  watcherOut.hwmAtRightMb = round(memoryMb(pid).hwm);
  watcherOut.reportWritesAtRight = reports.writes();
  out.load.right = load();
  out.controlPlaneCpuS.right = planeCpu();
  const firsts = [...firstReport.values()];
  watcherOut.firstReportS = {
    first: round(Math.min(...firsts), 1),
    p50: round(quantile(firsts, 0.5), 1),
    last: round(Math.max(...firsts), 1),
  };
  if (watcherOut.timeToRightS !== undefined)
    log(
      `every report right after ${watcherOut.timeToRightS} s (${reports.writes()} report writes)`,
    );
  const views = [...reports.views.values()];
  watcherOut.reports = {
    count: views.length,
    maxBytes: reports.maxBytes(),
    resultsPerPod: views.length
      ? [Math.min(...views.map(v => v.perPod[0])), Math.max(...views.map(v => v.perPod[1]))]
      : undefined,
    results: views.reduce((a, v) => a + v.results, 0),
  };

  // 7. Settled.
  const settle = await settled(pid, sampler);
  watcherOut.settled = settle;
  watcherOut.hwmSettledMb = round(memoryMb(pid).hwm);
  log(
    `watcher settled at ${settle.rssMb} MiB (quiet: ${settle.quiet}), VmHWM ${watcherOut.hwmSettledMb} MiB`,
  );

  // 8. A change the reports show: pods of the audit namespaces replaced by privileged ones.
  const auditNamespaces = Array.from({ length: OPTS.namespaces }, (_, n) => n).filter(AUDIT);
  const candidates: number[] = [];
  for (let k = 0; candidates.length < OPTS.changes; k++) {
    const i =
      auditNamespaces[k % auditNamespaces.length] +
      Math.floor(k / auditNamespaces.length) * OPTS.namespaces;
    if (!auditNamespaces.length || i >= OPTS.pods) break;
    candidates.push(i);
  }
  interface Change {
    ns: string;
    oldUid: string;
    newUid?: string;
    createdAt?: number;
    seenAt?: number;
    error?: string;
  }
  const changes: Change[] = [];
  const pending = new Map<string, Change[]>();
  const check = (ns: string) => {
    const v = reports.views.get(ns);
    const list = pending.get(ns);
    if (!v || !list) return;
    for (const c of list)
      if (c.newUid && c.seenAt === undefined && v.failing.has(c.newUid) && !v.named.has(c.oldUid))
        c.seenAt = v.at;
  };
  listeners.add(check);
  const changeOut: ChangeResult = {
    asked: OPTS.changes,
    namespaces: new Set(candidates.map(i => layout.nsName(i % OPTS.namespaces))).size,
    ratePerS: OPTS.changeRate,
  };
  watcherOut.change = changeOut;
  if (candidates.length) {
    const tc = now();
    await Promise.all(
      candidates.map(async (i, k) => {
        await sleep((k / OPTS.changeRate) * 1000);
        const ns = layout.nsName(i % OPTS.namespaces);
        const oldName = podName(i);
        const c: Change = { ns, oldUid: expected.get(ns)!.get(oldName)! };
        changes.push(c);
        if (!pending.has(ns)) pending.set(ns, []);
        pending.get(ns)!.push(c);
        try {
          await must(
            `deleting ${ns}/${oldName}`,
            admin.raw("DELETE", `/api/v1/namespaces/${ns}/pods/${oldName}?gracePeriodSeconds=0`),
          );
          expected.get(ns)!.delete(oldName);
          const pod = podOf(i, "privileged", 1);
          await createPod(pod);
          c.newUid = expected.get(ns)!.get(pod.metadata!.name!);
          c.createdAt = now();
          check(ns);
        } catch (e) {
          c.error = (e as Error).message.slice(0, 300);
        }
      }),
    );
    changeOut.madeInS = round((now() - tc) / 1000, 2);
    const changeDeadline = now() + (INTERVAL_S + 180) * 1000;
    while (changes.some(c => c.newUid && c.seenAt === undefined) && now() < changeDeadline)
      await sleep(250);
    const lat = changes
      .filter(c => c.seenAt !== undefined)
      .map(c => Math.max(0, (c.seenAt! - c.createdAt!) / 1000));
    Object.assign(changeOut, {
      made: changes.filter(c => c.newUid).length,
      errors: changes.flatMap(c => (c.error ? [c.error] : [])).slice(0, 5),
      shown: lat.length,
      p50S: round(quantile(lat, 0.5), 2),
      p90S: round(quantile(lat, 0.9), 2),
      maxS: round(Math.max(...lat, 0), 2),
    });
    log(
      `change: ${lat.length} of ${changes.length} replacements shown, p50 ${changeOut.p50S} s, max ${changeOut.maxS} s`,
    );
    // Every report still right: the replaced pods reported, the old ones gone.
    const after = await until(
      "every report right after the change",
      async () => (standing().right === OPTS.namespaces ? standing() : undefined),
      (INTERVAL_S + 60) * 1000,
    ).catch(() => standing());
    changeOut.rightAfter = { right: after.right, wrong: after.wrong };
  } else changeOut.skipped = "no pod in an audit namespace";
  listeners.delete(check);

  // The truth the reports were held to: what the API server lists, paged.
  let listed = 0;
  let cont = "";
  do {
    const page = await must(
      "listing pods",
      admin.get(`/api/v1/pods?limit=1000${cont ? `&continue=${encodeURIComponent(cont)}` : ""}`),
    );
    for (const p of (page.body.items ?? []) as KubeObject[])
      if (
        expected.get(p.metadata?.namespace ?? "")?.get(p.metadata?.name ?? "") === p.metadata?.uid
      )
        listed++;
    cont = (page.body.metadata as { continue?: string } | undefined)?.continue ?? "";
  } while (cont);
  const tracked = [...expected.values()].reduce((a, m) => a + m.size, 0);
  out.podsListed = { listed, tracked };
  if (listed !== tracked)
    log(`WARNING: the API server lists ${listed} of the ${tracked} pods tracked`);

  const after = await settled(pid, sampler);
  watcherOut.settledAfterChange = after;
  // V8 gives memory back lazily: what the watcher holds once nothing has happened for a while.
  if (OPTS.idleS) {
    await sleep(OPTS.idleS * 1000);
    const from = sampler.elapsed();
    await sleep(SETTLE_S * 1000);
    const xs = sampler.since(from).map(x => x.rss);
    watcherOut.idle = { afterS: OPTS.idleS, rssMb: round(quantile(xs, 0.5)), samples: xs.length };
    log(`watcher idle ${OPTS.idleS} s after the change: ${watcherOut.idle.rssMb} MiB`);
  }
  watcherOut.hwmMb = round(memoryMb(pid).hwm);
  watcherOut.maxSampleMb = round(Math.max(...sampler.samples.map(s => s.rss)));
  watcherOut.cpuTotalS = round(cpuSeconds(pid), 2);
  out.load.end = load();
  out.controlPlaneCpuS.end = planeCpu();
  const logs = watcher.logs();
  watcherOut.logLines = logs.split("\n").filter(Boolean).length;
  watcherOut.forbidden = (logs.match(/forbidden/gi) ?? []).length;
  watcherOut.logTail = logs.slice(-3000);
  watcherOut.rssSeries = thin(sampler.samples);
  out.controllerForbidden = (installed.controller.logs().match(/forbidden/gi) ?? []).length;
  out.totalS = round((now() - started) / 1000);
  return out;
}

/** At most ~600 samples (every k-th, and the largest): [t, rss, hwm]. */
const thin = (samples: Sample[]) =>
  thinned(
    samples,
    x => x.rss,
    x => [round(x.t), Math.round(x.rss), Math.round(x.hwm)],
  );

// ---------------------------------------------------------------------------------------------
// The table

const fmt = (x: unknown, unit = "") =>
  x === undefined || x === null ? "—" : `${String(x)}${unit}`;

function table(r: RunResult): string {
  const w = r.watcher;
  const c = r.create;
  const ch = w.change;
  const pods = OPTS.pods;
  const before = BEFORE_RULE.base + (BEFORE_RULE.per1000 * pods) / 1000;
  const rule = OPTS.rule.base + (OPTS.rule.per1000 * pods) / 1000;
  const peak = rule * OPTS.rulePeak;
  const within = (x: number | undefined, limit: number) =>
    x === undefined ? "" : x <= limit ? " ✓" : ` ✗ (${(x / limit).toFixed(2)}×)`;
  const right =
    w.timeToRightS !== undefined
      ? `${w.timeToRightS} s (healthy after ${fmt(w.healthyS, " s")}; first report ${fmt(w.firstReportS?.first, " s")}, half ${fmt(w.firstReportS?.p50, " s")}; right by ${w.rightBy})`
      : `NOT right after ${OPTS.rightTimeoutS} s (${w.notRight?.right ?? 0} of ${OPTS.namespaces})`;
  const change = !ch
    ? "—"
    : ch.skipped
      ? `— (${ch.skipped})`
      : `${fmt(ch.p50S, " s")} / ${fmt(ch.maxS, " s")} (${fmt(ch.shown)} of ${fmt(ch.made)} replacements shown; interval ${INTERVAL_S} s)`;
  const cpuDelta = (p: "apiServer" | "etcd") => {
    const [a, b] = [r.controlPlaneCpuS.watcherStart?.[p], r.controlPlaneCpuS.right?.[p]];
    return a === undefined || b === undefined ? undefined : round(b - a);
  };
  const loads = ["start", "watcherStart", "right", "end"]
    .map(k => (r.load[k] ? r.load[k][0] : "—"))
    .join(" / ");
  const rows: [string, string][] = [
    ["pods / namespaces / nodes", `${pods} / ${OPTS.namespaces} / ${OPTS.nodes}`],
    [
      "create rate",
      `${fmt(c?.perSecond, " pods/s")} (${fmt(c?.seconds, " s")}, ${OPTS.concurrency} in flight, ${fmt(c?.retries)} retries)`,
    ],
    ["watcher time-to-right", right],
    [
      "watcher RSS settled (median of 10 s)",
      `${fmt(w.settled?.rssMb, " MiB")}${within(w.settled?.rssMb, rule)} once right; ` +
        `${fmt(w.settledAfterChange?.rssMb, " MiB")}${within(w.settledAfterChange?.rssMb, rule)} after the change; ` +
        `${fmt(w.idle?.rssMb, " MiB")}${within(w.idle?.rssMb, rule)} idle ${fmt(w.idle?.afterS, " s")} later`,
    ],
    [
      "watcher peak (VmHWM)",
      `${fmt(w.hwmMb, " MiB")}${within(w.hwmMb, peak)} (largest sample ${fmt(w.maxSampleMb, " MiB")})`,
    ],
    [
      `sizing rule: ${OPTS.rule.base} MiB + ${OPTS.rule.per1000} MiB per 1,000 pods, peak × ${OPTS.rulePeak}`,
      `settled ${rule.toFixed(0)} MiB, peak ${peak.toFixed(0)} MiB (✓/✗ above)`,
    ],
    [
      "the rule before issue 28: 285 MiB + 33 MiB per 1,000 pods, peak × 1.5",
      `settled ${before.toFixed(0)} MiB, peak ${(before * BEFORE_RULE.peak).toFixed(0)} MiB`,
    ],
    ["change-to-report p50 / max", change],
    [
      "CPU from the watcher's start to right",
      `watcher ${fmt(w.cpuAtRightS, " s")}, kube-apiserver ${fmt(cpuDelta("apiServer"), " s")}, etcd ${fmt(cpuDelta("etcd"), " s")}`,
    ],
    [
      "reports",
      `${fmt(w.reports?.count)}, largest ${fmt(Math.round((w.reports?.maxBytes ?? 0) / 1024), " KiB")}, ` +
        `${fmt(w.reports?.resultsPerPod?.join("–"))} results per pod shown, maxResults ${OPTS.maxResults ?? "1000 (the module's default)"}`,
    ],
    ["load average, 1 min (start / watcher start / right / end)", loads],
    ["run took", fmt(r.totalS, " s")],
  ];
  return ["| measure | value |", "| --- | --- |", ...rows.map(([k, v]) => `| ${k} | ${v} |`)].join(
    "\n",
  );
}

async function run() {
  const watchdog = setTimeout(
    () =>
      void shutdown(2, `watchdog: the run took over ${OPTS.deadlineMin} min; stopping everything`),
    OPTS.deadlineMin * 60_000,
  );
  let code = 0;
  try {
    log(
      `scale-cluster: ${OPTS.pods} pods, ${OPTS.namespaces} namespaces, ${OPTS.nodes} nodes; TMPDIR ${OPTS.tmpdir}; deadline ${OPTS.deadlineMin} min`,
    );
    const result = await main();
    const dir = join(REPO_ROOT, "bench/runs");
    mkdirSync(dir, { recursive: true });
    const file = join(
      dir,
      `scale-cluster-${OPTS.label ? `${OPTS.label}-` : ""}${OPTS.pods}-${new Date().toISOString().replace(/[:.]/g, "-")}.json`,
    );
    writeFileSync(file, JSON.stringify(result, null, 2));
    console.log(table(result));
    console.log(`\nraw: ${file}`);
    const w = result.watcher;
    if (w.timeToRightS === undefined || (w.change?.made ?? 0) !== (w.change?.shown ?? 0)) code = 1;
  } catch (e) {
    log(`failed: ${(e as Error).stack ?? String(e)}`);
    code = 1;
  } finally {
    clearTimeout(watchdog);
  }
  await shutdown(code);
}

void run();
