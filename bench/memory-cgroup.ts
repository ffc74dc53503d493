// A memory limit for a benchmarked controller, as its pod has one: a memory cgroup (v2 where the
// unified hierarchy is writable, else v1) limited to `mib`, the process moved in as soon as it is
// seen. Past the limit the kernel kills it, as it kills a container past its limit. V8 sizes its
// heap when Node starts, so the caller also passes the heap Node gives itself in such a pod
// (--max-old-space-size; 259 MiB for 512 MiB, measured in a cgroup here). Linux only; needs write
// access to /sys/fs/cgroup (root, as the benchmarks run here).
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const V2 = "/sys/fs/cgroup/unified";
const V1 = "/sys/fs/cgroup/memory";

export class MemoryCgroup {
  private constructor(
    private readonly dir: string,
    private readonly v2: boolean,
  ) {}

  /** A new cgroup limited to `mib` MiB (swap included where the kernel accounts it). */
  static create(mib: number, name = `admission-guard-bench-${process.pid}`): MemoryCgroup {
    const bytes = String(mib * 1024 * 1024);
    for (const [root, v2] of [
      [V2, true],
      [V1, false],
    ] as const) {
      const dir = join(root, name);
      try {
        mkdirSync(dir, { recursive: true });
        if (v2) writeFileSync(join(dir, "memory.max"), bytes);
        else writeFileSync(join(dir, "memory.limit_in_bytes"), bytes);
        return new MemoryCgroup(dir, v2);
      } catch {
        try {
          rmdirSync(dir);
        } catch {
          // not made
        }
      }
    }
    throw new Error(`no writable memory cgroup under ${V2} or ${V1}`);
  }

  /** Moves the process in: from now on it is limited. */
  adopt(pid: number): void {
    writeFileSync(join(this.dir, "cgroup.procs"), String(pid));
  }

  /** The most the cgroup held, in MiB (its own count: RSS and the page cache it charged). */
  peakMiB(): number | undefined {
    const file = join(this.dir, this.v2 ? "memory.peak" : "memory.max_usage_in_bytes");
    if (!existsSync(file)) return undefined;
    return Math.round(Number(readFileSync(file, "utf8")) / 1024 / 1024);
  }

  /** How many times the kernel killed a process of it for memory. */
  oomKills(): number {
    const file = join(this.dir, this.v2 ? "memory.events" : "memory.oom_control");
    const m = /oom_kill (\d+)/.exec(readFileSync(file, "utf8"));
    return m ? Number(m[1]) : 0;
  }

  /** Removes it (its processes gone). */
  remove(): void {
    try {
      rmdirSync(this.dir);
    } catch {
      // a process is still in it: left for the kernel to clean with the process
    }
  }
}
