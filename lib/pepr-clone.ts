// Pepr copies every AdmissionReview's object (and old object) with ramda's `clone` before any
// module code runs, and again before it diffs a mutation. ramda 0.32's clone remembers the objects
// it has copied in a table whose buckets are chosen by an object's keys, so objects of one shape
// share a bucket and each is compared with all before it: quadratic. A pod author's 1 MB pod with
// 35,000 alike entries (projected sources, env) costs ~12 s of CPU per copy, three copies per pod,
// before payload-size can deny it — and `--dry-run` suffices (measured: docs/threat-model.md).
//
// Pepr reads `clone` from ramda's exports on every call (`(0, import_ramda.clone)(...)`), so the
// module swaps it, at start-up, in the very ramda Pepr loads, for `structuredClone`: linear, and
// the same copy for what Pepr clones (JSON from the request, its store's string map, its own
// config). Anything structuredClone cannot copy (a function, a class instance's prototype matters)
// goes to ramda's own clone. Pepr is not bundled (see webhook-body-limit.ts), so this is the only
// place to do it that works in the controller image too.
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
