// Swaps the quadratic ramda `clone` Pepr copies every review with for a linear structuredClone, at
// start-up. Why: docs/adr/0013-mend-pepr-at-start-up.md
import { createRequire } from "node:module";

const SWAPPED = Symbol.for("admission-guard.linear-clone");

type Clone = ((value: unknown) => unknown) & { [SWAPPED]?: true };

/** A deep copy in linear time; ramda's own for what structuredClone would copy differently. */
export function linearClone(original: Clone): Clone {
  const clone: Clone = value => {
    if (value === null || typeof value !== "object") return original(value);
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== Array.prototype && proto !== null)
      return original(value);
    try {
      return structuredClone(value);
    } catch {
      return original(value); // a function or a symbol inside: ramda keeps them by reference
    }
  };
  clone[SWAPPED] = true;
  return clone;
}

/**
 * Replaces `clone` in the ramda that Pepr resolves. Idempotent; false (nothing changed) when
 * Pepr's ramda cannot be found or its clone cannot be replaced.
 */
export function installLinearClone(): boolean {
  let ramda: { clone?: Clone };
  try {
    ramda = createRequire(require.resolve("pepr"))("ramda");
  } catch {
    return false;
  }
  const original = ramda.clone;
  if (typeof original !== "function") return false;
  if (original[SWAPPED]) return true;
  try {
    ramda.clone = linearClone(original);
  } catch {
    return false;
  }
  return ramda.clone !== original;
}
