// The child processes of one real-cluster run (etcd, the API server and controller manager, and on
// the node tier containerd, the scheduler, the kubelet and kube-proxy): started with their output
// kept, waited for with a deadline that quotes their logs, stopped by PID in reverse order.
//
// Every PID is written to a state file under $TMPDIR/admission-guard-control-plane/ as soon as it
// starts, so that a run which dies before its teardown is cleaned up by the next one: it reads the
// PIDs its predecessor left and kills those whose command line still names that run's directory.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { captureOutput } from "../../support/controller";

/** Where runs leave their state: a run that died leaves PIDs that the next run stops. */
const RUNS_DIR = join(tmpdir(), "admission-guard-control-plane");
const LOG_LIMIT = 256 * 1024;

export interface Child {
  name: string;
  process: ChildProcess;
  log: () => string;
  exited?: { code: number | null; signal: string | null };
}

export function freeLoopbackPort(): Promise<number> {
  return new Promise((ok, fail) => {
    const server = createServer();
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => ok(port));
    });
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return "";
  }
}

/** Cleanup a dead run's extra resources need (the node tier's mounts, iptables chains...). */
export type StaleRunCleanup = (dir: string) => void;
const staleRunCleanups: StaleRunCleanup[] = [];
export function onStaleRun(cleanup: StaleRunCleanup): void {
  staleRunCleanups.push(cleanup);
}

/** Stops what a run that died left behind: PIDs from its state file, checked to still be ours. */
function reapStaleRuns(): void {
  if (!existsSync(RUNS_DIR)) return;
  for (const entry of readdirSync(RUNS_DIR)) {
    const stateFile = join(RUNS_DIR, entry);
    let state: { owner: number; pids: number[]; dir: string };
    try {
      state = JSON.parse(readFileSync(stateFile, "utf8"));
    } catch {
      continue;
    }
    if (alive(state.owner)) continue; // another live run
    for (const pid of state.pids)
      if (commandLine(pid).includes(state.dir)) process.kill(pid, "SIGKILL");
    for (const cleanup of staleRunCleanups) cleanup(state.dir);
    rmSync(state.dir, { recursive: true, force: true });
    rmSync(stateFile, { force: true });
  }
}

export class ProcessGroup {
  readonly children: Child[] = [];
  private readonly stateFile: string;
  private readonly killAll = () => {
    for (const c of this.children) if (!c.exited) c.process.kill("SIGKILL");
  };

  /** `dir` is the run's directory: every child's command line must name it (see reapStaleRuns). */
  constructor(readonly dir: string) {
    reapStaleRuns();
    mkdirSync(RUNS_DIR, { recursive: true });
    this.stateFile = join(RUNS_DIR, `${process.pid}.json`);
    process.once("exit", this.killAll);
    this.save();
  }

  private save(): void {
    writeFileSync(
      this.stateFile,
      JSON.stringify({
        owner: process.pid,
        dir: this.dir,
        pids: this.children.map(c => c.process.pid).filter(Boolean),
      }),
    );
  }

  start(name: string, command: string, args: string[], env?: NodeJS.ProcessEnv): Child {
    const proc = spawn(command, args, {
      stdio: ["ignore", "pipe", "pipe"],
      cwd: this.dir,
      env: env ?? process.env,
    });
    const child: Child = { name, process: proc, log: captureOutput(proc, LOG_LIMIT) };
    proc.on("exit", (code, signal) => (child.exited = { code, signal }));
    this.children.push(child);
    this.save();
    return child;
  }

  /** Polls `probe` until it returns a value; fails early, with its log, if a child exits. */
  async waitFor<T>(
    what: string,
    probe: () => Promise<T | undefined>,
    timeoutMs: number,
  ): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    let lastError = "";
    for (;;) {
      const dead = this.children.find(c => c.exited);
      if (dead)
        throw new Error(
          `${dead.name} exited (code ${dead.exited!.code}) while waiting for ${what}:\n${dead.log().slice(-3000)}`,
        );
      try {
        const result = await probe();
        if (result !== undefined) return result;
      } catch (e) {
        lastError = (e as Error).message;
      }
      if (Date.now() > deadline)
        throw new Error(
          `timed out after ${timeoutMs} ms waiting for ${what}${lastError ? ` (${lastError})` : ""}:\n` +
            this.children.map(c => `--- ${c.name}\n${c.log().slice(-2000)}`).join("\n"),
        );
      await new Promise(r => setTimeout(r, 100));
    }
  }

  /** SIGTERM, then SIGKILL after `graceMs`, one child at a time. */
  static async stop(child: Child, graceMs = 5000): Promise<void> {
    if (child.exited || child.process.pid === undefined) return;
    const exit = new Promise<void>(done => child.process.once("exit", () => done()));
    child.process.kill("SIGTERM");
    const timer = setTimeout(() => child.process.kill("SIGKILL"), graceMs);
    await exit;
    clearTimeout(timer);
  }

  /** Stops every child, the last started first. */
  async stopAll(): Promise<void> {
    for (const child of [...this.children].reverse()) await ProcessGroup.stop(child);
  }

  /** Forgets the run: its state file and directory. Call after stopAll (or on a failed start). */
  remove(): void {
    this.killAll();
    process.removeListener("exit", this.killAll);
    rmSync(this.dir, { recursive: true, force: true });
    rmSync(this.stateFile, { force: true });
  }
}
