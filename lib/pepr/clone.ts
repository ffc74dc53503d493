// Swaps the quadratic ramda `clone` Pepr copies every review with for a linear copy, at start-up.
// Why: docs/adr/0013-mend-pepr-at-start-up.md
import { fromPepr } from "./from-pepr";

const SWAPPED = Symbol.for("admission-guard.linear-clone");

type Clone = ((value: unknown) => unknown) & { [SWAPPED]?: true };

/** What plainCopy throws on anything but JSON's own values, or past its bounds. */
const NOT_PLAIN = Symbol("not plain data");
/** Deeper than a Kubernetes object nests; a cycle or a hostile nest goes to structuredClone. */
const MAX_DEPTH = 128;
/**
 * More values than a 3 MiB body holds: an object sharing its parts (never one parsed from JSON)
 * would be copied once per path to each; structuredClone copies it once.
 */
const MAX_VALUES = 2_000_000;
let valuesLeft = 0;

/**
 * A deep copy of JSON's own values (what a review's object is: parsed from the request body), in
 * one walk: several times faster than structuredClone on a pod (docs/bench.md). Throws NOT_PLAIN
 * on anything else, for structuredClone to copy.
 */
function plainCopy(value: unknown, depth: number): unknown {
  if (value === null || typeof value !== "object") {
    if (typeof value === "function" || typeof value === "symbol" || typeof value === "bigint")
      throw NOT_PLAIN;
    return value;
  }
  if (depth > MAX_DEPTH || --valuesLeft < 0) throw NOT_PLAIN;
  if (Array.isArray(value)) {
    if (Object.getPrototypeOf(value) !== Array.prototype) throw NOT_PLAIN;
    const copy = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) copy[i] = plainCopy(value[i], depth + 1);
    return copy;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) throw NOT_PLAIN;
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    const item = plainCopy((value as Record<string, unknown>)[key], depth + 1);
    // JSON.parse makes "__proto__" an own key; assigning it would set the copy's prototype.
    if (key === "__proto__")
      Object.defineProperty(copy, key, {
        value: item,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    else copy[key] = item;
  }
  return copy;
}

/**
 * A deep copy in linear time: JSON's values in one walk, else structuredClone; ramda's own for
 * what structuredClone would copy differently (a function or a symbol inside, a class instance).
 */
export function linearClone(original: Clone): Clone {
  const clone: Clone = value => {
    if (value === null || typeof value !== "object") return original(value);
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== Array.prototype && proto !== null)
      return original(value);
    try {
      valuesLeft = MAX_VALUES;
      return plainCopy(value, 0);
    } catch (e) {
      if (e !== NOT_PLAIN) throw e;
    }
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
  const ramda = fromPepr<{ clone?: Clone }>("ramda");
  if (!ramda) return false;
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
