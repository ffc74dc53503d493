// A real Prometheus (Debian's `prometheus` binary) on loopback for the run: a fresh TSDB in a temp
// dir, a free port, a config that scrapes the given targets, and PromQL through its HTTP API
// (/api/v1/query). Every wait is bounded; stop() ends the process and removes its files.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { accessSync, constants, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { captureOutput, freePort } from "../../support/controller";

/** What a developer without the binary is told (the tier's globalSetup and startPrometheus). */
export const INSTALL_HINT =
  "the Prometheus tier (npm run test:prometheus) runs Debian's prometheus binary, which is not on " +
  "the PATH: install it with `apt-get install prometheus` (or set PROMETHEUS_BIN to a prometheus " +
  "binary)";

/** The prometheus binary: $PROMETHEUS_BIN, else `prometheus` on the PATH; throws INSTALL_HINT. */
export function prometheusBinary(): string {
  const candidates = process.env.PROMETHEUS_BIN
    ? [process.env.PROMETHEUS_BIN]
    : (process.env.PATH ?? "")
        .split(delimiter)
        .filter(Boolean)
        .map(dir => join(dir, "prometheus"));
  for (const path of candidates) {
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // not this one
    }
  }
  throw new Error(
    process.env.PROMETHEUS_BIN
      ? `PROMETHEUS_BIN=${process.env.PROMETHEUS_BIN} is not an executable file; ${INSTALL_HINT}`
      : INSTALL_HINT,
  );
}

/** `prometheus --version`'s first line (for the run's log). */
export function prometheusVersion(binary = prometheusBinary()): string {
  const run = spawnSync(binary, ["--version"], { encoding: "utf8", timeout: 10_000 });
  return `${run.stdout ?? ""}${run.stderr ?? ""}`.split("\n")[0].trim();
}

export interface ScrapeTarget {
  job: string;
  /** host:port */
  targets: string[];
  scheme?: "http" | "https";
  metricsPath?: string;
  /** Skip the certificate check (the controller's certificate is self-signed). Default true. */
  insecureSkipVerify?: boolean;
}

export interface PrometheusOptions {
  scrape?: ScrapeTarget[];
  /** Scrape and rule evaluation interval, seconds (default 1). */
  intervalSeconds?: number;
  /**
   * Also scrape Prometheus' own /metrics as job "prometheus": its prometheus_target_* counters
   * tell what it dropped from other targets' scrapes (duplicates, out of order, ...).
   */
  selfScrape?: boolean;
  /** Rule files (absolute paths) Prometheus loads and evaluates. */
  ruleFiles?: string[];
  /** How long to wait for /-/ready (default 30 s). */
  startTimeoutMs?: number;
}

/** One series of an instant vector: its labels and its value (NaN and ±Inf as numbers). */
export interface Sample {
  metric: Record<string, string>;
  value: number;
}

export interface Prometheus {
  /** http://127.0.0.1:<port> */
  url: string;
  port: number;
  /** An instant query at the current time: the vector's samples (a scalar as one, label-less). */
  query(promql: string): Promise<Sample[]>;
  /** A GET on the HTTP API (e.g. /api/v1/targets, /api/v1/rules, /api/v1/alerts): its `data`. */
  api(path: string): Promise<unknown>;
  /** Everything Prometheus logged so far. */
  logs(): string;
  stop(): Promise<void>;
}

interface HttpReply {
  status: number;
  text: string;
}

/** One plain-HTTP GET on loopback, bounded by timeoutMs. */
function httpGet(url: string, timeoutMs: number): Promise<HttpReply> {
  return new Promise((ok, fail) => {
    const req = request(url, { method: "GET" }, res => {
      const chunks: Buffer[] = [];
      res.on("data", c => chunks.push(c));
      res.on("end", () =>
        ok({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }),
      );
      res.on("error", fail);
    });
    req.setTimeout(timeoutMs, () =>
      req.destroy(new Error(`GET ${url}: no answer in ${timeoutMs} ms`)),
    );
    req.on("error", fail);
    req.end();
  });
}

/** Prometheus' configuration; JSON is YAML, so no YAML writer is needed. */
export function prometheusConfig(options: PrometheusOptions, port: number): string {
  const interval = `${options.intervalSeconds ?? 1}s`;
  const self: ScrapeTarget[] = options.selfScrape
    ? [{ job: "prometheus", scheme: "http", targets: [`127.0.0.1:${port}`] }]
    : [];
  return JSON.stringify(
    {
      global: {
        scrape_interval: interval,
        scrape_timeout: interval,
        evaluation_interval: interval,
      },
      rule_files: options.ruleFiles ?? [],
      scrape_configs: [...(options.scrape ?? []), ...self].map(t => ({
        job_name: t.job,
        scheme: t.scheme ?? "https",
        metrics_path: t.metricsPath ?? "/metrics",
        tls_config: { insecure_skip_verify: t.insecureSkipVerify ?? true },
        static_configs: [{ targets: t.targets }],
      })),
    },
    null,
    2,
  );
}

