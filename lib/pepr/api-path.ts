// Pepr's secret API path, read once, as Pepr's controller reads it: the admission reviews' only
// credential (requests go to /mutate/<path> and /validate/<path>).
import { readFileSync } from "node:fs";

let read: { path: string | undefined } | undefined;

/**
 * PEPR_API_PATH, else the mounted Secret (Pepr 1.1.4's startServer reads the same two, in this
 * order); undefined where there is none (the watcher, a test without one). Read on the first call
 * only: the Secret is mounted before the process starts and Pepr, too, reads it once.
 */
export function peprApiPath(): string | undefined {
  read ??= { path: readApiPath() };
  return read.path;
}

function readApiPath(): string | undefined {
  try {
    return process.env.PEPR_API_PATH || readFileSync("/app/api-path/value", "utf8").trim();
  } catch {
    return undefined;
  }
}
