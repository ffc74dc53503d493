// The image shapes ML teams really run, each with the same probe: a small program that does what
// training and serving code does and exits non-zero if any step fails.
//
// - root-built: no USER, no non-root user in /etc/passwd, WORKDIR /workspace owned by root (most
//   ML base images: the framework images, a Dockerfile that never says USER), and a job that
//   writes ./outputs there;
// - root-built-scratch: the same image, whose job writes only its HOME caches, /tmp, /dev/shm and
//   volumes (OUTPUTS_DIR=/tmp/outputs): what runs as any user once it has a HOME;
// - nonroot-numeric: `USER 1001`, a user 1001 whose HOME and WORKDIR it owns (a well-built image);
// - nonroot-named: `USER ml` (1002), the same but named: the kubelet cannot check runAsNonRoot on a
//   name;
// - nonroot-named-group: `USER ml:train` (1002, group train 2000), its WORKDIR writable only by the
//   group train: runs only when the group is resolved too (issue 41);
// - user-1000: `USER 1000` with group 100 and a home in /etc/passwd (the notebook images' jovyan).
import {
  baseFiles,
  buildImage,
  largeUpperLayer,
  ROOT_GROUP,
  ROOT_PASSWD,
  type BuiltImage,
  type ImageFile,
  type ImageSpec,
} from "./images";

/**
 * The probe. MODE=train (default): write ~/.cache/huggingface and ~/.cache/torch (HOME as the
 * runtime set it: from /etc/passwd, "/" for a UID it does not list), a file under /tmp, ./outputs
 * in the WORKDIR (or $OUTPUTS_DIR), /dev/shm, a checkpoint in $CHECKPOINT_DIR and $HF_HOME when set. MODE=serve: read the
 * model file and serve it over HTTP, writing nothing. Each step prints `ok` or `FAIL` with the
 * error; the summary is the last line, which the kubelet keeps as the termination message.
 */
export const PROBE = `#!/bin/sh
failed=""
step() {
  name="$1"; shift
  if out=$("$@" 2>&1); then echo "ok   $name"; else echo "FAIL $name: $out"; failed="$failed $name"; fi
}
write() { mkdir -p "$1" && echo probe > "$1/probe.$$" ; }
echo "uid=$(id -u) gid=$(id -g) groups=$(id -G) HOME=$HOME PWD=$(pwd)"
if [ "\${MODE:-train}" = serve ]; then
  step read-model cat /srv/model.txt
  [ -n "$failed" ] && { echo "probe failed:$failed" | tee /dev/termination-log; exit 1; }
  exec httpd -f -p "\${PORT:-8080}" -h /srv
fi
step hf-cache write "$HOME/.cache/huggingface"
step torch-cache write "$HOME/.cache/torch"
step tmp write /tmp
step outputs write "\${OUTPUTS_DIR:-./outputs}"
step shm write /dev/shm
[ -n "$CHECKPOINT_DIR" ] && step checkpoint write "$CHECKPOINT_DIR"
[ -n "$HF_HOME" ] && step hf-home write "$HF_HOME"
if [ -n "$failed" ]; then
  echo "probe failed:$failed" | tee /dev/termination-log
  exit 1
fi
echo "probe ok" | tee /dev/termination-log
`;

export const SHAPES = [
  "root-built",
  "root-built-scratch",
  "nonroot-numeric",
  "nonroot-named",
  "nonroot-named-group",
  "user-1000",
] as const;
export type Shape = (typeof SHAPES)[number];

/** What a reader of the table needs to know about each shape. */
export const SHAPE_USERS: Record<Shape, string> = {
  "root-built": "no USER (root), WORKDIR /workspace root-owned, writes ./outputs",
  "root-built-scratch": "no USER (root), writes only HOME, /tmp, /dev/shm, volumes",
  "nonroot-numeric": "USER 1001, owns HOME and WORKDIR",
  "nonroot-named": "USER ml (1002), owns HOME and WORKDIR",
  "nonroot-named-group": "USER ml:train (1002:2000), WORKDIR writable by group train only",
  "user-1000": "USER 1000 (gid 100), home in /etc/passwd",
};

