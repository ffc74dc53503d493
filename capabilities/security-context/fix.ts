// The mutation: fill what the namespace's Pod Security level needs and the user left unset, with
// the user the image was built for. Idempotent. Why: docs/adr/0006-the-fix-follows-the-image.md,
// docs/adr/0022-fix-to-the-namespace-pod-security-level.md
import type { V1Container } from "@kubernetes/client-node";
import { fieldPath, type ContainerRef, type PodTemplateRef } from "../../lib/objects/pod";
import type { Settings } from "../../lib/settings";
import { type RuleChange } from "../../lib/engine/policy";
import { withoutTrailingSlashes } from "../../lib/objects/text";
import { checksFor, type LevelVersion } from "./checks";
import {
  asArray,
  asObject,
  isUserNamespacePod,
  isWindowsPod,
  USER_NAMESPACE_RELAXED_SINCE,
  type Obj,
} from "./checks/helpers";
import { identityFor, imageContainers, type Identity, type ImageUser } from "./image-user";

export const CAPABILITY = "security-context";

type SecuritySettings = Settings["securityContext"];

export interface FixInputs {
  /** Each container's image user (image-user.ts); a container missing here counts as unknown. */
  users?: ReadonlyMap<V1Container, ImageUser>;
  /** Whether to fill readOnlyRootFilesystem (the setting, or the namespace's label). */
  readOnlyRoot?: "off" | "fill";
  /** The level to fix to, at the policy version it evaluates (default: restricted, latest). */
  level?: LevelVersion;
}

/** What a level's checks require to be set, at its policy version: the fills that follow. */
interface Fills {
  /** runAsNonRoot, with the user each container runs as, its HOME and fsGroup. */
  nonRoot: boolean;
  /** Whether a pod in its own user namespace is exempt from runAsNonRoot (from policy 1.35). */
  userNamespaceExempt: boolean;
  allowPrivilegeEscalation: boolean;
  dropAll: boolean;
  seccomp: boolean;
}

function fillsFor({ level, version }: LevelVersion): Fills {
  const required = new Set(checksFor(level, version).map(c => c.id));
  return {
    nonRoot: required.has("runAsNonRoot"),
    userNamespaceExempt: version === "latest" || version >= USER_NAMESPACE_RELAXED_SINCE,
    allowPrivilegeEscalation: required.has("allowPrivilegeEscalation"),
    dropAll: required.has("capabilities_restricted"),
    seccomp: required.has("seccompProfile_restricted"),
  };
}

const unset = (x: unknown) => x === undefined || x === null;

/** Adding SYS_ADMIN makes allowPrivilegeEscalation=false invalid (the API rejects the pair). */
const SYS_ADMIN = new Set(["CAP_SYS_ADMIN", "SYS_ADMIN"]);

/** Volume types whose files a non-root user must be given by fsGroup to write. */
const WRITABLE_VOLUME_TYPES = ["persistentVolumeClaim", "emptyDir", "ephemeral"];

class Recorder {
  readonly changes: RuleChange[] = [];
  set(obj: Obj, key: string, value: unknown, path: string, rule: string): void {
    obj[key] = value;
    this.changes.push({
      rule,
      message: `${path}=${JSON.stringify(value)}`,
    });
  }
}

/**
 * The securityContext object at `holder[key]`, created when missing; undefined when the user put
 * something that is not an object there (malformed: leave it alone).
 */
function securityContext(holder: Obj, key = "securityContext"): Obj | undefined {
  if (unset(holder[key])) holder[key] = {};
  return asObject(holder[key]);
}

/**
 * Removes the securityContext securityContext() created on `holder` (it had none `before`) when
 * nothing was filled in it (a level that requires nothing): no empty object left behind.
 */
function dropIfLeftEmpty(holder: Obj, before: unknown): void {
  const sc = asObject(holder.securityContext);
  if (unset(before) && sc && Object.keys(sc).length === 0) delete holder.securityContext;
}

/**
 * The containers whose user the pod leaves to us: none when the pod names one at its level (or its
 * securityContext is not an object), else those that name none themselves.
 */
export function containersLeftToUs(template: PodTemplateRef): ContainerRef[] {
  const podSc = asObject(template.spec)?.securityContext;
  if (!unset(podSc)) {
    const sc = asObject(podSc);
    if (!sc || !unset(sc.runAsUser)) return [];
  }
  return imageContainers(template).filter(ref =>
    unset(asObject((ref.container as unknown as Obj).securityContext)?.runAsUser),
  );
}

