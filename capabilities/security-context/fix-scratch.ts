// Writable scratch space for a container: an emptyDir mounted at a path (HOME, writablePaths),
// one volume per path shared by every container, under a stable DNS-label name.
import { fieldPath, type ContainerRef } from "../../lib/objects/pod";
import { withoutTrailingSlashes } from "../../lib/objects/text";
import { asArray, asObject, type Obj } from "./checks/helpers";
import type { FixContext } from "./fix-context";

export function normalizePath(path: string): string {
  return withoutTrailingSlashes(path) || "/";
}

/** An emptyDir mounted at `path` in the container, unless something already covers it: whether it was. */
export function mountScratch(
  ctx: FixContext,
  ref: ContainerRef,
  path: string,
  rule: string,
): boolean {
  const container = ref.container as unknown as Obj;
  if (mountsCover(asArray(container.volumeMounts), path)) return false;
  const name = scratchVolume(ctx, path, rule);
  const list = (container.volumeMounts ??= []) as unknown[];
  const mount = { name, mountPath: path };
  list.push(mount);
  ctx.rec.changes.push({
    rule,
    message: `${ref.path}.volumeMounts[${list.length - 1}]=${JSON.stringify(mount)}`,
  });
  return true;
}

/** Whether the container already mounts something at `path` or at a directory above it. */
export function mountsCover(mounts: unknown[], path: string): boolean {
  return mounts.some(m => {
    const mountPath = asObject(m)?.mountPath;
    if (typeof mountPath !== "string") return false;
    const mp = normalizePath(mountPath);
    return mp === path || path.startsWith(mp === "/" ? "/" : `${mp}/`);
  });
}

/** A DNS label for the scratch volume of a path: "/tmp" → "ag-writable-tmp". Stable across runs. */
export function scratchVolumeName(path: string): string {
  const slug =
    path
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, "-")
      .replace(/^-+|-+$/g, "") || "root";
  return dnsLabelOf(`ag-writable-${slug}`, path);
}

/**
 * `name` when it is a DNS label's length (63) at most; else cut, with a hash of `key` so that two
 * long keys sharing a prefix never get the same name. Stable across runs.
 */
export function dnsLabelOf(name: string, key: string): string {
  if (name.length <= 63) return name;
  return `${name.slice(0, 54).replace(/-+$/, "")}-${fnv1a(key)}`;
}

function fnv1a(s: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, "0");
}

/** A pod's volumes by name (the first of each name) and the scratch name each base resolved to. */
interface VolumeIndex {
  byName: Map<string, Obj | undefined>;
  resolved: Map<string, string>;
  /** The list's length when last seen: a volume added by other code rebuilds the index. */
  length: number;
}
// Per pod (its volumes list), built once: a pod author writes the volumes and the HOME paths, so
// a search of every volume for every path and candidate name would be quadratic in them.
const indexes = new WeakMap<unknown[], VolumeIndex>();

function indexOf(volumes: unknown[]): VolumeIndex {
  let index = indexes.get(volumes);
  if (!index || index.length !== volumes.length) {
    const byName = new Map<string, Obj | undefined>();
    for (const v of volumes) {
      const name = asObject(v)?.name;
      if (typeof name === "string" && !byName.has(name)) byName.set(name, asObject(v));
    }
    indexes.set(volumes, (index = { byName, resolved: new Map(), length: volumes.length }));
  }
  return index;
}

/**
 * The emptyDir volume for a writable path: the one already in the pod under our name (shared by
 * every container), or a new one. A user's volume of another type under that name is never reused.
 * Paths whose names agree ("/x_", "/x") share the answer: it depends on the name alone.
 */
function scratchVolume(ctx: FixContext, path: string, rule: string): string {
  const { template, spec, rec } = ctx;
  const volumes = (spec.volumes ??= []) as unknown[];
  const index = indexOf(volumes);
  const base = scratchVolumeName(path);
  const known = index.resolved.get(base);
  if (known) return known;
  for (let i = 1; ; i++) {
    const name = i === 1 ? base : `${base.slice(0, 60 - String(i).length)}-${i}`;
    const existing = index.byName.get(name);
    if (existing && asObject(existing.emptyDir)) {
      index.resolved.set(base, name);
      return name;
    }
    if (index.byName.has(name)) continue;
    const volume = { name, emptyDir: {} };
    volumes.push(volume);
    index.byName.set(name, volume);
    index.length = volumes.length;
    index.resolved.set(base, name);
    rec.changes.push({
      rule,
      message: `${fieldPath(template, "spec.volumes")}[${volumes.length - 1}]=${JSON.stringify(volume)}`,
    });
    return name;
  }
}
