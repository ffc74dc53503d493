// Image layers for tests, as registries serve them: tar archives written two ways — by GNU tar
// itself (ustar, pax and GNU formats, owners set with chown: what real builders write), and by a
// small writer of our own for what no honest tool writes (hostile sizes, endless archives) — plain
// or gzip, and multi-layer images on the tests' registry.
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { gzipSync } from "node:zlib";
import type { TestRegistry } from "./registry";

export interface LayerFile {
  /** Relative to the root ("etc/passwd"). */
  path: string;
  /** A file's text; a directory when absent (and no link). */
  content?: string;
  symlink?: string;
  /** Another path of the same layer, relative to the root. */
  hardlink?: string;
  /** A file's content from this machine (a symlink is followed). */
  copyFrom?: string;
  /** A whole directory tree from this machine, copied as it is (owners, modes, links). */
  copyTree?: string;
  uid?: number;
  gid?: number;
  mode?: number;
}

/** Stages `files` under `root` as a builder would leave them (needs root for the owners). */
export function stageLayer(root: string, files: LayerFile[]): void {
  for (const f of files) {
    const target = join(root, f.path);
    mkdirSync(dirname(target), { recursive: true });
    if (f.copyTree !== undefined) {
      execFileSync("cp", ["-a", f.copyTree, target]);
      continue; // owners and modes as they are on this machine
    }
    if (f.symlink !== undefined) symlinkSync(f.symlink, target);
    else if (f.hardlink !== undefined) execFileSync("ln", [join(root, f.hardlink), target]);
    else if (f.copyFrom !== undefined) copyFileSync(f.copyFrom, target);
    else if (f.content !== undefined) writeFileSync(target, f.content);
    else mkdirSync(target, { recursive: true });
    if (f.hardlink !== undefined) continue; // the same inode as its target: owned as it is
    if (f.symlink === undefined) {
      const file = f.content !== undefined || f.copyFrom !== undefined;
      chmodSync(target, f.mode ?? (file ? 0o644 : 0o755));
      chownSync(target, f.uid ?? 0, f.gid ?? 0);
    } else execFileSync("chown", ["-h", `${f.uid ?? 0}:${f.gid ?? 0}`, target]);
  }
}

/** Packs a staged tree into the tar `out`: sorted names, fixed times, numeric owners (reproducible). */
export function packLayer(
  root: string,
  out: string,
  format: "gnu" | "pax" | "ustar" = "pax",
): void {
  execFileSync("tar", [
    `--format=${format}`,
    "--numeric-owner",
    "--sort=name",
    "--mtime=@0",
    "-C",
    root,
    "-cf",
    out,
    ".",
  ]);
}

/** A layer packed by GNU tar from a staged tree (needs root for the owners: the tests run as root). */
export function gnuTar(files: LayerFile[], format: "gnu" | "pax" | "ustar" = "pax"): Buffer {
  const work = mkdtempSync(join(tmpdir(), "layer-"));
  const root = join(work, "root");
  mkdirSync(root);
  try {
    stageLayer(root, files);
    const out = join(work, "layer.tar");
    packLayer(root, out, format);
    return readFileSync(out);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** One ustar header block for what a test says, checksum right (sizes may lie). */
export function header(e: {
  name: string;
  type?: string;
  size?: number;
  uid?: number;
  gid?: number;
  mode?: number;
  linkname?: string;
}): Buffer {
  const block = Buffer.alloc(512);
  const octal = (n: number, len: number) => n.toString(8).padStart(len - 1, "0") + "\0";
  block.write(e.name.slice(0, 100), 0, "utf8");
  block.write(octal(e.mode ?? 0o644, 8), 100, "latin1");
  block.write(octal(e.uid ?? 0, 8), 108, "latin1");
  block.write(octal(e.gid ?? 0, 8), 116, "latin1");
  block.write(octal(e.size ?? 0, 12), 124, "latin1");
  block.write(octal(0, 12), 136, "latin1");
  block.write(e.type ?? "0", 156, "latin1");
  if (e.linkname) block.write(e.linkname, 157, "utf8");
  block.write("ustar\u000000", 257, "latin1");
  block.fill(0x20, 148, 156);
  let sum = 0;
  for (const b of block) sum += b;
  block.write(octal(sum, 7) + " ", 148, "latin1");
  return block;
}

const pad = (n: number) => Buffer.alloc((512 - (n % 512)) % 512);

/** A regular file entry: header, content, padding. */
export function fileEntry(
  name: string,
  content: string | Buffer,
  owner: { uid?: number; gid?: number } = {},
): Buffer {
  const body = Buffer.isBuffer(content) ? content : Buffer.from(content);
  return Buffer.concat([header({ name, size: body.length, ...owner }), body, pad(body.length)]);
}

export const END = Buffer.alloc(1024);

/** A layer of the given entries, ended. */
export const tarOf = (...entries: Buffer[]) => Buffer.concat([...entries, END]);

export const gzip = (layer: Buffer) => gzipSync(layer);

export const PLAIN = "application/vnd.oci.image.layer.v1.tar";
export const GZIP = "application/vnd.oci.image.layer.v1.tar+gzip";
export const ZSTD = "application/vnd.oci.image.layer.v1.tar+zstd";

/**
 * An image of these layers (bottom first) and config on the registry; returns its manifest digest.
 * A layer given as a digest already stored (a hostile body served by an override) is listed as is.
 */
export function putLayeredImage(
  registry: TestRegistry,
  repository: string,
  tag: string,
  config: Record<string, unknown>,
  layers: (
    | { body: Buffer; mediaType: string }
    | { digest: string; mediaType: string; size?: number }
  )[],
): string {
  const listed = layers.map(l =>
    "body" in l
      ? {
          mediaType: l.mediaType,
          digest: registry.putBlob(l.mediaType, l.body),
          size: l.body.length,
        }
      : {
          mediaType: l.mediaType,
          digest: l.digest,
          ...(l.size !== undefined ? { size: l.size } : {}),
        },
  );
  return registry.putManifest(repository, tag, config, listed);
}

/** /etc/passwd of a Debian-like image with the users given ("ml:1002:1002:/home/ml"). */
export function passwdOf(...users: string[]): string {
  return (
    [
      "root:x:0:0:root:/root:/bin/sh",
      "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin",
      ...users.map(u => {
        const [name, uid, gid, home] = u.split(":");
        return `${name}:x:${uid}:${gid}::${home}:/bin/sh`;
      }),
    ].join("\n") + "\n"
  );
}

/** A root-built image's bottom layer: /bin a link to usr/bin (Debian, Ubuntu), /usr/bin/cp there. */
export const ROOT_BASE_FILES: LayerFile[] = [
  { path: "usr" },
  { path: "usr/bin" },
  { path: "usr/bin/cp", content: "#!cp\n", mode: 0o755 },
  { path: "bin", symlink: "usr/bin" },
  { path: "etc" },
  { path: "etc/passwd", content: passwdOf() },
];