/** Who each container left to us runs as, keyed by the container (refs are made afresh by each walk). */
function identities(
  template: PodTemplateRef,
  settings: SecuritySettings,
  inputs: FixInputs,
): Map<V1Container, Identity> {
  const out = new Map<V1Container, Identity>();
  for (const ref of containersLeftToUs(template)) {
    const user = inputs.users?.get(ref.container) ?? {
      kind: "unknown" as const,
      image: String(ref.container.image ?? ""),
      reason: "not looked up",
    };
    out.set(ref.container, identityFor(user, settings));
  }
  return out;
}

export function fixPodSecurity(
  template: PodTemplateRef,
  settings: SecuritySettings,
  inputs: FixInputs = {},
): RuleChange[] {
  const spec = asObject(template.spec);
  const level = inputs.level ?? { level: "restricted", version: "latest" };
  if (!spec || level.level === "privileged") return [];
  const fills = fillsFor(level);
  const rec = new Recorder();
  const windows = isWindowsPod(template);
  const before = spec.securityContext;
  const podSc = securityContext(spec);
  const chosen =
    !windows && nonRootFilled(template, fills)
      ? identities(template, settings, inputs)
      : new Map<V1Container, Identity>();
  if (podSc) fixPodLevel(template, podSc, chosen, settings, windows, fills, rec);
  if (!windows) {
    for (const ref of imageContainersAndEphemeral(template)) {
      const container = ref.container as unknown as Obj;
      const containerBefore = container.securityContext;
      const sc = securityContext(container);
      if (!sc) continue;
      const identity = chosen.get(ref.container);
      fixContainer(template, spec, ref, sc, identity, settings, inputs, fills, rec);
      dropIfLeftEmpty(container, containerBefore);
    }
    if (podSc && fills.nonRoot) fixFsGroup(template, spec, podSc, chosen, settings, rec);
  }
  dropIfLeftEmpty(spec, before);
  return rec.changes;
}

/** Whether the fix chooses who containers run as: runAsNonRoot is to be filled for this pod. */
function nonRootFilled(template: PodTemplateRef, fills: Fills): boolean {
  return fills.nonRoot && !(fills.userNamespaceExempt && isUserNamespacePod(template));
}

/**
 * Whether the fix, at this level, chooses the user of some container (one that names none, in a
 * pod that names none): only then are the images read.
 */
export function choosesUser(template: PodTemplateRef, level: LevelVersion): boolean {
  return (
    level.level !== "privileged" &&
    !isWindowsPod(template) &&
    nonRootFilled(template, fillsFor(level)) &&
    containersLeftToUs(template).length > 0
  );
}

function imageContainersAndEphemeral(template: PodTemplateRef): ContainerRef[] {
  const list = (template.spec as unknown as Obj).ephemeralContainers;
  const ephemeral: ContainerRef[] = Array.isArray(list)
    ? list.flatMap((container, index) =>
        asObject(container)
          ? [
              {
                kind: "ephemeralContainers" as const,
                index,
                container: container as V1Container,
                path: fieldPath(template, `spec.ephemeralContainers[${index}]`),
              },
            ]
          : [],
      )
    : [];
  return [...imageContainers(template), ...ephemeral];
}

/** The one identity every container shares, if they do. */
function shared(chosen: Map<V1Container, Identity>): Identity | undefined {
  const all = [...chosen.values()];
  if (!all.length) return undefined;
  const [first] = all;
  return all.every(i => i.uid === first.uid && i.gid === first.gid) ? first : undefined;
}

function fixPodLevel(
  template: PodTemplateRef,
  sc: Obj,
  chosen: Map<V1Container, Identity>,
  settings: SecuritySettings,
  windows: boolean,
  fills: Fills,
  rec: Recorder,
): void {
  const at = (field: string) => fieldPath(template, `spec.securityContext.${field}`);
  // A user-namespaced pod (hostUsers: false) may run as root inside its namespace; PSA exempts it
  // from policy 1.35 on.
  if (nonRootFilled(template, fills)) {
    if (unset(sc.runAsNonRoot))
      rec.set(sc, "runAsNonRoot", true, at("runAsNonRoot"), "runAsNonRoot");
    // One identity for all: said once, at the pod. Otherwise each container gets its own below.
    // A pod with no containers yet (a template being built up) gets the configured user; one
    // whose containers all name their own gets nothing at the pod level.
    const common = chosen.size ? shared(chosen) : undefined;
    const noContainers = imageContainers(template).length === 0;
    const identity =
      common ?? (noContainers ? { uid: settings.runAsUser, gid: settings.runAsGroup } : undefined);
    if (!windows && identity && unset(sc.runAsUser))
      rec.set(sc, "runAsUser", identity.uid, at("runAsUser"), "runAsUser");
    if (!windows && identity?.gid !== undefined && unset(sc.runAsGroup))
      rec.set(sc, "runAsGroup", identity.gid, at("runAsGroup"), "runAsGroup");
  }
  const containers = imageContainersAndEphemeral(template);
  const everyContainerHasOwn =
    containers.length > 0 &&
    containers.every(
      c => !unset(asObject((c.container as unknown as Obj).securityContext)?.seccompProfile),
    );
  if (fills.seccomp && !windows && unset(sc.seccompProfile) && !everyContainerHasOwn) {
    rec.set(
      sc,
      "seccompProfile",
      { type: "RuntimeDefault" },
      at("seccompProfile"),
      "seccompProfile_restricted",
    );
  }
}

