// What every subcommand does before its own work: strict options (an unknown one is a usage
// error, exit 2, with a pointer to --help), and --help.
import { parseArgs, type ParseArgsConfig } from "node:util";
import type { CliIO } from "./io";

export class UsageError extends Error {}

type Options = NonNullable<ParseArgsConfig["options"]>;
type Strict<O extends Options> = {
  args: string[];
  allowPositionals: true;
  strict: true;
  options: O;
};

/** The options and positionals of a command line; a bad option is a UsageError. */
export function commandArgs<O extends Options>(
  argv: string[],
  options: O,
): ReturnType<typeof parseArgs<Strict<O>>> {
  try {
    return parseArgs({
      args: argv,
      allowPositionals: true as const,
      strict: true as const,
      options,
    });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

/**
 * The command's options, or the exit code when it ends here: 2 after a usage error (said on
 * stderr), 0 after printing its usage for --help.
 */
export function startCommand<O extends { help: boolean }>(
  name: string,
  usage: string,
  parse: () => O,
  io: CliIO,
): O | number {
  let opts: O;
  try {
    opts = parse();
  } catch (e) {
    io.stderr.write(`admission-guard ${name}: ${(e as Error).message}\n`);
    io.stderr.write(`Run admission-guard ${name} --help for usage.\n`);
    return 2;
  }
  if (!opts.help) return opts;
  io.stdout.write(usage);
  return 0;
}
