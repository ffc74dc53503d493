// The mutation: fill what the namespace's Pod Security level needs and the user left unset, with
// the user the image was built for. Idempotent. Why: docs/adr/0006-the-fix-follows-the-image.md,
// docs/adr/0022-fix-to-the-namespace-pod-security-level.md
// This file chooses who each container runs as and walks the pod; the fills are in fix-pod.ts
// (spec.securityContext) and fix-container.ts (each container's), scratch volumes in fix-scratch.ts.
import type { V1Container } from "@kubernetes/client-node";
import { type ContainerRef, type PodTemplateRef } from "../../lib/objects/pod";
import { type RuleChange } from "../../lib/engine/policy";
import { type LevelVersion } from "./checks";
import { asObject, isWindowsPod, type Obj } from "./checks/helpers";
import { identityFor, imageContainers, type Identity } from "./image-user";
import {
  dropIfLeftEmpty,
  fillsFor,
  imageContainersAndEphemeral,
  nonRootFilled,
  Recorder,
  securityContext,
  unset,
  type FixContext,
  type FixInputs,
  type SecuritySettings,
} from "./fix-context";
import { fixContainer } from "./fix-container";
import { fixFsGroup, fixPodLevel } from "./fix-pod";
import { fixLowPorts } from "./fix-low-ports";

export type { FixInputs } from "./fix-context";
export { normalizePath, scratchVolumeName } from "./fix-scratch";

export const CAPABILITY = "security-context";

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
  const windows = isWindowsPod(template);
  const before = spec.securityContext;
  const podSc = securityContext(spec);
  const ctx: FixContext = {
    template,
    spec,
    settings,
    inputs,
    fills,
    windows,
    chosen:
      !windows && nonRootFilled(template, fills)
        ? identities(template, settings, inputs)
        : new Map<V1Container, Identity>(),
    rec: new Recorder(),
  };
  if (podSc) fixPodLevel(ctx, podSc);
  if (!windows) {
    for (const ref of imageContainersAndEphemeral(template)) {
      const container = ref.container as unknown as Obj;
      const containerBefore = container.securityContext;
      const sc = securityContext(container);
      if (!sc) continue;
      fixContainer(ctx, ref, sc);
      dropIfLeftEmpty(container, containerBefore);
    }
    if (podSc && fills.nonRoot) fixFsGroup(ctx, podSc);
    // After the containers: their fills decide who runs as whom with which capabilities.
    if (podSc) fixLowPorts(ctx, podSc);
  }
  dropIfLeftEmpty(spec, before);
  return ctx.rec.changes;
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
