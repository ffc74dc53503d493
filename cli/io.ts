// What the command line touches outside itself, injectable so tests run `main` in-process.
import type { RbacEvaluator } from "../lib/cluster/view";
import type { Policy, Validator } from "../lib/engine/policy";

export interface Output {
  write(chunk: string): unknown;
  isTTY?: boolean;
}

export interface CliIO {
  stdout: Output;
  stderr: Output;
  /** The whole of standard input (read only when `-` is given). */
  readStdin(): Promise<string>;
  /** Relative paths are resolved from here and shown relative to it. */
  cwd: string;
  env: Record<string, string | undefined>;
  /** The rules to run; the module's own list (capabilities/index.ts) unless a test gives others. */
  policies: Policy[];
  /** The validators of the module's own objects (an Exemption); the module's unless a test gives others. */
  validators?: Validator[];
  /** Answers "may this ServiceAccount get these secrets?" from the snapshot's RBAC objects. */
  rbac?: RbacEvaluator;
}

export async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(chunks).toString("utf8");
}
