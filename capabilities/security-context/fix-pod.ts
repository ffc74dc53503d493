// The pod-level fills: spec.securityContext's runAsNonRoot, the user every container shares,
// seccompProfile, and fsGroup for writable volumes.
import type { V1Container } from "@kubernetes/client-node";
import { fieldPath } from "../../lib/objects/pod";
import { asArray, asObject, type Obj } from "./checks/helpers";
import { imageContainers, type Identity } from "./image-user";
import { imageContainersAndEphemeral, nonRootFilled, unset, type FixContext } from "./fix-context";

/** Volume types whose files a non-root user must be given by fsGroup to write. */
const WRITABLE_VOLUME_TYPES = ["persistentVolumeClaim", "emptyDir", "ephemeral"];

/** The one identity every container shares, if they do. */
function shared(chosen: ReadonlyMap<V1Container, Identity>): Identity | undefined {
  const all = [...chosen.values()];
  if (!all.length) return undefined;
  const [first] = all;
  return all.every(i => i.uid === first.uid && i.gid === first.gid) ? first : undefined;
}

/** The fills in the pod's securityContext `sc`, but fsGroup (after the containers: fixFsGroup). */
export function fixPodLevel(ctx: FixContext, sc: Obj): void {
  const { template, chosen, settings, windows, fills, rec } = ctx;
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
export function fixFsGroup(ctx: FixContext, sc: Obj): void {
  const { template, spec, chosen, settings, rec } = ctx;
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
