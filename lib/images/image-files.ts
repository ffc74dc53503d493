// What an image's files say about who it runs as: /etc/passwd, /etc/group and WORKDIR's owner,
// read from its layers top-down through the registry session the config came through (the same
// egress policy, deadline and credentials), every layer streamed (gzip through node's zlib, or
// plain tar), never buffered, bounded in bytes per image (compressed and uncompressed), in layer
// reads at once per process, and by a decompression-ratio guard. What a layer said is kept per
// layer digest (verified), so a layer read once serves every image that shares it.
// Why: docs/adr/0032-image-files-read-bounded.md
import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import { createGunzip } from "node:zlib";
import {
  archivePath,
  clean,
  parentsOf,
  resolvePath,
  type LayerFindings,
  covers,
  type PathNode,
  type Role,
  type TreeCount,
} from "./image-paths";
import { bounded, BoundedMap, type LookupLimits } from "./limits";
import { MAX_ACCOUNT_FILE_BYTES, parseGroup, parsePasswd, resolveUser } from "./passwd";
import { TarReader, type TarEntry } from "./tar";

/** What the rules read of an image's files (kept in the config cache with the config). */
export interface ImageFiles {
  /** The config's User in numbers, from the image's own files. */
  user?: { uid: number; gid?: number; home?: string };
  /** WORKDIR's owner and mode, when it was read. */
  workdir?: { uid: number; gid: number; mode: number };
  /** Whether the image has an executable /bin/cp (a root image's files are read for it). */
  copier?: boolean;
  /**
   * What lies under WORKDIR, over every layer down to one that hides it: bytes of its files (an
   * upper bound: a file a layer replaces counts twice) and entries no "other" may read.
   */
  workdirTree?: WorkdirTree;
  /**
   * A root image's Env-named cache and data directories (config-shapes.ts) as its layers have
   * them: owner and mode of a directory, null where nothing is (the runtime would make it, root's).
   */
  dirs?: [path: string, owner: { uid: number; gid: number; mode: number } | null][];
  /** Why the user (or WORKDIR) could not be resolved, bounded. */
  note?: string;
  /** The note is about this moment (time, load), not the image: not kept for long. */
  transient?: boolean;
}

/** Files not readable, directories not readable or searchable, by "other" count as unreadable. */
export type WorkdirTree = TreeCount;

/** A layer as the manifest lists it. */
export interface LayerRef {
  digest: string;
  mediaType: string;
  size?: number;
}

/** How many bytes one image's layer reads may use, and the cache they share. */
export interface FilesOptions {
  /** Compressed bytes read from the registry per image, over all its layer reads. */
  maxBytes: number;
  /** Bytes after decompression per image. */
  maxUncompressedBytes: number;
  cache: LayerCache;
  /** The credential source's cache key part, when a pod's own credentials read it. */
  ownKey?: string;
  /** Also read a root image's WORKDIR (owner, mode, what lies under it) and /bin/cp. */
  rootWorkdir?: boolean;
  /** Also read a root image's Env-named cache directories (owner and mode, or absent). */
  rootDirs?: boolean;
}

/** What the files are read for: the config's User and WorkingDir, and a root image's cache dirs. */
export interface FilesFor {
  user: string;
  workingDir: string;
  dirs?: readonly string[];
}

/** Layers in a manifest read at most (overlayfs stacks 128 at most). */
export const MAX_LAYERS = 128;
/** Layer reads at once, process-wide: each holds a socket, an inflater and a chunk or two. */
export const MAX_LAYER_READS = 4;
/** Past this many bytes out, more than this many out per byte in is a bomb, not a layer. */
export const MAX_RATIO = 200;
const RATIO_FROM = 1024 * 1024;
const INFLATE_CHUNK = 64 * 1024;

/** A reason the files were not read: said to the user as the note. */
export class NotRead extends Error {
  constructor(
    message: string,
    readonly transient = false,
  ) {
    super(message);
  }
}