const running = new Set<ChildProcess>();
// A test run that dies must not leave Prometheus behind.
process.once("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});

/** Waits for the child's exit, at most timeoutMs; whether it exited. */
function exitWithin(exit: Promise<void>, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    exit.then(() => true),
    new Promise<boolean>(ok => (timer = setTimeout(() => ok(false), timeoutMs))),
  ]).finally(() => clearTimeout(timer));
}

/** Starts Prometheus on a free loopback port and waits until /-/ready answers 200. */
export async function startPrometheus(options: PrometheusOptions = {}): Promise<Prometheus> {
  const binary = prometheusBinary();
  // A port taken between the probe and Prometheus' bind: try another, a bounded number of times.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(binary, options);
    } catch (e) {
      if (attempt >= 3 || !/address already in use/.test(String(e))) throw e;
    }
  }
}

async function startOnce(binary: string, options: PrometheusOptions): Promise<Prometheus> {
  const dir = mkdtempSync(join(tmpdir(), "admission-guard-prometheus-"));
  const configPath = join(dir, "prometheus.yml");
  const port = await freePort();
  writeFileSync(configPath, prometheusConfig(options, port));
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(
    binary,
    [
      `--config.file=${configPath}`,
      `--storage.tsdb.path=${join(dir, "data")}`,
      `--web.listen-address=127.0.0.1:${port}`,
      // Debian's defaults point at /etc/prometheus and /usr/share: nothing of the host's.
      `--web.console.templates=${join(dir, "consoles")}`,
      `--web.console.libraries=${join(dir, "console_libraries")}`,
    ],
    { cwd: dir, env: { PATH: process.env.PATH ?? "" }, stdio: ["ignore", "pipe", "pipe"] },
  );
  running.add(child);
  const output = captureOutput(child, 1024 * 1024);
  let exited: { code: number | null; signal: string | null } | undefined;
  const exit = new Promise<void>(done =>
    child.on("exit", (code, signal) => {
      exited = { code, signal };
      running.delete(child);
      done();
    }),
  );
  // A binary that cannot be run: 'error' and no 'exit'.
  let spawnFailure: Error | undefined;
  child.once("error", e => (spawnFailure = e));

  let stopped: Promise<void> | undefined;
  function stop(): Promise<void> {
    stopped ??= (async () => {
      if (!exited && !spawnFailure) {
        child.kill("SIGTERM");
        // Prometheus flushes its head block on SIGTERM; a stuck one is killed.
        if (!(await exitWithin(exit, 10_000))) {
          child.kill("SIGKILL");
          await exitWithin(exit, 5_000);
        }
      }
      rmSync(dir, { recursive: true, force: true });
    })();
    return stopped;
  }

  const timeoutMs = options.startTimeoutMs ?? 30_000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (spawnFailure || exited) {
      await stop();
      const why = spawnFailure?.message ?? `code ${exited?.code}, signal ${exited?.signal}`;
      throw new Error(`prometheus exited during start-up (${why}):\n${output().slice(-4000)}`);
    }
    const ready = await httpGet(`${url}/-/ready`, 2_000).catch(() => undefined);
    if (ready?.status === 200) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(
        `prometheus did not answer ${url}/-/ready within ${timeoutMs} ms:\n${output().slice(-4000)}`,
      );
    }
    await new Promise(r => setTimeout(r, 100));
  }

  async function api(path: string): Promise<unknown> {
    const reply = await httpGet(url + path, 10_000);
    let body: { status?: string; data?: unknown; errorType?: string; error?: string };
    try {
      body = JSON.parse(reply.text);
    } catch {
      throw new Error(`GET ${path}: HTTP ${reply.status}, not JSON: ${reply.text.slice(0, 500)}`);
    }
    if (reply.status !== 200 || body.status !== "success")
      throw new Error(`GET ${path}: HTTP ${reply.status} ${body.errorType}: ${body.error}`);
    return body.data;
  }

  async function query(promql: string): Promise<Sample[]> {
    const data = (await api(`/api/v1/query?query=${encodeURIComponent(promql)}`)) as {
      resultType: string;
      result: unknown;
    };
    // Values are strings in the API ("1", "NaN", "+Inf"); Number() reads all of them.
    if (data.resultType === "vector")
      return (data.result as { metric: Record<string, string>; value: [number, string] }[]).map(
        s => ({ metric: s.metric, value: Number(s.value[1]) }),
      );
    if (data.resultType === "scalar")
      return [{ metric: {}, value: Number((data.result as [number, string])[1]) }];
    throw new Error(`${promql}: a ${data.resultType}, not an instant vector or scalar`);
  }

  return { url, port, query, api, logs: output, stop };
}