/** Where the node tier serves each shape: its registry (test/support/registry.ts), on loopback. */
export const repositoryOf = (shape: Shape) => `admission-guard/probe-${shape}`;
export const imageOf = (registry: string, shape: Shape) => `${registry}/${repositoryOf(shape)}:1`;

/** A root base, then the probe and its model: what every shape has (the user layer between). */
function common(): ImageFile[] {
  return [
    ...baseFiles(),
    { path: "usr/local/bin/probe", content: PROBE, mode: 0o755 },
    { path: "srv", mode: 0o755 },
    { path: "srv/model.txt", content: "weights\n", mode: 0o644 },
  ];
}

interface ImageUser {
  name: string;
  uid: number;
  gid: number;
  group: string;
  home: string;
  workdir: string;
  /** More /etc/group lines (a group the user is in). */
  groups?: string;
}

/** The named user of the nonroot-named shapes and rows. */
const ML: ImageUser = {
  name: "ml",
  uid: 1002,
  gid: 1002,
  group: "ml",
  home: "/home/ml",
  workdir: "/home/ml/work",
};

/**
 * An image built `RUN useradd ...; WORKDIR ...; USER ...`: its user layer rewrites /etc/passwd and
 * /etc/group over the base's and makes HOME and WORKDIR, owned by the user.
 */
function nonRoot(shape: string, user: ImageUser, imageUser: string): ImageSpec {
  const { name, uid, gid, home, workdir } = user;
  return {
    tags: [`localhost/admission-guard/probe-${shape}:1`],
    files: [
      ...common(),
      {
        path: "etc/passwd",
        content: `${ROOT_PASSWD}${name}:x:${uid}:${gid}::${home}:/bin/sh\n`,
        layer: "user",
      },
      {
        path: "etc/group",
        content: `${ROOT_GROUP}${user.group}:x:${gid}:\n${user.groups ?? ""}`,
        layer: "user",
      },
      { path: home.slice(1), mode: 0o755, uid, gid, layer: "user" },
      { path: workdir.slice(1), mode: 0o755, uid, gid, layer: "user" },
    ],
    config: {
      User: imageUser,
      WorkingDir: workdir,
      Entrypoint: ["/usr/local/bin/probe"],
      Env: ["PATH=/bin:/usr/local/bin"],
    },
  };
}

/** A root-built image: no USER, WORKDIR /workspace made (root's) by its own step, the app in it. */
function rootBuilt(shape: string, env: string[], workspace: ImageFile[] = []): ImageSpec {
  return {
    tags: [`localhost/admission-guard/probe-${shape}:1`],
    files: [
      ...common(),
      { path: "workspace", mode: 0o755, layer: "user" },
      // What the job's code reads from its WORKDIR: kept by the module's copy (ADR 0033).
      { path: "workspace/config.yaml", content: "lr: 0.1\n", mode: 0o644 },
      ...workspace,
    ],
    config: {
      WorkingDir: "/workspace",
      Entrypoint: ["/usr/local/bin/probe"],
      Env: ["PATH=/bin:/usr/local/bin", ...env],
    },
  };
}

export function shapeSpec(shape: Shape): ImageSpec {
  switch (shape) {
    case "root-built":
    case "root-built-scratch":
      return rootBuilt(shape, shape === "root-built-scratch" ? ["OUTPUTS_DIR=/tmp/outputs"] : []);
    case "nonroot-numeric":
      return nonRoot(
        shape,
        { name: "app", uid: 1001, gid: 1001, group: "app", home: "/home/app", workdir: "/app" },
        "1001",
      );
    case "nonroot-named":
      return nonRoot(shape, ML, "ml");
    case "nonroot-named-group": {
      // /etc/group lists train; WORKDIR is root's, writable by train (2000) only.
      const spec = nonRoot(
        shape,
        { ...ML, workdir: "/work", groups: "train:x:2000:ml\n" },
        "ml:train",
      );
      const files = spec.files.map(f =>
        f.path === "work" ? { ...f, uid: 0, gid: 2000, mode: 0o775 } : f,
      );
      return { ...spec, files };
    }
    case "user-1000":
      return nonRoot(
        shape,
        {
          name: "jovyan",
          uid: 1000,
          gid: 100,
          group: "users",
          home: "/home/jovyan",
          workdir: "/home/jovyan",
        },
        "1000",
      );
  }
}