// Sizes as V8 holds them, roughly: strings two bytes a character, objects a few words.
const nodeSize = (path: string, n: PathNode) =>
  2 * path.length +
  64 +
  (n.link ? 2 * n.link.length : 0) +
  (n.users ?? []).reduce((s, u) => s + 2 * (u.name.length + u.home.length) + 48, 0) +
  (n.groups ?? []).reduce((s, g) => s + 2 * g.name.length + 32, 0);
export const findingsSize = (key: string, f: LayerFindings) =>
  2 * key.length +
  [...f.covered.keys(), ...f.whiteouts, ...f.opaque].reduce((s, p) => s + 2 * p.length + 16, 0) +
  [...f.nodes].reduce((s, [p, n]) => s + nodeSize(p, n), 0) +
  [...(f.trees?.keys() ?? [])].reduce((s, p) => s + 2 * p.length + 48, 0);

/** What layers said, by digest (and credential source), bounded by entries and bytes. */
export class LayerCache {
  readonly map: BoundedMap<string, LayerFindings>;
  constructor(maxEntries = 2000, maxBytes = 4 * 1024 * 1024) {
    this.map = new BoundedMap(maxEntries, maxBytes, findingsSize);
  }
  get(digest: string, own?: string): LayerFindings | undefined {
    return (
      this.map.get(own ? `${digest}|${own}` : digest) ?? (own ? this.map.get(digest) : undefined)
    );
  }
  set(digest: string, own: string | undefined, findings: LayerFindings): void {
    this.map.set(own ? `${digest}|${own}` : digest, findings);
  }
}

const EMPTY: LayerFindings = {
  covered: new Map(),
  nodes: new Map(),
  whiteouts: new Set(),
  opaque: new Set(),
};

let layerReads = 0;

/** Whether the config's User needs the image's files to be put in numbers. */
export function userNeedsFiles(user: string): boolean {
  const [name, group] = user.split(":", 2);
  const numeric = (s: string) => /^\d{1,10}$/.test(s);
  if (name === "" || name === "root") return false;
  return !numeric(name) || (group !== undefined && group !== "" && !numeric(group));
}

/** Whether the config's User is root (unset, "root", 0, "0:..."). */
export function isRootUser(user: string): boolean {
  const name = user.split(":", 2)[0];
  return name === "" || name === "root" || (/^\d{1,10}$/.test(name) && Number(name) === 0);
}

/** Whether the image's files are read: a named User, or (when asked) a root image's WORKDIR. */
export function filesNeeded(
  config: FilesFor,
  options: Pick<FilesOptions, "rootWorkdir" | "rootDirs">,
): boolean {
  if (userNeedsFiles(config.user)) return true;
  if (!isRootUser(config.user)) return false;
  if (options.rootDirs && config.dirs?.length) return true;
  return !!options.rootWorkdir && !!config.workingDir && clean(config.workingDir) !== "/";
}

/** The copier a root image's WORKDIR copy runs (capabilities/security-context/workdir-copy.ts). */
export const COPIER_PATH = "/bin/cp";

/** The layers a manifest lists (bottom first); undefined when they are not valid. */
export function layersOf(manifest: Record<string, unknown>): LayerRef[] | undefined {
  const list = manifest.layers;
  if (!Array.isArray(list)) return undefined;
  const out: LayerRef[] = [];
  for (const item of list.slice(0, MAX_LAYERS + 1)) {
    const l = (item && typeof item === "object" ? item : {}) as Record<string, unknown>;
    if (typeof l.digest !== "string" || !/^sha256:[0-9a-f]{64}$/.test(l.digest)) return undefined;
    out.push({
      digest: l.digest,
      mediaType: typeof l.mediaType === "string" ? l.mediaType : "",
      ...(typeof l.size === "number" && l.size >= 0 ? { size: l.size } : {}),
    });
  }
  return out;
}

