// A root-built image whose Env names a cache or data directory (HF_HOME=/data/hf, TORCH_HOME,
// MLflow's MLFLOW_TRACKING_URI=file:/mlruns) outside HOME and WORKDIR: run as a non-root UID its
// first write there fails when the directory is root's (or missing: the runtime makes it, root's).
// The container gets a writable emptyDir there, as the scratch volumes are (fix-scratch.ts), only
// where the image's layers show it root-owned or absent, and a bounded number per pod.
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

/**
 * The directories to mount for a container: its root image's Env-named cache dirs that the UID
 * it runs as cannot write per the image's layers (root's and not writable by it, or absent), not
 * under HOME or WORKDIR, not named again by the container's own env, not under a mount.
 */
export function cacheDirsToMount(
  user: ImageUser | undefined,
  identity: Identity | undefined,
  container: Obj,
): string[] {
  if (user?.kind !== "root" || !identity || identity.fromImage || identity.uid === 0) return [];
  const dirs = user.shapes?.cacheDirs;
  const owners = new Map(user.files?.dirs ?? []);
  if (!dirs || !owners.size) return [];
  const env = asArray(container.env).map(e => asObject(e)?.name);
  const home = user.home ? normalizePath(user.home) : undefined;
  const workdir = user.workingDir ? normalizePath(user.workingDir) : undefined;
  const mounts = asArray(container.volumeMounts);
  return dirs
    .filter(([name, dir]) => {
      if (env.includes(name) || within(dir, home) || within(dir, workdir)) return false;
      const owner = owners.get(dir);
      if (owner === undefined || mountsCover(mounts, dir)) return false;
      return owner === null || (owner.uid === 0 && !writable(owner, identity.uid, identity.gid));
    })
    .map(([, dir]) => dir);
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
    const mounted = ctx.rec.changes.filter(
      c => c.rule === CACHE_DIRS_RULE && c.message.includes(".volumeMounts["),
    ).length;
    if (mounted >= MAX_CACHE_DIR_MOUNTS) return;
    mountScratch(ctx, ref, dir, CACHE_DIRS_RULE);
  }
}
