// The mutation: fill what Pod Security Standards restricted needs and the user left unset, never
// change what the user set (an explicit `readOnlyRootFilesystem: false` or `runAsNonRoot: false` is
// left for validation to deny with its fix). Idempotent: every fill is guarded by "still unset".
// Windows pods get only what the API allows for them (spec.os.name=windows forbids runAsUser,
// runAsGroup, seccompProfile and the container fields set here; runAsNonRoot is allowed).
import { containersOf, fieldPath, type ContainerRef, type PodTemplateRef } from "../../lib/pod";
import type { Settings } from "../../lib/settings";
import { type RuleChange } from "../../lib/policy";
import { asArray, asObject, isUserNamespacePod, isWindowsPod, type Obj } from "./checks/helpers";

export const CAPABILITY = "security-context";

type SecuritySettings = Settings["securityContext"];

const unset = (x: unknown) => x === undefined || x === null;

/** Adding SYS_ADMIN makes allowPrivilegeEscalation=false invalid (the API rejects the pair). */
const SYS_ADMIN = new Set(["CAP_SYS_ADMIN", "SYS_ADMIN"]);

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

export function fixPodSecurity(template: PodTemplateRef, settings: SecuritySettings): RuleChange[] {
  const spec = asObject(template.spec);
  if (!spec) return [];
  const rec = new Recorder();
  const windows = isWindowsPod(template);
  const containers = containersOf(template);
  const before = spec.securityContext;
  const podSc = securityContext(spec);
  if (podSc) fixPodLevel(template, podSc, containers, settings, windows, rec);
  if (unset(before) && podSc && Object.keys(podSc).length === 0) delete spec.securityContext;
  if (!windows) {
    for (const ref of containers) fixContainer(template, spec, ref, settings, rec);
  }
  return rec.changes;
}

function fixPodLevel(
  template: PodTemplateRef,
  sc: Obj,
  containers: ContainerRef[],
  settings: SecuritySettings,
  windows: boolean,
  rec: Recorder,
): void {
  const at = (field: string) => fieldPath(template, `spec.securityContext.${field}`);
  // A user-namespaced pod (hostUsers: false) may run as root inside its namespace; PSA exempts it.
  if (!isUserNamespacePod(template)) {
    if (unset(sc.runAsNonRoot))
      rec.set(sc, "runAsNonRoot", true, at("runAsNonRoot"), "runAsNonRoot");
    if (!windows && unset(sc.runAsUser))
      rec.set(sc, "runAsUser", settings.runAsUser, at("runAsUser"), "runAsUser");
    if (!windows && unset(sc.runAsGroup))
      rec.set(sc, "runAsGroup", settings.runAsGroup, at("runAsGroup"), "runAsGroup");
  }
  const everyContainerHasOwn =
    containers.length > 0 &&
    containers.every(
      c => !unset(asObject((c.container as unknown as Obj).securityContext)?.seccompProfile),
    );
  if (!windows && unset(sc.seccompProfile) && !everyContainerHasOwn) {
    rec.set(
      sc,
      "seccompProfile",
      { type: "RuntimeDefault" },
      at("seccompProfile"),
      "seccompProfile_restricted",
    );
  }
}

function fixContainer(
  template: PodTemplateRef,
  spec: Obj,
  ref: ContainerRef,
  settings: SecuritySettings,
  rec: Recorder,
): void {
  const container = ref.container as unknown as Obj;
  const sc = securityContext(container);
  if (!sc) return;
  const at = (field: string) => `${ref.path}.securityContext.${field}`;

  const caps = unset(sc.capabilities) ? undefined : asObject(sc.capabilities);
  const added = Array.isArray(caps?.add) ? caps.add.map(String) : [];
  if (
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
  const capabilities = securityContext(sc, "capabilities");
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

  if (unset(sc.readOnlyRootFilesystem)) {
    const mounts = container.volumeMounts;
    const volumes = spec.volumes;
    // Without a place to put the scratch volumes, a read-only root could break the image: skip.
    if (!unset(mounts) && !Array.isArray(mounts)) return;
    if (!unset(volumes) && !Array.isArray(volumes)) return;
    rec.set(
      sc,
      "readOnlyRootFilesystem",
      true,
      at("readOnlyRootFilesystem"),
      "readOnlyRootFilesystem",
    );
    for (const path of settings.writablePaths.map(normalizePath)) {
      if (mountsCover(asArray(container.volumeMounts), path)) continue;
      const name = scratchVolume(template, spec, path, rec);
      const list = (container.volumeMounts ??= []) as unknown[];
      const mount = { name, mountPath: path };
      list.push(mount);
      rec.changes.push({
        rule: "readOnlyRootFilesystem",
        message: `${ref.path}.volumeMounts[${list.length - 1}]=${JSON.stringify(mount)}`,
      });
    }
  }
}

export function normalizePath(path: string): string {
  const trimmed = path.replace(/\/+$/, "");
  return trimmed === "" ? "/" : trimmed;
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
function scratchVolume(template: PodTemplateRef, spec: Obj, path: string, rec: Recorder): string {
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
      rule: "readOnlyRootFilesystem",
      message: `${fieldPath(template, "spec.volumes")}[${volumes.length - 1}]=${JSON.stringify(volume)}`,
    });
    return name;
  }
}
