// A process logging through a pino logger made as Pepr makes its own (pino's defaults: stdout),
// for test/unit/pepr/bounded-log.test.ts. argv: <bounded|default> <what>
//   burst:   a child logger made first (as Pepr's per-binding loggers), then 50 lines, then exit
//   one:     one line, then stay until stdin closes
//   flood:   24 MiB of lines while the parent does not read; report the buffer on stderr, then wait
//            for stdin to close (the parent reads stdout again first: the exit flushes the rest)
import { installBoundedLog } from "../../lib/pepr/bounded-log";
import { fromPepr } from "../../lib/pepr/from-pepr";

type Logger = {
  warn(obj: object, msg?: string): void;
  child(bindings: object): Logger;
} & Record<symbol, { _len?: number; on(event: string, f: () => void): void }>;
const pino = fromPepr("pino") as {
  pino(): Logger;
  symbols: { streamSym: symbol };
};

const [mode, what] = process.argv.slice(2);
const log = pino.pino();
const early = log.child({ alias: "made before" });
if (mode === "bounded" && !installBoundedLog(log)) throw new Error("not installed");
const stream = log[pino.symbols.streamSym];
const untilStdinCloses = () => {
  process.stdin.resume();
  process.stdin.on("end", () => process.exit(0));
};

if (what === "burst") {
  for (let i = 0; i < 50; i++) (i % 2 ? early : log).warn({ i }, `line ${i}`);
  process.exit(0);
} else if (what === "one") {
  log.warn({ i: 0 }, "the only line");
  untilStdinCloses();
} else if (what === "flood") {
  let dropped = 0;
  stream.on("drop", () => dropped++);
  const pad = "x".repeat(1000);
  for (let i = 0; i < 24 * 1024; i++) log.warn({ i, pad });
  process.stderr.write(JSON.stringify({ buffered: stream._len, dropped }) + "\n");
  untilStdinCloses();
}
