// Pepr's log held within a bound while stdout does not drain, at start-up. Why:
// docs/adr/0013-mend-pepr-at-start-up.md ("The log within a bound").
import { Log } from "pepr";
import { fromPepr } from "./from-pepr";

/** The most the log holds while stdout does not drain; lines beyond it are dropped. */
export const LOG_BUFFER_MAX_BYTES = 8 * 1024 * 1024;

const BOUNDED = Symbol.for("admission-guard.bounded-log");

/** The part of pino (Pepr's logger) this needs. */
interface Pino {
  symbols?: { streamSym?: symbol };
  destination(options: {
    dest: number;
    sync: boolean;
    minLength: number;
    maxLength: number;
  }): object;
}
/** The part of sonic-boom (pino's default stream) this reads. */
interface SonicBoomLike {
  fd?: unknown;
  constructor?: { name?: string };
  [BOUNDED]?: true;
}

/**
 * Replaces the stream of Pepr's logger, when it is pino's default (stdout, written off the
 * request, unbounded), with the same but holding at most LOG_BUFFER_MAX_BYTES: a line that would
 * pass it is dropped. Child loggers made before read the stream through their parent, so they
 * write to it too. Idempotent; another stream (pino-pretty's under PEPR_PRETTY_LOGS) is left as it
 * is. False, nothing changed, when Pepr's pino cannot be found or is not shaped as 1.1.4's.
 */
export function installBoundedLog(logger: object = Log): boolean {
  const pino = fromPepr<Pino>("pino");
  const key = pino?.symbols?.streamSym;
  if (!pino || !key || typeof pino.destination !== "function") return false;
  const streams = logger as Record<symbol, SonicBoomLike | undefined>;
  const current = streams[key];
  if (!current) return false;
  if (current[BOUNDED]) return true;
  if (current.constructor?.name !== "SonicBoom" || current.fd !== 1) return true;
  // As pino's default: a line is written as soon as no write is under way (minLength 0), and what
  // is left is written when the process exits.
  const bounded = pino.destination({
    dest: 1,
    sync: false,
    minLength: 0,
    maxLength: LOG_BUFFER_MAX_BYTES,
  }) as SonicBoomLike;
  bounded[BOUNDED] = true;
  streams[key] = bounded;
  return true;
}