/**
 * fsGroup, when the pod mounts volumes a non-root user must write (a PersistentVolumeClaim, an
 * emptyDir, an ephemeral volume) and leaves it unset: the pod's group, so its files are writable
 * by the user it runs as. OnRootMismatch: the kubelet changes ownership only when the volume's root
 * does not match already (a large volume is not walked on every start).
 */
function fixFsGroup(
  template: PodTemplateRef,
  spec: Obj,
  sc: Obj,
  chosen: Map<V1Container, Identity>,
  settings: SecuritySettings,
  rec: Recorder,
): void {
  if (!unset(sc.fsGroup)) return;
  const writable = asArray(spec.volumes).some(v => {
    const volume = asObject(v);
    return volume && WRITABLE_VOLUME_TYPES.some(type => !unset(volume[type]));
  });
  if (!writable) return;
  const first = [...chosen.values()][0];
  const group =
    typeof sc.runAsGroup === "number"
      ? sc.runAsGroup
      : first
        ? (first.gid ?? first.uid)
        : typeof sc.runAsUser === "number" && sc.runAsUser > 0
          ? sc.runAsUser
          : settings.runAsGroup;
  const at = (field: string) => fieldPath(template, `spec.securityContext.${field}`);
  rec.set(sc, "fsGroup", group, at("fsGroup"), "fsGroup");
  if (unset(sc.fsGroupChangePolicy))
    rec.set(sc, "fsGroupChangePolicy", "OnRootMismatch", at("fsGroupChangePolicy"), "fsGroup");
}

function hasEnv(container: Obj, name: string): boolean {
  return asArray(container.env).some(e => asObject(e)?.name === name);
}

/** The container's fills, in its securityContext `sc` (and its env and volume mounts). */
function fixContainer(
  template: PodTemplateRef,
  spec: Obj,
  ref: ContainerRef,
  sc: Obj,
  identity: Identity | undefined,
  settings: SecuritySettings,
  inputs: FixInputs,
  fills: Fills,
  rec: Recorder,
): void {
  const container = ref.container as unknown as Obj;
  const at = (field: string) => `${ref.path}.securityContext.${field}`;

  // Containers that do not share the pod's identity get their own.
  const podSc = asObject(spec.securityContext);
  if (identity && podSc && unset(podSc.runAsUser)) {
    if (unset(sc.runAsUser)) rec.set(sc, "runAsUser", identity.uid, at("runAsUser"), "runAsUser");
    if (identity.gid !== undefined && unset(sc.runAsGroup) && unset(podSc.runAsGroup))
      rec.set(sc, "runAsGroup", identity.gid, at("runAsGroup"), "runAsGroup");
  }

  const caps = unset(sc.capabilities) ? undefined : asObject(sc.capabilities);
  const added = Array.isArray(caps?.add) ? caps.add.map(String) : [];
  if (
    fills.allowPrivilegeEscalation &&
    unset(sc.allowPrivilegeEscalation) &&
    sc.privileged !== true &&
    !added.some(c => SYS_ADMIN.has(c))
  ) {
    rec.set(
      sc,
      "allowPrivilegeEscalation",
      false,
      at("allowPrivilegeEscalation"),
      "allowPrivilegeEscalation",
    );
  }

  // drop ALL, keeping whatever the user dropped and added (an add of NET_BIND_SERVICE survives).
  const capabilities = fills.dropAll ? securityContext(sc, "capabilities") : undefined;
  if (capabilities && (unset(capabilities.drop) || Array.isArray(capabilities.drop))) {
    const drop = (capabilities.drop as unknown[] | undefined) ?? [];
    if (!drop.includes("ALL")) {
      rec.set(
        capabilities,
        "drop",
        [...drop, "ALL"],
        at("capabilities.drop"),
        "capabilities_restricted",
      );
    }
  }

  const mounts = container.volumeMounts;
  const volumes = spec.volumes;
  // Without a place to put a volume, nothing below can be done safely: skip.
  if (!unset(mounts) && !Array.isArray(mounts)) return;
  if (!unset(volumes) && !Array.isArray(volumes)) return;

  // A UID the image has no HOME for (root-built, or a named user) gets a writable one, unless the
  // container or its image says where HOME is.
  const user = inputs.users?.get(ref.container);
  if (
    identity?.needsHome &&
    !hasEnv(container, "HOME") &&
    !(user && user.kind !== "unknown" && user.home) &&
    (unset(container.env) || Array.isArray(container.env))
  ) {
    const home = normalizePath(settings.homePath);
    const env = (container.env ??= []) as unknown[];
    env.push({ name: "HOME", value: home });
    rec.changes.push({
      rule: "writableHome",
      message: `${ref.path}.env[${env.length - 1}]=${JSON.stringify({ name: "HOME", value: home })}`,
    });
    mountScratch(template, spec, ref, home, "writableHome", rec);
  }

  if (
    (inputs.readOnlyRoot ?? settings.readOnlyRootFilesystem) === "fill" &&
    unset(sc.readOnlyRootFilesystem)
  ) {
    rec.set(
      sc,
      "readOnlyRootFilesystem",
      true,
      at("readOnlyRootFilesystem"),
      "readOnlyRootFilesystem",
    );
    for (const path of settings.writablePaths.map(normalizePath))
      mountScratch(template, spec, ref, path, "readOnlyRootFilesystem", rec);
  }
}

