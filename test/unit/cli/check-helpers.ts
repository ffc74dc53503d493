// Runs the command line in-process with captured streams, temp files and chosen policies.
import { mkdtempSync, mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { main } from "../../../cli/main";
import type { Policy } from "../../../lib/engine/policy";
import { helloPeprPolicy } from "../../../hello-pepr";

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
  /** stdout parsed as JSON lines (for --output json). */
  json: Record<string, unknown>[];
}

export interface RunOptions {
  stdin?: string;
  cwd?: string;
  policies?: Policy[];
  tty?: boolean;
}

export async function run(argv: string[], opts: RunOptions = {}): Promise<Run> {
  let stdout = "";
  let stderr = "";
  const code = await main(argv, {
    stdout: { write: (s: string) => (stdout += s), isTTY: opts.tty ?? false },
    stderr: { write: (s: string) => (stderr += s) },
    readStdin: async () => opts.stdin ?? "",
    cwd: opts.cwd ?? process.cwd(),
    env: {},
    policies: opts.policies ?? [helloPeprPolicy],
  });
  const json = argv.includes("json")
    ? stdout
        .split("\n")
        .filter(Boolean)
        .map(l => JSON.parse(l))
    : [];
  return { code, stdout, stderr, json };
}

/** A temp directory with these files (relative path → content). */
export function tempTree(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "ag-check-"));
  for (const [rel, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, rel)), { recursive: true });
    writeFileSync(join(dir, rel), content);
  }
  return dir;
}

/** A pod in the hello-pepr demo namespace; `deny` asks hello-pepr to refuse it. */
export function demoPodYaml(name: string, opts: { deny?: boolean; namespace?: string } = {}) {
  const ns = opts.namespace === undefined ? "pepr-demo" : opts.namespace;
  return [
    "apiVersion: v1",
    "kind: Pod",
    "metadata:",
    `  name: ${name}`,
    ...(ns ? [`  namespace: ${ns}`] : []),
    ...(opts.deny ? ["  labels:", '    hello.admission-guard.dev/deny: "true"'] : []),
    "spec:",
    "  containers:",
    "    - name: app",
    "      image: nginx:1.27",
    "",
  ].join("\n");
}