/** Fetches a blob (the session's GET, under its deadline and policy). */
export type BlobGet = (digest: string) => Promise<Response>;

/**
 * Reads one layer for `wanted` (and their parents), streaming it; what it says of them. Throws
 * NotRead when the layer cannot or may not be read.
 */
export async function scanLayer(
  layer: LayerRef,
  wanted: ReadonlyMap<string, Role>,
  get: BlobGet,
  budget: { bytes: number; uncompressed: number },
  limits: LookupLimits,
  /** The lookup's deadline: when it fired, the layer was not read in time (whatever broke). */
  signal?: AbortSignal,
): Promise<LayerFindings> {
  if (/zstd/i.test(layer.mediaType))
    throw new NotRead("a layer is compressed with zstd, which the module does not read");
  if (!/tar/i.test(layer.mediaType))
    throw new NotRead(`a layer of media type "${bounded(layer.mediaType, 80)}" is not read`);
  if (layer.size !== undefined && layer.size > budget.bytes)
    throw new NotRead(overBytes(layer.size, budget.bytes));
  if (layerReads >= MAX_LAYER_READS)
    throw new NotRead("the module is reading too many layers at once", true);
  layerReads++;
  const covered = new Map<string, Role>();
  for (const [path, role] of wanted) {
    for (const parent of parentsOf(path)) if (!covered.has(parent)) covered.set(parent, "meta");
    covered.set(path, role);
  }
  const nodes = new Map<string, PathNode>();
  const whiteouts = new Set<string>();
  const opaque = new Set<string>();
  const trees = new Map<string, TreeCount>();
  for (const [path, role] of wanted)
    if (role === "tree") trees.set(path, { bytes: 0, entries: 0, unreadable: 0 });
  const tar = new TarReader({
    entry(e: TarEntry): number {
      const path = archivePath(e.name);
      if (!path) return 0;
      const slash = path.lastIndexOf("/");
      const base = path.slice(slash + 1);
      const dir = slash === 0 ? "/" : path.slice(0, slash);
      if (base.startsWith(".wh.")) {
        if (base === ".wh..wh..opq") {
          if (covered.has(dir)) opaque.add(dir);
        } else {
          const hidden = dir === "/" ? `/${base.slice(4)}` : `${dir}/${base.slice(4)}`;
          if (covered.has(hidden)) whiteouts.add(hidden);
        }
        return 0;
      }
      // Whiteouts are markers, not files: only what the copy would meet is counted.
      for (const [dir, count] of trees) {
        if (!path.startsWith(dir === "/" ? "/" : `${dir}/`) || path === dir) continue;
        count.entries++;
        if (e.type === "file") {
          count.bytes += e.size;
          if ((e.mode & 0o004) === 0) count.unreadable++;
        } else if (e.type === "directory" && (e.mode & 0o005) !== 0o005) count.unreadable++;
      }
      const role = covered.get(path);
      if (role === undefined) return 0;
      const node: PathNode = { type: e.type, uid: e.uid, gid: e.gid, mode: e.mode };
      if (e.type === "symlink" || e.type === "hardlink") node.link = e.linkname;
      // A later entry of the same name replaces an earlier one, as extracting the layer would.
      nodes.set(path, node);
      if (role === "meta" || role === "tree" || e.type !== "file") return 0;
      if (e.size > MAX_ACCOUNT_FILE_BYTES) {
        node.tooLarge = true;
        return 0;
      }
      return Math.max(1, e.size);
    },
    data(e: TarEntry, kept: Buffer): void {
      const path = archivePath(e.name)!;
      const node = nodes.get(path);
      if (!node) return;
      const text = kept.toString("utf8");
      if (covered.get(path) === "passwd") node.users = parsePasswd(text);
      else node.groups = parseGroup(text);
    },
  });

  const hash = createHash("sha256");
  let compressed = 0;
  let uncompressed = 0;
  let raw: Readable | undefined;
  let out: Readable | undefined;
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  try {
    const res = await get(layer.digest);
    reader = res.body?.getReader();
    if (!reader) throw new NotRead("a layer came without a body");
    const declared = Number(res.headers.get("content-length"));
    if (Number.isFinite(declared) && declared > budget.bytes)
      throw new NotRead(overBytes(declared, budget.bytes));
    const body = reader;
    const take = async (): Promise<Buffer | undefined> => {
      const { done, value } = await body.read();
      if (done) return undefined;
      compressed += value.byteLength;
      if (compressed > budget.bytes) throw new NotRead(overBytes(compressed, budget.bytes));
      hash.update(value);
      return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    };
    const first = await take();
    const gzip = first !== undefined && first[0] === 0x1f && first[1] === 0x8b;
    if (first && first.readUInt32LE(0) === 0xfd2fb528)
      throw new NotRead("a layer is compressed with zstd, which the module does not read");
    async function* source() {
      if (first) yield first;
      for (let chunk = await take(); chunk; chunk = await take()) yield chunk;
    }
    raw = Readable.from(source(), { objectMode: false });
    if (gzip) {
      const inflate = createGunzip({ chunkSize: INFLATE_CHUNK });
      raw.on("error", e => inflate.destroy(e as Error));
      out = raw.pipe(inflate);
    } else out = raw;
    for await (const chunk of out as AsyncIterable<Buffer>) {
      // The bytes in flight count against the process's cap while the reader holds them.
      if (!limits.take(chunk.length))
        throw new NotRead("the module holds too many bytes of images at once", true);
      try {
        uncompressed += chunk.length;
        if (uncompressed > budget.uncompressed)
          throw new NotRead(
            `a layer decompresses past ${budget.uncompressed} bytes (images.layerBytesUncompressed)`,
          );
        if (uncompressed > RATIO_FROM && uncompressed > MAX_RATIO * compressed)
          throw new NotRead(`a layer decompresses over ${MAX_RATIO} times its size`);
        tar.push(chunk);
      } finally {
        limits.give(chunk.length);
      }
    }
  } catch (e) {
    if (e instanceof NotRead) throw e;
    const error = e as { name?: string; message?: string; code?: string };
    if (signal?.aborted || error?.name === "AbortError" || error?.name === "TimeoutError")
      throw new NotRead("the layers were not read in time", true);
    throw new NotRead(`a layer could not be read (${bounded(error?.message ?? String(e), 120)})`);
  } finally {
    budget.bytes -= compressed;
    budget.uncompressed -= uncompressed;
    layerReads--;
    out?.destroy();
    raw?.destroy();
    await reader?.cancel().catch(() => {});
  }
  const digest = `sha256:${hash.digest("hex")}`;
  if (digest !== layer.digest)
    throw new NotRead(`a layer's digest is ${digest}, not ${layer.digest}`);
  return { covered, nodes, whiteouts, opaque, ...(trees.size ? { trees } : {}) };
}

