// A package as Pepr itself loads it (resolved from Pepr's location), so that a start-up mend
// changes the very instance Pepr uses: its express, ramda, pino.
import { createRequire } from "node:module";

/** Pepr's own copy of a package; undefined where Pepr or the package cannot be found. */
export function fromPepr<T>(name: string): T | undefined {
  try {
    return createRequire(require.resolve("pepr"))(name) as T;
  } catch {
    return undefined;
  }
}
