// A server process seen from outside: its pid, CPU time and memory, from ss and /proc (Linux).
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";

const CLK_TCK = Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim()) || 100;

/** The controller's pid: the harness does not expose it; /proc/net/tcp + fds would, ss is simpler. */
export function pidOnPort(port: number): number {
  const out = execFileSync("ss", ["-Hltnp", `sport = :${port}`]).toString();
  const m = /pid=(\d+)/.exec(out);
  if (!m) throw new Error(`no process listens on ${port}: ${out}`);
  return Number(m[1]);
}

export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // utime and stime are fields 14 and 15 of the line, 12 and 13 after "pid (comm) ".
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
}

export function memoryMb(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, "m").exec(status)?.[1] ?? 0);
  return { rss: kb("VmRSS") / 1024, hwm: kb("VmHWM") / 1024 };
}

/**
 * Puts the servers measured on the last CPU and this process (the load, the stand-in API) on the
 * others, with `taskset`: on a small machine the load generator otherwise shares the servers' CPUs
 * and their figures swing with the scheduler (docs/bench.md, "Pinned"). False, nothing changed,
 * with fewer than 2 CPUs or no taskset.
 */
export function pinApart(serverPids: number[]): boolean {
  const cpus = availableParallelism();
  if (cpus < 2) return false;
  try {
    for (const pid of serverPids)
      execFileSync("taskset", ["-a", "-p", "-c", String(cpus - 1), String(pid)], {
        stdio: "ignore",
      });
    execFileSync("taskset", ["-a", "-p", "-c", `0-${cpus - 2}`, String(process.pid)], {
      stdio: "ignore",
    });
    return true;
  } catch {
    return false;
  }
}