const overBytes = (n: number, left: number) =>
  `the layers to read are over the bytes left for this image (${n} > ${left}; images.layerBytes)`;

/** Two layer findings as one (the second read for more paths). */
function merge(a: LayerFindings, b: LayerFindings): LayerFindings {
  const covered = new Map(a.covered);
  // A path read for more than its metadata stays so when a later read wanted only that.
  for (const [path, role] of b.covered)
    if (role !== "meta" || !covered.has(path)) covered.set(path, role);
  const trees = new Map([...(a.trees ?? []), ...(b.trees ?? [])]);
  return {
    covered,
    nodes: new Map([...a.nodes, ...b.nodes]),
    whiteouts: new Set([...a.whiteouts, ...b.whiteouts]),
    opaque: new Set([...a.opaque, ...b.opaque]),
    ...(trees.size ? { trees } : {}),
  };
}

/**
 * For a tree at `path`: the layers (top first) still to read for it, down to one that hides what
 * lies below (the path whited out or made opaque there); none left: what they hold, summed (an
 * upper bound: a file replaced in an upper layer counts twice, whiteouts below it are not taken off).
 */
function treeOf(findings: LayerFindings[], path: string): { need: number } | { tree: TreeCount } {
  const sum: TreeCount = { bytes: 0, entries: 0, unreadable: 0 };
  for (let i = 0; i < findings.length; i++) {
    const layer = findings[i];
    // One layer at a time from the top: an opaque one spares reading those below it.
    if (!covers(layer, path, "tree")) return { need: i };
    const count = layer.trees?.get(path);
    if (count) {
      sum.bytes += count.bytes;
      sum.entries += count.entries;
      sum.unreadable += count.unreadable;
    }
    if (layer.opaque.has(path) || layer.whiteouts.has(path)) break;
  }
  return { tree: sum };
}

