// The offline front door as users run it: `node bin/admission-guard.mjs check ...` in a process.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { EXAMPLES, REPO_ROOT } from "./controller";

const exec = promisify(execFile);
const bin = join(REPO_ROOT, "bin", "admission-guard.mjs");

/** Runs `admission-guard check ARGS` in `cwd` (with `env` added); never throws for a non-zero exit. */
export async function runCheck(
  args: string[],
  cwd: string,
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await exec(process.execPath, [bin, "check", ...args], {
      cwd,
      // The example capability the tests' in-process `check` has too (test/support/quiet-pepr.js).
      env: { ...process.env, ADMISSION_GUARD_EXAMPLES: EXAMPLES, ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}
