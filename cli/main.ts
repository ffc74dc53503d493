// The `admission-guard` command line (bin/admission-guard.mjs runs this through tsx, no build).
// Each subcommand lives in its own file: `check` (cli/check.ts), `test` (cli/policy-test.ts).
import { policies, validators } from "../capabilities/index";
import { CHECK_USAGE, runCheck } from "./check";
import { readAll, type CliIO } from "./io";
import { runTest, TEST_USAGE } from "./policy-test";

const USAGE = `Usage: admission-guard <command> [options]

Commands:
  check FILE|DIR|- ...   run admission-guard's rules on manifests, offline (see check --help)
  test DIR|FILE ...      run policy tests (PolicyTest files), offline (see test --help)

${CHECK_USAGE}
${TEST_USAGE}`;

function defaultIO(): CliIO {
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    readStdin: () => readAll(process.stdin),
    cwd: process.cwd(),
    env: process.env,
    policies,
    validators,
  };
}

/** Runs the command line; returns the exit code. Streams and policies can be injected for tests. */
export async function main(argv: string[], io: Partial<CliIO> = {}): Promise<number> {
  const full: CliIO = { ...defaultIO(), ...io };
  const [command, ...rest] = argv;
  if (command === "check") return runCheck(rest, full);
  if (command === "test") return runTest(rest, full);
  if (command === undefined || command === "help" || command === "--help" || command === "-h") {
    (command === undefined ? full.stderr : full.stdout).write(USAGE);
    return command === undefined ? 2 : 0;
  }
  full.stderr.write(`admission-guard: unknown command "${command}". Commands: check, test\n`);
  return 2;
}