/**
 * The image's files for its config's User and WorkingDir. `layers` as the manifest lists them
 * (bottom first). Never throws: what could not be read is the note.
 */
export async function readImageFiles(
  config: FilesFor,
  layers: LayerRef[],
  get: BlobGet,
  options: FilesOptions,
  limits: LookupLimits,
  signal?: AbortSignal,
): Promise<ImageFiles> {
  if (layers.length > MAX_LAYERS)
    return { note: `the image has ${layers.length} layers, over the ${MAX_LAYERS} read` };
  const top = [...layers].reverse();
  const findings = top.map(l => options.cache.get(l.digest, options.ownKey) ?? EMPTY);
  const [, group] = config.user.split(":", 2);
  // A root image: no user to resolve; its WORKDIR, what lies under it, and a copier.
  const root = isRootUser(config.user);
  const workdir =
    config.workingDir && clean(config.workingDir) !== "/" ? clean(config.workingDir) : undefined;
  const targets: [string, Role][] = [
    // /usr/bin/cp too: where /bin is a link to usr/bin, following it needs no second read.
    ...(root
      ? ([
          [COPIER_PATH, "meta"],
          [`/usr${COPIER_PATH}`, "meta"],
        ] as [string, Role][])
      : [["/etc/passwd", "passwd"] as [string, Role]]),
    ...(!root && group && !/^\d+$/.test(group) ? [["/etc/group", "group"] as [string, Role]] : []),
    // A root image's WORKDIR is read as a tree from the first pass: each layer is read once.
    ...(workdir ? [[workdir, root ? "tree" : "meta"] as [string, Role]] : []),
    // Its cache dirs in the same pass (config-shapes.ts bounds how many).
    ...(root && options.rootDirs ? dirsOf(config).map(d => [d, "meta"] as [string, Role]) : []),
  ];
  let tree: TreeCount | undefined;
  const budget = { bytes: options.maxBytes, uncompressed: options.maxUncompressedBytes };
  const answers = new Map<string, PathAnswerSettled>();
  try {
    // Each round reads, for each layer that must answer, every path it must answer for. Links
    // add paths; MAX_LINK_HOPS and the byte budget bound the rounds.
    for (let round = 0; round < layers.length * 10 + 10; round++) {
      const needs = new Map<number, Map<string, Role>>();
      for (const [path, role] of targets) {
        const answer = resolvePath(findings, path, role);
        if ("need" in answer) {
          // A layer read for one path is read for every target at once: one pass each.
          const forLayer = needs.get(answer.need.layer) ?? new Map<string, Role>(targets);
          forLayer.set(answer.need.path, answer.need.role);
          needs.set(answer.need.layer, forLayer);
        } else answers.set(path, answer);
      }
      // A root-owned WORKDIR of a root image (found, all its links followed): what lies under it.
      const dir = workdir ? answers.get(workdir) : undefined;
      if (
        root &&
        !needs.size &&
        dir &&
        "found" in dir &&
        dir.found.type === "directory" &&
        dir.found.uid === 0
      ) {
        const under = treeOf(findings, dir.path);
        if ("need" in under) needs.set(under.need, new Map([...targets, [dir.path, "tree"]]));
        else tree = under.tree;
      }
      if (!needs.size) break;
      for (const [index, wanted] of needs) {
        const layer = top[index];
        const read = await scanLayer(layer, wanted, get, budget, limits, signal);
        findings[index] = merge(findings[index], read);
        options.cache.set(layer.digest, options.ownKey, findings[index]);
      }
    }
  } catch (e) {
    const notRead = e instanceof NotRead ? e : new NotRead(bounded(String(e), 120));
    return {
      note: bounded(`the image's files were not read: ${notRead.message}`),
      transient: notRead.transient,
    };
  }
  return summarise(config, answers, root, tree, root && options.rootDirs ? dirsOf(config) : []);
}

