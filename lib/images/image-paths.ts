// Paths in an image's layered filesystem, resolved as overlayfs shows them to the container: the
// layers read from the top down, the first that has a path answers, a whiteout (`.wh.<name>`)
// hides the name below it, an opaque marker (`.wh..wh..opq`) everything below in its directory.
// Symlinks and hardlinks resolve inside the image only (`..` stops at its root, absolute targets
// start there), at most MAX_LINK_HOPS of them. Pure: what each layer said comes in as data.
import type { EntryType } from "./tar";
import type { GroupEntry, PasswdEntry } from "./passwd";

/** Links followed in one path at most (Linux follows 40; images need one or two). */
export const MAX_LINK_HOPS = 8;

/**
 * What a path is read for: its content (parsed), only its type, owner and mode, or those and a
 * summary of everything under it (a directory's "tree").
 */
export type Role = "passwd" | "group" | "meta" | "tree";

/** What one layer holds under a directory: its files' bytes, entries, and those "other" may not read. */
export interface TreeCount {
  bytes: number;
  entries: number;
  unreadable: number;
}

export interface PathNode {
  type: EntryType;
  uid: number;
  gid: number;
  mode: number;
  /** A symlink's target, or the archive path a hardlink names. */
  link?: string;
  users?: PasswdEntry[];
  groups?: GroupEntry[];
  /** A passwd or group file over the size read. */
  tooLarge?: boolean;
}

/** What one layer says of the paths it was read for (kept per layer digest, never its bytes). */
export interface LayerFindings {
  /** Each path the layer was read for, and for what (a path's parents are read with it). */
  covered: ReadonlyMap<string, Role>;
  nodes: ReadonlyMap<string, PathNode>;
  whiteouts: ReadonlySet<string>;
  /** Directories marked opaque. */
  opaque: ReadonlySet<string>;
  /** For each path read as a "tree": what the layer holds under it. */
  trees?: ReadonlyMap<string, TreeCount>;
}

/** "/a/./b/../c" → ["a", "c"]; `..` at the root stays at the root. */
export function components(path: string): string[] {
  const out: string[] = [];
  for (const part of path.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") out.pop();
    else out.push(part);
  }
  return out;
}

export const clean = (path: string) => `/${components(path).join("/")}`;

/**
 * An archive member's name as an absolute path ("./etc/passwd" → "/etc/passwd"); undefined for a
 * name with a `..` part (a layer that writes outside its root is not believed).
 */
export function archivePath(name: string): string | undefined {
  if (name.split("/").includes("..")) return undefined;
  return clean(name);
}

/** "/a/b/c" → ["/", "/a", "/a/b"]. */
export function parentsOf(path: string): string[] {
  const parts = components(path);
  return parts.map((_, i) => `/${parts.slice(0, i).join("/")}`);
}

export const parentOf = (path: string) => {
  const parents = parentsOf(path);
  return parents.length ? parents[parents.length - 1] : "/";
};

/** Whether a layer was read for `path` in `role` (a content role covers "meta" too). */
export function covers(layer: LayerFindings, path: string, role: Role): boolean {
  const had = layer.covered.get(path);
  return had !== undefined && (role === "meta" || had === role);
}

export type NodeAnswer =
  | { found: PathNode }
  | { absent: true }
  /** Layer `layer` (0: the top) must be read for `path` first. */
  | { need: { layer: number; path: string; role: Role } };

/** One path (no links followed) in the merged view of the layers, top first. */
export function lookupNode(layers: LayerFindings[], path: string, role: Role): NodeAnswer {
  const parents = parentsOf(path);
  for (let i = 0; i < layers.length; i++) {
    const layer = layers[i];
    if (!covers(layer, path, role)) return { need: { layer: i, path, role } };
    const node = layer.nodes.get(path);
    if (node) return { found: node };
    if (layer.whiteouts.has(path)) return { absent: true };
    // A parent removed, made opaque or replaced by a non-directory here hides what lies below.
    for (const parent of parents) {
      if (layer.whiteouts.has(parent) || layer.opaque.has(parent)) return { absent: true };
      const above = layer.nodes.get(parent);
      if (above && above.type !== "directory") return { absent: true };
    }
  }
  return { absent: true };
}

export type PathAnswer =
  | { found: PathNode; path: string }
  | { absent: string }
  | { loop: string }
  | { need: { layer: number; path: string; role: Role } };

/** A path followed through links to what it names, in the image. */
export function resolvePath(layers: LayerFindings[], path: string, role: Role): PathAnswer {
  let pending = components(path);
  let current = "/";
  let hops = 0;
  while (pending.length) {
    const part = pending.shift()!;
    if (part === ".") continue;
    if (part === "..") {
      current = parentOf(current);
      continue;
    }
    const next = current === "/" ? `/${part}` : `${current}/${part}`;
    const last = pending.length === 0;
    const answer = lookupNode(layers, next, last ? role : "meta");
    if ("need" in answer) return answer;
    if ("absent" in answer) return { absent: next };
    const node = answer.found;
    if (node.type === "symlink" || node.type === "hardlink") {
      if (++hops > MAX_LINK_HOPS) return { loop: clean(path) };
      const target = node.link ?? "";
      // A hardlink names an archive path (from the root); a symlink is relative to its directory
      // unless absolute. Either way `..` stops at the image's root.
      if (node.type === "hardlink" || target.startsWith("/")) current = "/";
      pending = [...target.split("/").filter(p => p !== "" && p !== "."), ...pending];
      continue;
    }
    if (!last && node.type !== "directory") return { absent: next };
    current = next;
    if (last) return { found: node, path: current };
  }
  // The path named the root itself (or links led there).
  const root = lookupNode(layers, "/", role);
  if ("need" in root) return root;
  return "found" in root ? { found: root.found, path: "/" } : { absent: "/" };
}
