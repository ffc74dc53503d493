// Pepr's log within a bound while stdout does not drain (lib/pepr/bounded-log.ts), in processes of
// their own writing to a real pipe, as the controller writes to its container's.
import { spawn } from "node:child_process";
import { join } from "node:path";
import { LOG_BUFFER_MAX_BYTES } from "../../../lib/pepr/bounded-log";
import { REPO_ROOT } from "../../support/controller";
import { eventually } from "../../support/wait";

const CHILD = join(REPO_ROOT, "test/support/log-child.ts");

function start(mode: "bounded" | "default", what: "burst" | "one" | "flood") {
  const child = spawn(process.execPath, ["--import", "tsx", CHILD, mode, what], {
    cwd: REPO_ROOT,
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  const exited = new Promise<number | null>(done => child.on("exit", code => done(code)));
  const lines = () =>
    stdout
      .split("\n")
      .filter(Boolean)
      .map(l => JSON.parse(l) as { i: number; msg?: string; alias?: string });
  return { child, exited, lines, stderr: () => stderr };
}

describe("Pepr's log within a bound (installBoundedLog)", () => {
  it("writes every line, in order, children's made before included, when the process exits at once", async () => {
    const run = start("bounded", "burst");
    expect(await run.exited).toBe(0);
    expect(run.stderr()).toBe("");
    const written = run.lines().map(l => l.i);
    // Line 0 starts an asynchronous write at once (minLength 0); the exit writes the rest
    // synchronously while that write may still be on libuv's thread pool, so on a loaded machine
    // line 0 can land after them (sonic-boom's flushSync, as with Pepr's own stream). Every line
    // buffered behind it is written, in order, children's included.
    const [first, ...rest] = [...Array(50).keys()];
    expect(written.filter(i => i !== first)).toEqual(rest);
    expect(written.filter(i => i === first).length).toBeLessThanOrEqual(1);
    expect(run.lines().filter(l => l.alias === "made before")).toHaveLength(25);
  }, 30_000);

  it("writes a line as it comes, not only at exit", async () => {
    const run = start("bounded", "one");
    try {
      await eventually(() => expect(run.lines().map(l => l.msg)).toEqual(["the only line"]));
    } finally {
      run.child.stdin.end();
      await run.exited;
    }
  }, 30_000);

  it("holds at most its bound while stdout does not drain, where Pepr's default holds it all", async () => {
    for (const mode of ["bounded", "default"] as const) {
      const run = start(mode, "flood");
      run.child.stdout.pause(); // nobody reads: the pipe fills, the buffer takes the rest
      try {
        const report = await eventually(
          () => JSON.parse(run.stderr()) as { buffered: number; dropped: number },
          20_000,
        );
        if (mode === "bounded") {
          expect(report.buffered).toBeLessThanOrEqual(LOG_BUFFER_MAX_BYTES);
          expect(report.dropped).toBeGreaterThan(0);
        } else {
          // 24 MiB logged, at most a pipe's worth written: the rest held, none dropped.
          expect(report.buffered).toBeGreaterThan(2 * LOG_BUFFER_MAX_BYTES);
          expect(report.dropped).toBe(0);
        }
      } finally {
        run.child.stdout.resume();
        run.child.stdin.end();
        await run.exited;
      }
    }
  }, 60_000);
});
