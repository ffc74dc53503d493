// What an image's config says that breaks it once it runs as a non-root UID (issue 46): the low
// ports it serves on (ExposedPorts, an Env PORT=80), where its interpreter lives (PATH, the
// entrypoint, under /root), and the cache or data directories its Env names. Read from the config
// alone, bounded: a registry writes every byte, so what is kept is a few short strings.
// Why: docs/adr/0038-ml-image-shapes-from-the-config.md
import { bounded } from "./limits";

/** Ports below this are privileged (the kernel's default ip_unprivileged_port_start). */
export const PRIVILEGED_BELOW = 1024;
/** Entries of each list kept at most: a config's Env or ExposedPorts may hold thousands. */
export const MAX_SHAPE_ENTRIES = 8;
/** Env entries looked at at most, and ExposedPorts keys. */
const MAX_SCANNED = 256;

export interface ImageShapes {
  /** Privileged ports from ExposedPorts ("80/tcp"), lowest first. */
  exposed?: number[];
  /** Env entries naming a privileged port (PORT=80, HTTP_PORT=443): [name, port]. */
  portEnv?: [string, number][];
  /** PATH directories under /root, in PATH's order. */
  rootPath?: string[];
  /** The first word of Entrypoint and of Cmd, when absolute (the container may replace them). */
  entrypoint?: string;
  cmd?: string;
  /** Env-named cache and data directories (absolute): [name, path]. */
  cacheDirs?: [string, string][];
}

/** An Env name that names a port the process listens on: PORT, HTTP_PORT, SERVER_PORT... */
export const PORT_ENV = /^([A-Z0-9]+_)*PORT$/;
/** Env names of cache and data directories ML libraries write to (Hugging Face, torch, MLflow). */
export const CACHE_ENV = new Set([
  "HF_HOME",
  "HF_DATASETS_CACHE",
  "HUGGINGFACE_HUB_CACHE",
  "TRANSFORMERS_CACHE",
  "TORCH_HOME",
  "XDG_CACHE_HOME",
  "MPLCONFIGDIR",
  "TRITON_CACHE_DIR",
  "NUMBA_CACHE_DIR",
  "MLFLOW_TRACKING_URI",
]);

/** A port number as Env or containerPort writes it, when it is a privileged one (1..1023). */
export function lowPort(value: unknown): number | undefined {
  const n = typeof value === "number" ? value : /^\d{1,5}$/.test(String(value)) ? Number(value) : 0;
  return Number.isInteger(n) && n > 0 && n < PRIVILEGED_BELOW ? n : undefined;
}

/** Whether `path` is /root or under it (a non-root UID cannot enter /root: mode 700). */
export function underRoot(path: string): boolean {
  return path === "/root" || path.startsWith("/root/");
}

/** A PATH's directories under /root, in its order, at most MAX_SHAPE_ENTRIES (image and pod alike). */
export function rootPathDirs(path: string): string[] {
  return path.split(":").filter(underRoot).slice(0, MAX_SHAPE_ENTRIES);
}

/** The directory an Env cache value names: an absolute path, or MLflow's file: URI's path. */
export function cacheDirOf(name: string, value: string): string | undefined {
  const path = name === "MLFLOW_TRACKING_URI" ? /^file:(\/\/)?(\/.*)$/.exec(value)?.[2] : value;
  if (!path || !path.startsWith("/") || path.includes("\0")) return undefined;
  // "." and ".." segments out: the path is compared with mounts and read from the layers as is.
  const parts = path.split("/").filter(p => p && p !== ".");
  if (parts.includes("..")) return undefined;
  return parts.length ? `/${parts.join("/")}` : undefined;
}

/** The shapes of a config (its `config` object, as the registry serves it); undefined: none. */
export function shapesOf(config: Record<string, unknown>): ImageShapes | undefined {
  const out: ImageShapes = {};
  const env = (Array.isArray(config.Env) ? config.Env : [])
    .slice(0, MAX_SCANNED)
    .filter((e): e is string => typeof e === "string");
  const ports = new Set<number>();
  const exposedPorts = config.ExposedPorts;
  if (exposedPorts && typeof exposedPorts === "object") {
    for (const key of Object.keys(exposedPorts).slice(0, MAX_SCANNED)) {
      const port = lowPort(key.split("/", 1)[0]);
      if (port !== undefined) ports.add(port);
    }
  }
  if (ports.size) out.exposed = [...ports].sort((a, b) => a - b).slice(0, MAX_SHAPE_ENTRIES);
  const portEnv: [string, number][] = [];
  const cacheDirs: [string, string][] = [];
  for (const entry of env) {
    const eq = entry.indexOf("=");
    if (eq <= 0) continue;
    const name = entry.slice(0, eq);
    const value = entry.slice(eq + 1);
    if (PORT_ENV.test(name) && portEnv.length < MAX_SHAPE_ENTRIES) {
      const port = lowPort(value);
      if (port !== undefined) portEnv.push([bounded(name, 64), port]);
    } else if (name === "PATH") {
      const dirs = rootPathDirs(value);
      if (dirs.length) out.rootPath = dirs.map(d => bounded(d));
    } else if (CACHE_ENV.has(name) && cacheDirs.length < MAX_SHAPE_ENTRIES) {
      const dir = cacheDirOf(name, value);
      if (dir) cacheDirs.push([name, bounded(dir)]);
    }
  }
  if (portEnv.length) out.portEnv = portEnv;
  if (cacheDirs.length) out.cacheDirs = cacheDirs;
  const first = (list: unknown) =>
    Array.isArray(list) && typeof list[0] === "string" && list[0].startsWith("/")
      ? bounded(list[0])
      : undefined;
  const entrypoint = first(config.Entrypoint);
  const cmd = first(config.Cmd);
  if (entrypoint) out.entrypoint = entrypoint;
  if (cmd) out.cmd = cmd;
  return Object.keys(out).length ? out : undefined;
}

/** The UTF-16 bytes a cache holds for the shapes (the inspector's config cache counts them). */
export function shapesSize(shapes: ImageShapes | undefined): number {
  if (!shapes) return 0;
  let chars = (shapes.entrypoint?.length ?? 0) + (shapes.cmd?.length ?? 0);
  chars += 8 * (shapes.exposed?.length ?? 0);
  for (const [name] of shapes.portEnv ?? []) chars += name.length + 8;
  for (const dir of shapes.rootPath ?? []) chars += dir.length;
  for (const [name, dir] of shapes.cacheDirs ?? []) chars += name.length + dir.length;
  return 2 * chars + 64;
}
