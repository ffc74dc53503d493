// What every part of the fix shares: the pod being fixed, what its level asks to be filled, and the
// record of each change. fix.ts builds one FixContext per pod; fix-pod.ts and fix-container.ts fill.
import type { V1Container } from "@kubernetes/client-node";
import { fieldPath, type ContainerRef, type PodTemplateRef } from "../../lib/objects/pod";
import type { Settings } from "../../lib/settings";
import { type RuleChange } from "../../lib/engine/policy";
import { checksFor, type LevelVersion } from "./checks";
import {
  asObject,
  isUserNamespacePod,
  USER_NAMESPACE_RELAXED_SINCE,
  type Obj,
} from "./checks/helpers";
import { imageContainers, type Identity, type ImageUser } from "./image-user";

export type SecuritySettings = Settings["securityContext"];

export interface FixInputs {
  /** Each container's image user (image-user.ts); a container missing here counts as unknown. */
  users?: ReadonlyMap<V1Container, ImageUser>;
  /** Whether to fill readOnlyRootFilesystem (the setting, or the namespace's label). */
  readOnlyRoot?: "off" | "fill";
  /** The level to fix to, at the policy version it evaluates (default: restricted, latest). */
  level?: LevelVersion;
  /** Whether to copy a root image's WORKDIR (the setting, or the namespace's label). */
  workdirCopy?: "copy" | "off";
  /** Whether to set the low-port sysctl (the setting; fix-low-ports.ts). */
  lowPorts?: "sysctl" | "off";
  /** Whether to mount emptyDirs at a root image's root-owned cache dirs (the setting). */
  cacheDirs?: "emptyDir" | "off";
}

/** What a level's checks require to be set, at its policy version: the fills that follow. */
export interface Fills {
  /** runAsNonRoot, with the user each container runs as, its HOME and fsGroup. */
  nonRoot: boolean;
  /** Whether a pod in its own user namespace is exempt from runAsNonRoot (from policy 1.35). */
  userNamespaceExempt: boolean;
  allowPrivilegeEscalation: boolean;
  dropAll: boolean;
  seccomp: boolean;
}

export function fillsFor({ level, version }: LevelVersion): Fills {
  const required = new Set(checksFor(level, version).map(c => c.id));
  return {
    nonRoot: required.has("runAsNonRoot"),
    userNamespaceExempt: version === "latest" || version >= USER_NAMESPACE_RELAXED_SINCE,
    allowPrivilegeEscalation: required.has("allowPrivilegeEscalation"),
    dropAll: required.has("capabilities_restricted"),
    seccomp: required.has("seccompProfile_restricted"),
  };
}

/** Whether the fix chooses who containers run as: runAsNonRoot is to be filled for this pod. */
export function nonRootFilled(template: PodTemplateRef, fills: Fills): boolean {
  return fills.nonRoot && !(fills.userNamespaceExempt && isUserNamespacePod(template));
}

export const unset = (x: unknown) => x === undefined || x === null;

export class Recorder {
  readonly changes: RuleChange[] = [];
  /**
   * The cache-dir mounts made so far (cache-dirs.ts caps them per pod): counted, not searched for
   * in `changes`, which grow with the pod author's containers (a search per container: its square).
   */
  cacheDirMounts = 0;
  set(obj: Obj, key: string, value: unknown, path: string, rule: string): void {
    obj[key] = value;
    this.changes.push({
      rule,
      message: `${path}=${JSON.stringify(value)}`,
    });
  }
}

/** One pod's fix: built once by fixPodSecurity, read by every fill. */
export interface FixContext {
  readonly template: PodTemplateRef;
  /** template.spec, known to be an object. */
  readonly spec: Obj;
  readonly settings: SecuritySettings;
  readonly inputs: FixInputs;
  readonly fills: Fills;
  readonly windows: boolean;
  /** Who each container left to us runs as; empty when the fix chooses no user. */
  readonly chosen: ReadonlyMap<V1Container, Identity>;
  readonly rec: Recorder;
}

/**
 * The securityContext object at `holder[key]`, created when missing; undefined when the user put
 * something that is not an object there (malformed: leave it alone).
 */
export function securityContext(holder: Obj, key = "securityContext"): Obj | undefined {
  if (unset(holder[key])) holder[key] = {};
  return asObject(holder[key]);
}

/**
 * Removes the securityContext securityContext() created on `holder` (it had none `before`) when
 * nothing was filled in it (a level that requires nothing): no empty object left behind.
 */
export function dropIfLeftEmpty(holder: Obj, before: unknown): void {
  const sc = asObject(holder.securityContext);
  if (unset(before) && sc && Object.keys(sc).length === 0) delete holder.securityContext;
}

export function imageContainersAndEphemeral(template: PodTemplateRef): ContainerRef[] {
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
