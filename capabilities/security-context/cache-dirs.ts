// A root-built image whose Env names a cache or data directory (HF_HOME=/data/hf, TORCH_HOME,
// MLflow's MLFLOW_TRACKING_URI=file:/mlruns) outside HOME and WORKDIR: run as a non-root UID its
// first write there fails when the directory is root's (or missing: the runtime makes it, root's).
// The container gets a writable emptyDir there, as the scratch volumes are (fix-scratch.ts), only
// where the image's layers show it absent (one root owns is named: it may hold the image's own
// files), and a bounded number per pod.
// Pure. Why: docs/adr/0038-ml-image-shapes-from-the-config.md
import type { ContainerRef } from "../../lib/objects/pod";
import { asArray, asObject, type Obj } from "./checks/helpers";
import type { FixContext } from "./fix-context";
import { mountScratch, mountsCover, normalizePath } from "./fix-scratch";
import type { Identity, ImageUser } from "./image-user";
import { writable } from "./workdir-copy";

export const CACHE_DIRS_RULE = "cacheDirs";
/** Cache-dir mounts added to one pod at most, whatever its images' Env say. */
export const MAX_CACHE_DIR_MOUNTS = 8;

const within = (path: string, dir: string | undefined) =>
  !!dir && dir !== "/" && (path === dir || path.startsWith(`${dir}/`));

type Owner = { uid: number; gid: number; mode: number };

/**
 * A root image's Env-named cache dirs that the UID it runs as cannot write per the image's layers
 * (root's and not writable by it, or absent: the runtime would make it, root's), not under HOME or
 * WORKDIR, not named again by the container's own env, not under a mount: with the variable.
 */
function unwritableDirs(
  user: ImageUser | undefined,
  identity: Pick<Identity, "uid" | "gid"> & { fromImage?: boolean },
  container: Obj,
): [name: string, dir: string, owner: Owner | null][] {
  if (user?.kind !== "root" || identity.fromImage || identity.uid === 0) return [];
  const dirs = user.shapes?.cacheDirs;
  const owners = new Map(user.files?.dirs ?? []);
  if (!dirs || !owners.size) return [];
  const env = asArray(container.env).map(e => asObject(e)?.name);
  const home = user.home ? normalizePath(user.home) : undefined;
  const workdir = user.workingDir ? normalizePath(user.workingDir) : undefined;
  const mounts = asArray(container.volumeMounts);
  return dirs.flatMap(([name, dir]): [string, string, Owner | null][] => {
    if (env.includes(name) || within(dir, home) || within(dir, workdir)) return [];
    const owner = owners.get(dir);
    if (owner === undefined || mountsCover(mounts, dir)) return [];
    return owner === null || (owner.uid === 0 && !writable(owner, identity.uid, identity.gid))
      ? [[name, dir, owner]]
      : [];
  });
}

/**
 * The directories to mount for a container: those of its unwritable cache dirs that the image
 * does not have. One it has may hold what the image was built with (a model baked into HF_HOME):
 * an emptyDir over it would take those files away, so it is only named (cacheDirWarnings).
 */
export function cacheDirsToMount(
  user: ImageUser | undefined,
  identity: Identity | undefined,
  container: Obj,
): string[] {
  if (!identity) return [];
  return unwritableDirs(user, identity, container)
    .filter(([, , owner]) => owner === null)
    .map(([, dir]) => dir);
}

/** What is said of the unwritable cache dirs the image has (the fix leaves them alone). */
export function cacheDirWarnings(
  user: ImageUser | undefined,
  uid: number,
  gid: number | undefined,
  container: Obj,
): string[] {
  return unwritableDirs(user, { uid, gid }, container).flatMap(([name, dir, owner]) =>
    owner
      ? [
          `image "${user!.image}" (container "${String(container.name ?? "")}") sets ${name} to ${dir}, a directory of root's (mode ${owner.mode.toString(8)}) that UID ${uid} cannot write; it may hold what the image was built with, so no emptyDir is mounted over it. Fix: set ${name} to a writable path (under HOME), mount a writable volume at ${dir}, or make it the image's user's in the image`,
        ]
      : [],
  );
}

/** Mounts them, up to MAX_CACHE_DIR_MOUNTS over the pod (each mount recorded by mountScratch). */
export function mountCacheDirs(
  ctx: FixContext,
  ref: ContainerRef,
  user: ImageUser | undefined,
  identity: Identity | undefined,
): void {
  const container = ref.container as unknown as Obj;
  for (const dir of cacheDirsToMount(user, identity, container)) {
    if (ctx.rec.cacheDirMounts >= MAX_CACHE_DIR_MOUNTS) return;
    if (mountScratch(ctx, ref, dir, CACHE_DIRS_RULE)) ctx.rec.cacheDirMounts++;
  }
}
