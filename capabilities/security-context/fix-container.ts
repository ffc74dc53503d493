// The container-level fills: a container's own user when it does not share the pod's,
// allowPrivilegeEscalation, capabilities.drop ALL, a writable HOME, readOnlyRootFilesystem.
import type { ContainerRef } from "../../lib/objects/pod";
import { asArray, asObject, type Obj } from "./checks/helpers";
import { securityContext, unset, type FixContext } from "./fix-context";
import { mountScratch, normalizePath } from "./fix-scratch";
import { applyCopy, copyDecision } from "./workdir-copy";
import { mountCacheDirs } from "./cache-dirs";

/** Adding SYS_ADMIN makes allowPrivilegeEscalation=false invalid (the API rejects the pair). */
const SYS_ADMIN = new Set(["CAP_SYS_ADMIN", "SYS_ADMIN"]);

function hasEnv(container: Obj, name: string): boolean {
  return asArray(container.env).some(e => asObject(e)?.name === name);
}

/** The container's fills, in its securityContext `sc` (and its env and volume mounts). */
export function fixContainer(ctx: FixContext, ref: ContainerRef, sc: Obj): void {
  const { spec, settings, inputs, fills, rec } = ctx;
  const container = ref.container as unknown as Obj;
  const identity = ctx.chosen.get(ref.container);
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

  // A root image's WORKDIR this UID cannot write: a copy it can (before HOME, so that only the
  // pod's own volumes count as "already mounted there").
  const user = inputs.users?.get(ref.container);
  if (identity && ref.kind === "containers") {
    const decision = copyDecision(user, identity, container, {
      mode: inputs.workdirCopy ?? settings.workdirCopy,
      maxBytes: settings.workdirCopyBytes,
    });
    if (decision?.copy) applyCopy(ctx, ref, identity, decision.workdir);
  }

  // A UID the image has no HOME for (root-built, or a named user) gets a writable one, unless the
  // container or its image says where HOME is.
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
    mountScratch(ctx, ref, home, "writableHome");
  }

  // A root image's Env-named cache dirs it cannot write: emptyDirs (after HOME: one under it is
  // covered already).
  if (ref.kind !== "ephemeralContainers" && (inputs.cacheDirs ?? settings.cacheDirs) !== "off")
    mountCacheDirs(ctx, ref, user, identity);

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
      mountScratch(ctx, ref, path, "readOnlyRootFilesystem");
  }
}
