// Runs the real built Pepr controller (dist/pepr-<uuid>.js, from `npm run build`) as a child
// process against an API server (the stand-in, or a real one in test/cluster), on a free port, with
// a fresh secret API path, and talks to it over HTTPS with keep-alive, as the API server would.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { Agent } from "node:https";
import { createServer } from "node:net";
import { join, resolve } from "node:path";
import type { AdmissionReview } from "./admission";
import type { TestCerts } from "./certs";
import { sendHttps } from "./https";

/** The example capabilities the tests run with: the jest setup registers the same in process. */
export const EXAMPLES = "hello-pepr";

export const REPO_ROOT = resolve(__dirname, "../..");

/** The API server the controller talks to, and the certificate it serves its webhook with. */
export interface ControllerApi {
  url: string;
  /** The controller's KUBECONFIG. */
  kubeconfigPath: string;
  certs: Pick<TestCerts, "keyPath" | "certPath" | "caPem">;
  /** The stand-in's request log, quoted when the controller does not start. */
  requests?: { method: string; path: string }[];
}

export interface ControllerOptions {
  api: ControllerApi;
  /** The port to listen on (default: a free one). A restart on the same port keeps a webhook URL valid. */
  port?: number;
  /** The secret path segment (default: a fresh random one). */
  apiPath?: string;
  /** Extra environment for the controller (settings as ADMISSION_GUARD_*, LOG_LEVEL, ...). */
  env?: Record<string, string>;
  /** Path of the bundle; default dist/pepr-<uuid>.js of this repo. */
  bundle?: string;
  /**
   * Add IMAGES_OFF to the environment (default true); false for a bundle built before the setting
   * existed (a benchmark's "before"), which would refuse the unknown variable.
   */
  imagesOff?: boolean;
  /**
   * Register the example capability hello-pepr (ADMISSION_GUARD_EXAMPLES; default true, as the
   * tests' in-process `check` has it); false for the module as deployed (the benchmarks) or a
   * bundle built before the variable existed.
   */
  examples?: boolean;
  /** How long to wait for /healthz 200 (default 30 s). */
  startTimeoutMs?: number;
}

export interface HttpResult {
  status: number;
  body: string;
  /** The body parsed as JSON, when it is JSON. */
  json?: unknown;
}

export interface Controller {
  /** https://127.0.0.1:<port> */
  url: string;
  port: number;
  /** The controller's process id (its memory: /proc/<pid>/status). */
  pid: number;
  /** The secret path segment: requests go to /mutate/<apiPath> and /validate/<apiPath>. */
  apiPath: string;
  /** POSTs an AdmissionReview to /mutate/<apiPath>; rejects unless HTTP 200 with a response. */
  mutate(review: AdmissionReview): Promise<AdmissionReview>;
  validate(review: AdmissionReview): Promise<AdmissionReview>;
  /** A raw POST (any path, any body): for malformed-input tests. */
  post(path: string, rawBody: string | Buffer, contentType?: string): Promise<HttpResult>;
  get(path: string): Promise<HttpResult>;
  /** Everything the controller printed so far (stdout and stderr). */
  logs(): string;
  stop(): Promise<void>;
}

const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8"));

/** The bundle `npm run build` writes, named after the module uuid in package.json. */
export function bundlePath(): string {
  return join(REPO_ROOT, "dist", `pepr-${pkg.pepr.uuid}.js`);
}

// Ports for controllers come from below the kernel's ephemeral range (32768+ here): the stand-in
// APIs listen on port 0, i.e. in that range, and a controller that took a port just released by a
// "listen on 0" probe could collide with a stand-in started meanwhile in another jest worker — the
// controller (which listens on every address) then answered the other controller's API calls, and
// that controller failed with "unable to verify the first certificate".
const PORT_RANGE = { from: 20_000, to: 32_000 };

/** Whether nothing listens on the port, on any address (as Pepr listens). */
function portIsFree(port: number): Promise<boolean> {
  return new Promise(ok => {
    const server = createServer();
    server.unref();
    server.once("error", () => ok(false));
    server.listen(port, () => server.close(() => ok(true)));
  });
}

/** A free port for a controller, outside the range the kernel hands out for port 0. */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = PORT_RANGE.from + Math.floor(Math.random() * (PORT_RANGE.to - PORT_RANGE.from));
    if (await portIsFree(port)) return port;
  }
  throw new Error(`no free port between ${PORT_RANGE.from} and ${PORT_RANGE.to}`);
}

const LOG_LIMIT = 4 * 1024 * 1024;

