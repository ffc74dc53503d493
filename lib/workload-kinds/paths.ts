// The small path language of workload kinds: `spec.pytorchReplicaSpecs.*.template`, where `*` is
// every element of a list or every value of a map. Pure, and total on untrusted input: a missing
// field or a field of the wrong type is no match, never a throw.
import { isRecord } from "../objects/record";

/** One step of a path: a field name, or "*" (every element of a list or value of a map). */
export type Segment = string;

/** Every step of a path, or why it is not one (for the setting's named error). */
export function parsePath(
  path: string,
): { ok: true; segments: Segment[] } | { ok: false; reason: string } {
  if (typeof path !== "string" || path === "")
    return { ok: false, reason: "a path must not be empty" };
  const segments = path.split(".");
  for (const s of segments) {
    if (s === "")
      return { ok: false, reason: `"${path}" has an empty step (two dots, or a dot at an end)` };
    if (s !== "*" && !/^[A-Za-z0-9_-]+$/.test(s))
      return {
        ok: false,
        reason: `"${path}" has the step "${s}": a step is a field name (letters, digits, _ and -) or *`,
      };
  }
  return { ok: true, segments };
}

/** A value found by a path: where it is (for messages) and which element each `*` stood for. */
export interface PathMatch {
  value: unknown;
  /** "spec.pytorchReplicaSpecs.Worker.template", "spec.workerGroupSpecs[0].template". */
  where: string;
  /** The list index or map key each `*` took, in order. */
  keys: (string | number)[];
}

const step = (where: string, key: string | number): string =>
  typeof key === "number"
    ? `${where}[${key}]`
    : /^[A-Za-z_][A-Za-z0-9_-]*$/.test(key)
      ? where
        ? `${where}.${key}`
        : key
      : `${where}[${JSON.stringify(key)}]`;

/** Every value the path reaches, `*` expanded, in document order. */
export function findAll(root: unknown, segments: readonly Segment[]): PathMatch[] {
  let current: PathMatch[] = [{ value: root, where: "", keys: [] }];
  for (const s of segments) {
    const next: PathMatch[] = [];
    for (const m of current) {
      if (s === "*") {
        if (Array.isArray(m.value))
          m.value.forEach((v, i) =>
            next.push({ value: v, where: step(m.where, i), keys: [...m.keys, i] }),
          );
        else if (isRecord(m.value))
          for (const [k, v] of Object.entries(m.value))
            next.push({ value: v, where: step(m.where, k), keys: [...m.keys, k] });
      } else if (isRecord(m.value) && Object.hasOwn(m.value, s)) {
        next.push({ value: m.value[s], where: step(m.where, s), keys: m.keys });
      }
    }
    current = next;
  }
  return current.filter(m => m.value !== undefined && m.value !== null);
}

/**
 * The value a path reaches with its `*`s bound to given elements (a template's replicas: the `*`
 * of `spec.tasks.*.replicas` is the task whose template it counts). A `*` beyond the keys given is
 * no match; undefined and null are no value.
 */
export function findAt(
  root: unknown,
  segments: readonly Segment[],
  keys: readonly (string | number)[],
): PathMatch | undefined {
  let value: unknown = root;
  let where = "";
  let star = 0;
  for (const s of segments) {
    if (s === "*") {
      if (star >= keys.length) return undefined;
      const key = keys[star++];
      if (typeof key === "number" ? !Array.isArray(value) : !isRecord(value)) return undefined;
      value = (value as Record<string | number, unknown>)[key];
      where = step(where, key);
    } else {
      if (!isRecord(value) || !Object.hasOwn(value, s)) return undefined;
      value = value[s];
      where = step(where, s);
    }
  }
  return value === undefined || value === null
    ? undefined
    : { value, where, keys: keys.slice(0, star) };
}

/** A path written out with its `*`s bound (for a message about a field that is absent). */
export function pathWith(segments: readonly Segment[], keys: readonly (string | number)[]): string {
  let where = "";
  let star = 0;
  for (const s of segments) where = step(where, s === "*" && star < keys.length ? keys[star++] : s);
  return where;
}
