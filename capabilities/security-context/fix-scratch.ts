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

/**
 * The emptyDir volume for a writable path: the one already in the pod under our name (shared by
 * every container), or a new one. A user's volume of another type under that name is never reused.
 */
function scratchVolume(ctx: FixContext, path: string, rule: string): string {
  const { template, spec, rec } = ctx;
  const volumes = (spec.volumes ??= []) as unknown[];
  const base = scratchVolumeName(path);
  for (let i = 1; ; i++) {
    const name = i === 1 ? base : `${base.slice(0, 60 - String(i).length)}-${i}`;
    const existing = volumes.map(asObject).find(v => v?.name === name);
    if (existing && asObject(existing.emptyDir)) return name;
    if (existing) continue;
    const volume = { name, emptyDir: {} };
    volumes.push(volume);
    rec.changes.push({
      rule,
      message: `${fieldPath(template, "spec.volumes")}[${volumes.length - 1}]=${JSON.stringify(volume)}`,
    });
    return name;
  }
}