/** Everything a child process prints (stdout and stderr), its latest `limit` characters at most. */
export function captureOutput(child: ChildProcess, limit: number): () => string {
  let output = "";
  const collect = (chunk: Buffer) => {
    output += chunk.toString("utf8");
    if (output.length > limit) output = output.slice(-limit / 2);
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  return () => output;
}
const running = new Set<ChildProcess>();
// A test run that dies must not leave controllers behind.
process.once("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});

/**
 * The same bundle as Pepr's watcher Deployment runs it (PEPR_WATCH_MODE=true): its Watch bindings
 * (capabilities/reports) instead of the webhook; it serves /healthz and /metrics only.
 */
export function startWatcher(options: ControllerOptions): Promise<Controller> {
  return startController({ ...options, env: { ...options.env, PEPR_WATCH_MODE: "true" } });
}

/**
 * The tests' controllers read no registry unless a test asks (ADMISSION_GUARD_IMAGES_INSPECT in
 * its env): these machines reach none but the tests' own (test/support/registry.ts).
 */
export const IMAGES_OFF = { ADMISSION_GUARD_IMAGES_INSPECT: "false" };

export async function startController(options: ControllerOptions): Promise<Controller> {
  const bundle = options.bundle ?? bundlePath();
  if (!existsSync(bundle))
    throw new Error(
      `${bundle} is missing: run \`npm run build\` first (the e2e tests run the built controller)`,
    );
  const { api } = options;
  const port = options.port ?? (await freePort());
  const apiPath = options.apiPath ?? randomBytes(16).toString("hex");
  const child = spawn(process.execPath, [bundle], {
    cwd: REPO_ROOT,
    // Not the parent's environment: a stray ADMISSION_GUARD_* variable would change the settings.
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "",
      // What the deployed controller gets from package.json `pepr.env` (e.g. NODE_ENV=production).
      ...(pkg.pepr.env as Record<string, string>),
      KUBECONFIG: api.kubeconfigPath,
      SSL_KEY_PATH: api.certs.keyPath,
      SSL_CERT_PATH: api.certs.certPath,
      PEPR_API_PATH: apiPath,
      PEPR_WATCH_MODE: "false",
      LOG_LEVEL: "info",
      ADMISSION_GUARD_PORT: String(port),
      // The copy-me example, registered where it teaches (capabilities/index.ts).
      ...(options.examples === false ? {} : { ADMISSION_GUARD_EXAMPLES: EXAMPLES }),
      ...(options.imagesOff === false ? {} : IMAGES_OFF),
      ...options.env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.add(child);
  const output = captureOutput(child, LOG_LIMIT);
  let exited: { code: number | null; signal: string | null } | undefined;
  const exit = new Promise<void>(done =>
    child.on("exit", (code, signal) => {
      exited = { code, signal };
      running.delete(child);
      done();
    }),
  );

  const agent = new Agent({ keepAlive: true, ca: api.certs.caPem, maxSockets: 64 });
  const url = `https://127.0.0.1:${port}`;

  async function call(method: string, path: string, body?: string | Buffer, contentType?: string) {
    const headers: Record<string, string> =
      body === undefined ? {} : { "Content-Type": contentType ?? "application/json" };
    const reply = await sendHttps(url + path, { method, agent, headers, body });
    return { status: reply.status, body: reply.text, json: reply.json } satisfies HttpResult;
  }

  async function admission(kind: "mutate" | "validate", review: AdmissionReview) {
    const res = await call("POST", `/${kind}/${apiPath}`, JSON.stringify(review));
    const answer = res.json as AdmissionReview | undefined;
    if (res.status !== 200 || !answer?.response)
      throw new Error(`${kind}: HTTP ${res.status} ${res.body.slice(0, 500)}`);
    return answer;
  }

  async function stop() {
    agent.destroy();
    if (!exited) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exit;
      clearTimeout(timer);
    }
  }

  // Ready when /healthz answers 200: Pepr binds its routes only once its store was listed.
  const deadline = Date.now() + (options.startTimeoutMs ?? 30_000);
  for (;;) {
    if (exited) {
      throw new Error(
        `the controller exited during start-up (code ${exited.code}, signal ${exited.signal}):\n${output().slice(-4000)}`,
      );
    }
    const res = await call("GET", "/healthz").catch(() => undefined);
    if (res?.status === 200) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(
        `the controller did not answer /healthz within ${options.startTimeoutMs ?? 30_000} ms ` +
          `(API ${api.url}${
            api.requests
              ? `; last requests: ${api.requests
                  .slice(-5)
                  .map(r => `${r.method} ${r.path}`)
                  .join(", ")}`
              : ""
          }):\n${output().slice(-4000)}`,
      );
    }
    await new Promise(r => setTimeout(r, 100));
  }

  return {
    url,
    port,
    pid: child.pid!,
    apiPath,
    mutate: review => admission("mutate", review),
    validate: review => admission("validate", review),
    post: (path, rawBody, contentType) => call("POST", path, rawBody, contentType),
    get: path => call("GET", path),
    logs: output,
    stop,
  };
}