/**
 * Issue 41's rows beyond the shapes, each an image of its own run in restricted with the module
 * (with no policy the runtime would refuse the unlisted name, so they are not in every column):
 * - named-large-layer: `USER ml` (1002) whose /etc/passwd sits under a 256 MiB install layer (a
 *   framework's wheels after `useradd`): resolved, or warned, within the request's deadline;
 * - named-unlisted: `USER mlsvc`, a name its /etc/passwd does not list, its job writing HOME, /tmp,
 *   /dev/shm (OUTPUTS_DIR=/tmp/outputs): runs as the configured UID, warned with the name;
 * - root-workdir-over: root-built, 64 KiB under WORKDIR /workspace, over the
 *   securityContext.workdirCopyBytes the table's module is given (ROW_WORKDIR_COPY_BYTES): warned,
 *   not copied.
 */
export const ROWS = ["named-large-layer", "named-unlisted", "root-workdir-over"] as const;
export type Row = (typeof ROWS)[number];
export const ROW_USERS: Record<Row, string> = {
  "named-large-layer": "USER ml (1002), /etc/passwd under a 256 MiB layer",
  "named-unlisted": "USER mlsvc (not in /etc/passwd), writes HOME, /tmp, /dev/shm",
  "root-workdir-over": "no USER (root), 64 KiB under WORKDIR /workspace, writes ./outputs",
};
export const LARGE_LAYER_BYTES = 256 * 1024 * 1024;
/** securityContext.workdirCopyBytes of the table's module: root-built's WORKDIR under, the row's over. */
export const ROW_WORKDIR_COPY_BYTES = 16 * 1024;
export const rowRepository = (row: Row) => `admission-guard/probe-${row}`;
export const rowImage = (registry: string, row: Row) => `${registry}/${rowRepository(row)}:1`;

export function rowSpec(row: Row): ImageSpec {
  switch (row) {
    case "named-large-layer": {
      const spec = nonRoot(row, ML, "ml");
      return { ...spec, files: [...spec.files, ...largeUpperLayer(LARGE_LAYER_BYTES)] };
    }
    case "named-unlisted": {
      const spec = nonRoot(row, ML, "mlsvc");
      return {
        ...spec,
        config: { ...spec.config, Env: [...(spec.config.Env ?? []), "OUTPUTS_DIR=/tmp/outputs"] },
      };
    }
    case "root-workdir-over":
      return rootBuilt(row, [], [{ path: "workspace/weights.bin", bytes: 64 * 1024, mode: 0o644 }]);
  }
}

/** A shape under other names (a seed's image), with more environment (MODE=serve). */
export interface ImageVariant {
  shape: Shape;
  tags: string[];
  env?: string[];
}

/** Every shape and row built into `outDir` (by name), and each variant as an image of its own. */
export function buildShapes(outDir: string, variants: ImageVariant[] = []) {
  const shapes = new Map(SHAPES.map(shape => [shape, buildImage(shapeSpec(shape), outDir)]));
  const others: BuiltImage[] = variants.map(variant => {
    const spec = shapeSpec(variant.shape);
    // A variable the variant sets replaces the shape's (PATH), as a Dockerfile's ENV would.
    const names = new Set((variant.env ?? []).map(e => e.split("=", 1)[0]));
    const kept = (spec.config.Env ?? []).filter(e => !names.has(e.split("=", 1)[0]));
    const config = { ...spec.config, Env: [...kept, ...(variant.env ?? [])] };
    return buildImage({ ...spec, tags: variant.tags, config }, outDir);
  });
  const rows = new Map(ROWS.map(row => [row, buildImage(rowSpec(row), outDir)]));
  return { shapes, variants: others, rows };
}
