// Container images for the node tier, built from files on this machine (Debian's static busybox),
// with no registry on the internet: each image is one uncompressed layer in an OCI image layout,
// with a Docker-style manifest.json beside index.json so `ctr images import` names it by its tags.
// The layer is a staged directory tree whose owners are set with chown (the node tier runs as root,
// as a kubelet must) and packed by GNU tar with numeric owners, so an image's files belong to the
// UIDs the image shape says: the point of the node tier is which user can write what.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
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
import { dirname, join } from "node:path";

/** Where Debian's busybox-static puts its binary. */
export const BUSYBOX = "/bin/busybox";

export interface ImageFile {
  path: string;
  /** Text content; a directory when absent and `copyFrom` is absent too. */
  content?: string;
  /** A file's content from this machine (a symlink is followed). */
  copyFrom?: string;
  /** A whole directory tree from this machine, copied as it is (owners, modes, links). */
  copyTree?: string;
  mode?: number;
  uid?: number;
  gid?: number;
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
  /** The blobs by digest (config, manifest, layer), for a registry that serves them. */
  blobs: Map<string, { mediaType: string; path: string }>;
}

const sha256 = (data: Buffer | string) => createHash("sha256").update(data).digest("hex");

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

/** A minimal root filesystem: busybox, its applets, /tmp (1777), and the given /etc/passwd. */
export function baseFiles(passwd: string, group: string): ImageFile[] {
  return [
    { path: "bin", mode: 0o755 },
    { path: "bin/busybox", copyFrom: BUSYBOX, mode: 0o755 },
    { path: "etc", mode: 0o755 },
    { path: "etc/passwd", content: passwd, mode: 0o644 },
    { path: "etc/group", content: group, mode: 0o644 },
    { path: "tmp", mode: 0o1777 },
    { path: "root", mode: 0o700 },
  ];
}

function stage(root: string, files: ImageFile[]): void {
  for (const file of files) {
    const target = join(root, file.path);
    mkdirSync(dirname(target), { recursive: true });
    if (file.copyTree) {
      execFileSync("cp", ["-a", file.copyTree, target]);
      continue;
    }
    if (file.copyFrom) copyFileSync(file.copyFrom, target);
    else if (file.content !== undefined) writeFileSync(target, file.content);
    else mkdirSync(target, { recursive: true });
    chmodSync(target, file.mode ?? (file.content !== undefined ? 0o644 : 0o755));
    chownSync(target, file.uid ?? 0, file.gid ?? 0);
  }
  if (files.some(f => f.path === "bin/busybox"))
    for (const applet of APPLETS) symlinkSync("busybox", join(root, "bin", applet));
}

/** Builds one image into `outDir` and returns where its archive and blobs are. */
export function buildImage(spec: ImageSpec, outDir: string): BuiltImage {
  const work = mkdtempSync(join(outDir, "image-"));
  const rootfs = join(work, "rootfs");
  mkdirSync(rootfs);
  stage(rootfs, spec.files);
  const layout = join(work, "layout");
  const blobsDir = join(layout, "blobs", "sha256");
  mkdirSync(blobsDir, { recursive: true });
  const layerPath = join(work, "layer.tar");
  // Sorted names, fixed times and numeric owners: the same spec gives the same layer digest.
  execFileSync("tar", [
    "--numeric-owner",
    "--sort=name",
    "--mtime=@0",
    "-C",
    rootfs,
    "-cf",
    layerPath,
    ".",
  ]);
  const layer = readFileSync(layerPath);
  const layerDigest = sha256(layer);
  writeFileSync(join(blobsDir, layerDigest), layer);
  rmSync(layerPath);
  rmSync(rootfs, { recursive: true, force: true });

  const config = JSON.stringify({
    architecture: "amd64",
    os: "linux",
    config: spec.config,
    rootfs: { type: "layers", diff_ids: [`sha256:${layerDigest}`] },
    history: [{ created_by: "admission-guard node tier (test/node/support/images.ts)" }],
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
    layers: [
      {
        mediaType: "application/vnd.oci.image.layer.v1.tar",
        digest: `sha256:${layerDigest}`,
        size: layer.length,
      },
    ],
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
  // Docker's archive index too: containerd's importer names images by its RepoTags.
  writeFileSync(
    join(layout, "manifest.json"),
    JSON.stringify([
      {
        Config: `blobs/sha256/${configDigest}`,
        RepoTags: spec.tags,
        Layers: [`blobs/sha256/${layerDigest}`],
      },
    ]),
  );
  const archive = join(work, "image.tar");
  execFileSync("tar", ["--sort=name", "--mtime=@0", "-C", layout, "-cf", archive, "."]);
  const blobs = new Map([
    [
      `sha256:${configDigest}`,
      { mediaType: "application/vnd.oci.image.config.v1+json", path: join(blobsDir, configDigest) },
    ],
    [
      `sha256:${manifestDigest}`,
      {
        mediaType: "application/vnd.oci.image.manifest.v1+json",
        path: join(blobsDir, manifestDigest),
      },
    ],
    [
      `sha256:${layerDigest}`,
      { mediaType: "application/vnd.oci.image.layer.v1.tar", path: join(blobsDir, layerDigest) },
    ],
  ]);
  return {
    tags: spec.tags,
    archive,
    manifestDigest: `sha256:${manifestDigest}`,
    configDigest: `sha256:${configDigest}`,
    blobs,
  };
}
