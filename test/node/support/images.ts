// Container images for the node tier, built from files on this machine (Debian's static busybox),
// with no registry on the internet, the way registries serve them (issue 41): several gzip layers,
// as a Dockerfile's steps would make them — a root base (busybox, its applets, /etc), then a layer
// that adds the image's user to /etc/passwd and /etc/group and makes WORKDIR and HOME with their
// owners, then (optionally) a large install layer, then the app. OCI image layout with
// tar+gzip media types and the config's rootfs.diff_ids the sha256 of each UNCOMPRESSED tar (what
// `ctr images import` and a registry's clients check), and a Docker-style manifest.json beside
// index.json so `ctr images import` names it by its tags. Each layer is a staged tree whose owners
// are set with chown (the node tier runs as root, as a kubelet must) packed by GNU tar
// (test/support/layers.ts), so an image's files belong to the UIDs the image shape says: the point
// of the node tier is which user can write what, and the module must find it in the right layer.
import { createCipheriv, createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  closeSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  renameSync,
  rmSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { GZIP, packLayer, stageLayer, type LayerFile } from "../../support/layers";

/** Where Debian's busybox-static puts its binary. */
export const BUSYBOX = "/bin/busybox";

/**
 * The layers of an image, bottom first, as a Dockerfile's steps make them: "base" (FROM a root
 * base), "user" (RUN useradd, WORKDIR: /etc/passwd and /etc/group rewritten, HOME and WORKDIR
 * made), "upper" (a large install, RUN pip install torch), "app" (COPY the code). A layer with no
 * files is left out.
 */
export const LAYERS = ["base", "user", "upper", "app"] as const;
export type LayerName = (typeof LAYERS)[number];

export interface ImageFile {
  path: string;
  /** Text content; a directory when absent and no other content is given. */
  content?: string;
  /** A file's content from this machine (a symlink is followed). */
  copyFrom?: string;
  /** A whole directory tree from this machine, copied as it is (owners, modes, links). */
  copyTree?: string;
  /** A symbolic link to this target. */
  symlink?: string;
  /** A file of this many bytes that do not compress (the same bytes every build). */
  bytes?: number;
  mode?: number;
  uid?: number;
  gid?: number;
  /** The layer that makes it; "app" when unset. */
  layer?: LayerName;
}

/** The part of an OCI image config the runtime reads (what `docker inspect` shows as Config). */
export interface ImageRuntimeConfig {
  User?: string;
  WorkingDir?: string;
  Env?: string[];
  Entrypoint?: string[];
  Cmd?: string[];
}

export interface ImageSpec {
  /** Full references, e.g. "localhost/admission-guard/probe-root:1". */
  tags: string[];
  files: ImageFile[];
  config: ImageRuntimeConfig;
}

export interface BuiltImage {
  tags: string[];
  /** The OCI image layout, packed: what `ctr -n k8s.io images import` reads. */
  archive: string;
  manifestDigest: string;
  configDigest: string;
  /** The blobs by digest (config, manifest, layers), for a registry that serves them. */
  blobs: Map<string, { mediaType: string; path: string }>;
}

const sha256 = (data: Buffer | string) => createHash("sha256").update(data).digest("hex");

/** A file's sha256, read in pieces (a layer may be larger than is wise to hold). */
function sha256File(path: string): string {
  return execFileSync("sha256sum", [path], { encoding: "utf8" }).split(" ")[0];
}

/** The busybox applets the probes use, as symlinks in /bin. */
const APPLETS = [
  "sh",
  "cat",
  // The copy of a root-built image's WORKDIR runs /bin/cp (ADR 0033), as framework images have.
  "cp",
  "echo",
  "id",
  "mkdir",
  "rm",
  "sleep",
  "pwd",
  "ls",
  "httpd",
  "wget",
  "test",
  "[",
  "env",
  "true",
  "touch",
  "stat",
];

export const ROOT_PASSWD = "root:x:0:0:root:/root:/bin/sh\n";
export const ROOT_GROUP = "root:x:0:\n";

/**
 * A minimal root base, its own layer: busybox and its applets (symlinks in /bin), /tmp (1777),
 * /root (700), and /etc/passwd and /etc/group (root's unless given).
 */
export function baseFiles(passwd = ROOT_PASSWD, group = ROOT_GROUP): ImageFile[] {
  return [
    { path: "bin", mode: 0o755 },
    { path: "bin/busybox", copyFrom: BUSYBOX, mode: 0o755 },
    ...APPLETS.map(applet => ({ path: `bin/${applet}`, symlink: "busybox" })),
    { path: "etc", mode: 0o755 },
    { path: "etc/passwd", content: passwd, mode: 0o644 },
    { path: "etc/group", content: group, mode: 0o644 },
    { path: "tmp", mode: 0o1777 },
    { path: "root", mode: 0o700 },
  ].map(f => ({ ...f, layer: "base" as const }));
}

/** A large install layer (a framework's wheels): one file of `bytes` that do not compress. */
export function largeUpperLayer(
  bytes: number,
  path = "opt/venv/lib/libtorch_cuda.so",
): ImageFile[] {
  return [{ path, bytes, mode: 0o755, layer: "upper" }];
}

/** Writes `bytes` of an AES-CTR keystream (incompressible, the same every time) to `path`. */
function writeNoise(path: string, bytes: number): void {
  const cipher = createCipheriv("aes-128-ctr", Buffer.alloc(16), Buffer.alloc(16));
  const zeros = Buffer.alloc(4 * 1024 * 1024);
  const fd = openSync(path, "w");
  try {
    for (let left = bytes; left > 0; left -= zeros.length)
      writeSync(fd, cipher.update(left >= zeros.length ? zeros : zeros.subarray(0, left)));
  } finally {
    closeSync(fd);
  }
}

/**
 * Stages one layer's files under `root`. A directory a lower layer made and this one only passes
 * through (a COPY into it) keeps that layer's owner and mode, as a builder's layer records it.
 */
function stage(root: string, files: ImageFile[], below: Map<string, ImageFile>): void {
  const staged: LayerFile[] = files.filter(f => f.bytes === undefined);
  stageLayer(root, staged);
  for (const f of files.filter(f => f.bytes !== undefined)) {
    const target = join(root, f.path);
    mkdirSync(dirname(target), { recursive: true });
    writeNoise(target, f.bytes!);
    chmodSync(target, f.mode ?? 0o644);
    chownSync(target, f.uid ?? 0, f.gid ?? 0);
  }
  const own = new Set(files.map(f => f.path));
  for (const [path, dir] of below) {
    const target = join(root, path);
    if (own.has(path) || !existsSync(target) || !lstatSync(target).isDirectory()) continue;
    chmodSync(target, dir.mode ?? 0o755);
    chownSync(target, dir.uid ?? 0, dir.gid ?? 0);
  }
}

/** One layer packed and gzipped into `blobsDir`: its digest (compressed) and diff_id (not). */
function buildLayer(
  work: string,
  blobsDir: string,
  files: ImageFile[],
  below: Map<string, ImageFile>,
) {
  const root = join(work, "rootfs");
  mkdirSync(root);
  stage(root, files, below);
  const tar = join(work, "layer.tar");
  // GNU format: no pax headers, whose names and times would differ from build to build, so the
  // same files give the same layer, shared by every image built on it (as a registry shares it).
  packLayer(root, tar, "gnu");
  rmSync(root, { recursive: true, force: true });
  const diffId = sha256File(tar);
  // -n: no name or time in the gzip header, so the same files give the same digest.
  execFileSync("gzip", ["-n", "-6", tar]);
  const digest = sha256File(`${tar}.gz`);
  const size = lstatSync(`${tar}.gz`).size;
  renameSync(`${tar}.gz`, join(blobsDir, digest));
  return { digest, diffId, size };
}

/** Builds one image into `outDir` and returns where its archive and blobs are. */
export function buildImage(spec: ImageSpec, outDir: string): BuiltImage {
  const work = mkdtempSync(join(outDir, "image-"));
  const layout = join(work, "layout");
  const blobsDir = join(layout, "blobs", "sha256");
  mkdirSync(blobsDir, { recursive: true });
  const below = new Map<string, ImageFile>();
  const layers: { name: LayerName; digest: string; diffId: string; size: number }[] = [];
  for (const name of LAYERS) {
    const files = spec.files.filter(f => (f.layer ?? "app") === name);
    if (files.length === 0) continue;
    layers.push({ name, ...buildLayer(work, blobsDir, files, below) });
    for (const f of files)
      if (
        f.content === undefined &&
        !f.copyFrom &&
        !f.copyTree &&
        !f.symlink &&
        f.bytes === undefined
      )
        below.set(f.path, f);
  }

  const config = JSON.stringify({
    architecture: "amd64",
    os: "linux",
    config: spec.config,
    rootfs: { type: "layers", diff_ids: layers.map(l => `sha256:${l.diffId}`) },
    history: layers.map(l => ({
      created_by: `admission-guard node tier: the ${l.name} layer (test/node/support/images.ts)`,
    })),
  });
  const configDigest = sha256(config);
  writeFileSync(join(blobsDir, configDigest), config);
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: {
      mediaType: "application/vnd.oci.image.config.v1+json",
      digest: `sha256:${configDigest}`,
      size: Buffer.byteLength(config),
    },
    layers: layers.map(l => ({ mediaType: GZIP, digest: `sha256:${l.digest}`, size: l.size })),
  });
  const manifestDigest = sha256(manifest);
  writeFileSync(join(blobsDir, manifestDigest), manifest);
  writeFileSync(join(layout, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
  writeFileSync(
    join(layout, "index.json"),
    JSON.stringify({
      schemaVersion: 2,
      manifests: spec.tags.map(tag => ({
        mediaType: "application/vnd.oci.image.manifest.v1+json",
        digest: `sha256:${manifestDigest}`,
        size: Buffer.byteLength(manifest),
        annotations: { "io.containerd.image.name": tag },
      })),
    }),
  );
  // Docker's archive index too: containerd's importer names images by its RepoTags (it finds
  // each layer gzipped and checks it against the config's diff_ids).
  writeFileSync(
    join(layout, "manifest.json"),
    JSON.stringify([
      {
        Config: `blobs/sha256/${configDigest}`,
        RepoTags: spec.tags,
        Layers: layers.map(l => `blobs/sha256/${l.digest}`),
      },
    ]),
  );
  const archive = join(work, "image.tar");
  execFileSync("tar", ["--sort=name", "--mtime=@0", "-C", layout, "-cf", archive, "."]);
  const blob = (digest: string, mediaType: string) =>
    [`sha256:${digest}`, { mediaType, path: join(blobsDir, digest) }] as const;
  const blobs = new Map([
    blob(configDigest, "application/vnd.oci.image.config.v1+json"),
    blob(manifestDigest, "application/vnd.oci.image.manifest.v1+json"),
    ...layers.map(l => blob(l.digest, GZIP)),
  ]);
  return {
    tags: spec.tags,
    archive,
    manifestDigest: `sha256:${manifestDigest}`,
    configDigest: `sha256:${configDigest}`,
    blobs,
  };
}
