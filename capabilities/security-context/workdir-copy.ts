// A root-built image whose WORKDIR the configured UID cannot write (a training script writing
// ./outputs into a root-owned /workspace): the container gets an emptyDir at WORKDIR, filled first
// by an init container of the same image copying WORKDIR into it as that same UID, so the job
// keeps its image's files and can write beside them. Pure: the image's files come in as data.
// Why: docs/adr/0033-root-workdir-copied-to-an-emptydir.md
import { fieldPath, type ContainerRef } from "../../lib/objects/pod";
import { asArray, asObject, type Obj } from "./checks/helpers";
import type { FixContext } from "./fix-context";
import { dnsLabelOf, mountsCover, normalizePath } from "./fix-scratch";
import type { Identity, ImageUser } from "./image-user";

/** The copier the init container runs: exec form, no shell (WORKDIR is the registry's words). */
export const COPIER = "/bin/cp";
/** Where the init container sees the emptyDir (outside any WORKDIR but "/" itself). */
export const COPY_TARGET = "/.ag-workdir-copy";
export const RULE = "workdirCopy";

export type CopyDecision = { copy: true; workdir: string } | { copy: false; why: string };

/** The settings the decision reads (the namespace label already applied to `mode`). */
export interface CopySettings {
  mode: "copy" | "off";
  maxBytes: number;
}

/** Whether `uid`/`gid` may write a directory of this owner and mode (no ACLs in image layers). */
export function writable(
  dir: { uid: number; gid: number; mode: number },
  uid: number,
  gid?: number,
) {
  if (dir.uid === uid) return (dir.mode & 0o200) !== 0;
  if (gid !== undefined && dir.gid === gid) return (dir.mode & 0o020) !== 0;
  return (dir.mode & 0o002) !== 0;
}

/**
 * Whether the container's WORKDIR is copied; undefined when there is nothing to do or say (not a
 * root image run as another UID, no WORKDIR, or one it can write), else why not.
 */
export function copyDecision(
  user: ImageUser | undefined,
  identity: Identity | undefined,
  container: Obj,
  settings: CopySettings,
): CopyDecision | undefined {
  if (user?.kind !== "root" || !identity || identity.fromImage || identity.uid === 0) return;
  const workdir = normalizePath(user.workingDir || "/");
  if (workdir === "/") return;
  const files = user.files;
  // Its files not asked for (images.readFiles off, an older cache entry): today's warning alone.
  if (!files) return;
  const dir = files.workdir;
  if (dir && (dir.uid !== 0 || writable(dir, identity.uid, identity.gid))) return;
  if (settings.mode === "off") return { copy: false, why: "securityContext.workdirCopy is off" };
  if (!Array.isArray(container.volumeMounts) && container.volumeMounts !== undefined)
    return { copy: false, why: "its volumeMounts are not a list" };
  if (mountsCover(asArray(container.volumeMounts), workdir))
    return { copy: false, why: `a volume is already mounted at or above ${workdir}` };
  if (!dir)
    return {
      copy: false,
      why: files.note
        ? `its files were not read (${files.note})`
        : `${workdir} is not a directory in its layers (the runtime makes it, owned by root)`,
    };
  if (!files.copier) return { copy: false, why: `the image has no ${COPIER} to copy it with` };
  const tree = files.workdirTree;
  if (!tree) return { copy: false, why: `what lies under ${workdir} was not read` };
  if (tree.unreadable > 0)
    return {
      copy: false,
      why: `${tree.unreadable} of its ${tree.entries} entries under ${workdir} are not readable by other users, so a copy would fail`,
    };
  if (tree.bytes > settings.maxBytes)
    return {
      copy: false,
      why: `${tree.bytes} bytes under ${workdir} are over securityContext.workdirCopyBytes (${settings.maxBytes})`,
    };
  return { copy: true, workdir };
}

/** The emptyDir of one container's WORKDIR copy (per container: two images' WORKDIRs never mix). */
export function copyVolumeName(container: string): string {
  return dnsLabelOf(`ag-workdir-${container}`, container);
}

/** The init container that copies one container's WORKDIR. */
export function copierName(container: string): string {
  return dnsLabelOf(`ag-copy-${container}`, container);
}

/**
 * Adds the emptyDir at WORKDIR and the init container that fills it, for an app container.
 * Idempotent: a pod that has them (by name) gets nothing twice.
 */