/** An emptyDir mounted at `path` in the container, unless something already covers it. */
function mountScratch(
  template: PodTemplateRef,
  spec: Obj,
  ref: ContainerRef,
  path: string,
  rule: string,
  rec: Recorder,
): void {
  const container = ref.container as unknown as Obj;
  if (mountsCover(asArray(container.volumeMounts), path)) return;
  const name = scratchVolume(template, spec, path, rule, rec);
  const list = (container.volumeMounts ??= []) as unknown[];
  const mount = { name, mountPath: path };
  list.push(mount);
  rec.changes.push({
    rule,
    message: `${ref.path}.volumeMounts[${list.length - 1}]=${JSON.stringify(mount)}`,
  });
}

export function normalizePath(path: string): string {
  return withoutTrailingSlashes(path) || "/";
}

/** Whether the container already mounts something at `path` or at a directory above it. */
function mountsCover(mounts: unknown[], path: string): boolean {
  return mounts.some(m => {
    const mountPath = asObject(m)?.mountPath;
    if (typeof mountPath !== "string") return false;
    const mp = normalizePath(mountPath);
    return mp === path || path.startsWith(mp === "/" ? "/" : `${mp}/`);
  });
}

/** A DNS label for the scratch volume of a path: "/tmp" → "ag-writable-tmp". Stable across runs. */
export function scratchVolumeName(path: string): string {
  const slug =
    path
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, "-")
      .replace(/^-+|-+$/g, "") || "root";
  const name = `ag-writable-${slug}`;
  if (name.length <= 63) return name;
  return `${name.slice(0, 54).replace(/-+$/, "")}-${fnv1a(path)}`;
}

function fnv1a(s: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, "0");
}

/**
 * The emptyDir volume for a writable path: the one already in the pod under our name (shared by
 * every container), or a new one. A user's volume of another type under that name is never reused.
 */
function scratchVolume(
  template: PodTemplateRef,
  spec: Obj,
  path: string,
  rule: string,
  rec: Recorder,
): string {
  const volumes = (spec.volumes ??= []) as unknown[];
  const base = scratchVolumeName(path);
  for (let i = 1; ; i++) {
    const name = i === 1 ? base : `${base.slice(0, 60 - String(i).length)}-${i}`;
    const existing = volumes.map(asObject).find(v => v?.name === name);
    if (existing && asObject(existing.emptyDir)) return name;
    if (existing) continue;
    const volume = { name, emptyDir: {} };
    volumes.push(volume);
    rec.changes.push({
      rule,
      message: `${fieldPath(template, "spec.volumes")}[${volumes.length - 1}]=${JSON.stringify(volume)}`,
    });
    return name;
  }
}