/** The cache dirs read: clean, not "/", not WORKDIR (read as its own target). */
function dirsOf(config: FilesFor): string[] {
  const workdir = config.workingDir ? clean(config.workingDir) : "/";
  return [...new Set((config.dirs ?? []).map(clean))].filter(d => d !== "/" && d !== workdir);
}

type PathAnswerSettled = Exclude<ReturnType<typeof resolvePath>, { need: unknown }>;

function contentOf(
  answer: PathAnswerSettled | undefined,
  file: string,
): { ok: true; node?: PathNode } | { ok: false; problem: string } {
  if (!answer || "absent" in answer) return { ok: true };
  if ("loop" in answer) return { ok: false, problem: `${file} is a loop of links` };
  if (answer.found.tooLarge)
    return { ok: false, problem: `${file} is over ${MAX_ACCOUNT_FILE_BYTES} bytes; not read` };
  if (answer.found.type !== "file") return { ok: false, problem: `${file} is not a file` };
  return { ok: true, node: answer.found };
}

function summarise(
  config: FilesFor,
  answers: Map<string, PathAnswerSettled>,
  root: boolean,
  tree: TreeCount | undefined,
  dirs: string[],
): ImageFiles {
  const out: ImageFiles = {};
  const owners: NonNullable<ImageFiles["dirs"]> = [];
  for (const dir of dirs) {
    const answer = answers.get(dir);
    // A file or a loop there: neither read as writable nor absent (nothing is mounted over it).
    if (answer && "absent" in answer) owners.push([dir, null]);
    else if (answer && "found" in answer && answer.found.type === "directory")
      owners.push([dir, { uid: answer.found.uid, gid: answer.found.gid, mode: answer.found.mode }]);
  }
  if (owners.length) out.dirs = owners;
  if (root) {
    const cp = answers.get(COPIER_PATH);
    out.copier = !!cp && "found" in cp && cp.found.type === "file" && (cp.found.mode & 0o001) !== 0;
    if (tree) out.workdirTree = tree;
  }
  const passwd = root
    ? { ok: true as const }
    : contentOf(answers.get("/etc/passwd"), "/etc/passwd");
  const group = contentOf(answers.get("/etc/group"), "/etc/group");
  if (!passwd.ok) out.note = passwd.problem;
  else if (!group.ok) out.note = group.problem;
  else if (!root) {
    const resolved = resolveUser(config.user, passwd.node?.users, group.node?.groups);
    if (resolved.ok)
      out.user = {
        uid: resolved.uid,
        ...(resolved.gid !== undefined ? { gid: resolved.gid } : {}),
        ...(resolved.home ? { home: bounded(resolved.home) } : {}),
      };
    else out.note = bounded(resolved.problem);
  }
  if (config.workingDir && clean(config.workingDir) !== "/") {
    const dir = answers.get(clean(config.workingDir));
    if (dir && "found" in dir && dir.found.type === "directory")
      out.workdir = { uid: dir.found.uid, gid: dir.found.gid, mode: dir.found.mode };
  }
  return out;
}