export function applyCopy(
  ctx: FixContext,
  ref: ContainerRef,
  identity: Identity,
  workdir: string,
): void {
  const { template, spec, rec } = ctx;
  const container = ref.container as unknown as Obj;
  const name = String(container.name ?? "");
  const volume = copyVolumeName(name);
  const initName = copierName(name);
  if (!Array.isArray(spec.volumes) && spec.volumes !== undefined) return;
  if (!Array.isArray(spec.initContainers) && spec.initContainers !== undefined) return;
  const volumes = (spec.volumes ??= []) as unknown[];
  const inits = (spec.initContainers ??= []) as unknown[];
  // A name the pod already uses for something else: do nothing rather than guess.
  if (volumes.some(v => asObject(v)?.name === volume)) return;
  if (inits.some(c => asObject(c)?.name === initName)) return;
  const add = (list: unknown[], item: unknown, at: string) => {
    list.push(item);
    rec.changes.push({
      rule: RULE,
      message: `${at}[${list.length - 1}]=${JSON.stringify(item)}`,
    });
  };
  add(volumes, { name: volume, emptyDir: {} }, fieldPath(template, "spec.volumes"));
  add(
    inits,
    {
      name: initName,
      image: container.image,
      ...(container.imagePullPolicy ? { imagePullPolicy: container.imagePullPolicy } : {}),
      // "<workdir>/." copies its contents, dotfiles too; -R without -p: the copies are the UID's
      // own (so writable by it), symlinks stay symlinks.
      command: [COPIER, "-R", `${workdir}/.`, COPY_TARGET],
      ...copiedResources(container),
      volumeMounts: [{ name: volume, mountPath: COPY_TARGET }],
      // What restricted asks, set here: the walk that fills containers has already been made.
      securityContext: {
        runAsNonRoot: true,
        runAsUser: identity.uid,
        ...(identity.gid !== undefined ? { runAsGroup: identity.gid } : {}),
        allowPrivilegeEscalation: false,
        capabilities: { drop: ["ALL"] },
        readOnlyRootFilesystem: true,
        seccompProfile: { type: "RuntimeDefault" },
      },
    },
    fieldPath(template, "spec.initContainers"),
  );
  add(
    (container.volumeMounts ??= []) as unknown[],
    { name: volume, mountPath: workdir },
    `${ref.path}.volumeMounts`,
  );
}

/** Resources an init container may take without growing the pod's (init and app run apart). */
const COPIED_RESOURCES = ["cpu", "memory", "ephemeral-storage"];

/**
 * The container's own cpu, memory and ephemeral-storage requests and limits: a namespace whose
 * ResourceQuota tracks them refuses a container without them (LimitRange defaults are applied
 * before webhooks run), and an init container no larger than the container it serves adds
 * nothing to the pod's requests. Never a GPU or other device: the copy needs none.
 */
function copiedResources(container: Obj): { resources?: Obj } {
  const resources = asObject(container.resources);
  const out: Obj = {};
  for (const kind of ["requests", "limits"]) {
    const list = asObject(resources?.[kind]);
    const kept = Object.fromEntries(
      COPIED_RESOURCES.filter(r => list?.[r] !== undefined).map(r => [r, list![r]]),
    );
    if (Object.keys(kept).length) out[kind] = kept;
  }
  return Object.keys(out).length ? { resources: out } : {};
}

/**
 * The module's own copiers in a pod: the init container named for an app container's copy that
 * mounts that copy's volume. Its image is the app's, built for root; what it does is known, so
 * nothing is said of it as of the app.
 */
export function copiersIn(spec: Obj | undefined): Set<string> {
  const out = new Set<string>();
  // By name once, not searched per app container: both lists are the pod author's, and a pod of
  // thousands of each would otherwise cost their product. The first of a name, as find() took it.
  const inits = new Map<unknown, Obj | undefined>();
  for (const init of asArray(spec?.initContainers).map(asObject))
    if (!inits.has(init?.name)) inits.set(init?.name, init);
  for (const app of asArray(spec?.containers)) {
    const name = String(asObject(app)?.name ?? "");
    const copier = inits.get(copierName(name));
    const mounts = asArray(copier?.volumeMounts).map(asObject);
    if (mounts.some(m => m?.name === copyVolumeName(name) && m?.mountPath === COPY_TARGET))
      out.add(copierName(name));
  }
  return out;
}

/** Whether the container's WORKDIR is the module's copy (what the check says afterwards). */
export function isCopied(container: Obj, workdir: string): boolean {
  const volume = copyVolumeName(String(container.name ?? ""));
  return asArray(container.volumeMounts).some(m => {
    const mount = asObject(m);
    return (
      mount?.name === volume &&
      typeof mount.mountPath === "string" &&
      normalizePath(mount.mountPath) === normalizePath(workdir)
    );
  });
}
