// The shared-memory rules, pure: a memory-backed /dev/shm sized from the memory limits, in the
// pods the setting chooses. Why: docs/adr/0018-shared-memory-within-the-memory-limit.md
import type { V1ObjectMeta } from "@kubernetes/client-node";
import { limitRangeDefaults } from "../resource-quota/resources";
import { recordedFixes } from "../../lib/objects/fix-trace";
import {
  describeObject,
  fieldPath,
  type KubeObject,
  type PodTemplateRef,
} from "../../lib/objects/pod";
import {
  noFindings,
  type PodTarget,
  type RuleChange,
  type RuleContext,
  type RuleFindings,
} from "../../lib/engine/policy";
import { formatQuantity, safeParseQuantity } from "../../lib/objects/quantity";
import { isGpuResource } from "../../lib/objects/accelerators";
import { isRecord } from "../../lib/objects/record";
import { withoutTrailingSlashes } from "../../lib/objects/text";
import { NS_KEYS, SHARED_MEMORY_MOUNT } from "../../lib/settings";
import { formatNote } from "../../lib/objects/verdict";

export const CAPABILITY = "shared-memory";
/** The one rule: the fix's changes, and the warning for a pod in scope that keeps 64 MiB. */
export const RULE = "dev-shm";
export const SHM_PATH = "/dev/shm";
/**
 * The volume's name. Not "dshm", which many charts use for their own: a prefix of ours (as the
 * security-context scratch volumes' "ag-writable-") that no user volume is likely to carry, and if
 * one does, the fix leaves the pod alone rather than reuse it.
 */
export const SHM_VOLUME = "ag-shared-memory";

type Obj = Record<string, unknown>;
type Choice = (typeof SHARED_MEMORY_MOUNT)[number];

const MI = 1_048_576n;

/** The init and regular containers that are objects (ephemeral ones cannot be given a volume). */
function containerList(spec: Obj): { kind: string; index: number; container: Obj }[] {
  const out: { kind: string; index: number; container: Obj }[] = [];
  for (const kind of ["initContainers", "containers"] as const) {
    const list = spec[kind];
    if (!Array.isArray(list)) continue;
    list.forEach((container, index) => {
      if (isRecord(container)) out.push({ kind, index, container });
    });
  }
  return out;
}

/** The first GPU resource a container asks for (more than 0, in limits or requests), if any. */
export function gpuAskedFor(template: PodTemplateRef): string | undefined {
  const spec = template.spec as unknown;
  if (!isRecord(spec)) return undefined;
  for (const { container } of containerList(spec)) {
    const resources = container.resources;
    if (!isRecord(resources)) continue;
    for (const list of [resources.limits, resources.requests]) {
      if (!isRecord(list)) continue;
      for (const [name, value] of Object.entries(list)) {
        if (!isGpuResource(name)) continue;
        const parsed = safeParseQuantity(value);
        if (parsed.ok && parsed.quantity.milli > 0n) return name;
      }
    }
  }
  return undefined;
}

/** The namespace's label when it names a valid choice, else the setting; and the bad label, if any. */
export function choiceOf(ctx: RuleContext): { choice: Choice; badLabel?: string } {
  const setting = ctx.settings.sharedMemory.mount;
  const label = ctx.namespace?.labels[NS_KEYS.sharedMemory];
  if (label === undefined) return { choice: setting };
  if ((SHARED_MEMORY_MOUNT as readonly string[]).includes(label))
    return { choice: label as Choice };
  return { choice: setting, badLabel: label };
}

/** Why the pod is in scope ("it asks for nvidia.com/gpu"), or undefined when it is not. */
function inScope(template: PodTemplateRef, ctx: RuleContext): string | undefined {
  const { choice } = choiceOf(ctx);
  const where =
    ctx.namespace?.labels[NS_KEYS.sharedMemory] === choice
      ? `the namespace label ${NS_KEYS.sharedMemory}=${choice}`
      : `sharedMemory.mount: ${choice}`;
  if (choice === "off") return undefined;
  if (choice === "all") return where;
  const gpu = gpuAskedFor(template);
  return gpu ? `it asks for ${gpu}` : undefined;
}

/** Whether a mount decides what the container sees at /dev/shm: there, below it, or /dev itself. */
function mountsShm(mount: unknown): boolean {
  const path = isRecord(mount) ? mount.mountPath : undefined;
  if (typeof path !== "string") return false;
  const p = withoutTrailingSlashes(path);
  return p === SHM_PATH || p === "/dev" || p.startsWith(`${SHM_PATH}/`);
}

const isMemoryEmptyDir = (volume: Obj | undefined) =>
  !!volume && isRecord(volume.emptyDir) && volume.emptyDir.medium === "Memory";

/** How the size limit was chosen: from a memory limit (which) or the default. */
export interface Sizing {
  sizeLimit: string;
  /** The memory limit it is a fraction of, and whose ("the pod" for spec.resources); none: the default. */
  from?: { limit: string; of: string };
}

function memoryLimit(resources: unknown): bigint | undefined {
  if (!isRecord(resources) || !isRecord(resources.limits)) return undefined;
  const parsed = safeParseQuantity(resources.limits.memory);
  return parsed.ok && parsed.quantity.milli > 0n ? parsed.quantity.milli : undefined;
}

/**
 * The size limit: sharedMemory.sizeFraction of the pod-level memory limit (spec.resources) when
 * set, else of the largest container memory limit (after the namespace's LimitRange defaults, which
 * a Pod has already had and a template's pods will get); without any, sharedMemory.defaultSizeLimit.
 * Whole MiB, rounded down, at least 1Mi.
 */
export function sizeFor(template: PodTemplateRef, ctx: RuleContext): Sizing {
  const settings = ctx.settings.sharedMemory;
  const spec = template.spec as unknown as Obj;
  let largest: { milli: bigint; of: string } | undefined;
  const podLimit = memoryLimit(spec.resources);
  if (podLimit !== undefined) largest = { milli: podLimit, of: "the pod (spec.resources)" };
  else {
    const ranges = ctx.namespaceName ? ctx.cluster.limitRanges(ctx.namespaceName) : undefined;
    const defaulted = limitRangeDefaults(ranges).limits.get("memory")?.milli;
    for (const { container } of containerList(spec)) {
      const milli = memoryLimit(container.resources) ?? defaulted;
      if (milli !== undefined && (!largest || milli > largest.milli))
        largest = { milli, of: `container "${String(container.name ?? "")}"` };
    }
  }
  if (!largest) return { sizeLimit: String(settings.defaultSizeLimit) };
  const perMillion = BigInt(Math.round(settings.sizeFraction * 1_000_000));
  const bytes = ((largest.milli / 1000n) * perMillion) / 1_000_000n;
  const mib = bytes / MI > 0n ? bytes / MI : 1n;
  return {
    sizeLimit: formatQuantity({ milli: mib * MI * 1000n, format: "BinarySI" }),
    from: {
      limit: formatQuantity({ milli: largest.milli, format: "BinarySI" }),
      of: largest.of,
    },
  };
}

/** What the fix would do with a pod spec, or why it leaves it alone. */
type Plan =
  | { kind: "mount"; volumes: unknown[]; existing: boolean; lacking: ContainerAt[] }
  | { kind: "leave"; why?: string };
interface ContainerAt {
  kind: string;
  index: number;
  container: Obj;
}

function plan(template: PodTemplateRef, ctx: RuleContext): Plan {
  const spec = template.spec as unknown;
  if (!isRecord(spec)) return { kind: "leave" };
  // Their /dev/shm is the host's (hostIPC) or there is none (Windows): not ours to change.
  if (spec.hostIPC === true) return { kind: "leave" };
  if (isRecord(spec.os) && spec.os.name === "windows") return { kind: "leave" };
  if (spec.volumes !== undefined && spec.volumes !== null && !Array.isArray(spec.volumes))
    return { kind: "leave" };
  const volumes = (spec.volumes as unknown[] | undefined | null) ?? [];
  const containers = containerList(spec);
  if (!containers.length) return { kind: "leave" };
  const ours = volumes.find(v => isRecord(v) && v.name === SHM_VOLUME) as Obj | undefined;
  if (ours && !isMemoryEmptyDir(ours))
    return {
      kind: "leave",
      why: `${fieldPath(template, "spec.volumes")} already has a volume named ${SHM_VOLUME} that is not a memory-backed emptyDir`,
    };
  const lacking: ContainerAt[] = [];
  for (const c of containers) {
    const mounts = c.container.volumeMounts;
    if (mounts !== undefined && mounts !== null && !Array.isArray(mounts)) return { kind: "leave" };
    const atShm = ((mounts as unknown[] | undefined | null) ?? []).filter(mountsShm);
    // The user's own choice at /dev/shm, in any container: the pod is theirs to size.
    if (atShm.some(m => (m as Obj).name !== SHM_VOLUME)) return { kind: "leave" };
    if (!atShm.length) lacking.push(c);
  }
  if (!lacking.length) return { kind: "leave" };
  // A fix must not push a working pod over payload-size's limits (the webhook would deny it).
  const payload = ctx.settings.payload;
  if (payload.enabled && !ours && payload.maxVolumes && volumes.length + 1 > payload.maxVolumes)
    return {
      kind: "leave",
      why: `another volume would exceed payload.maxVolumes (${payload.maxVolumes})`,
    };
  const perContainer = payload.maxVolumeMountsPerContainer;
  if (
    payload.enabled &&
    perContainer &&
    lacking.some(c => ((c.container.volumeMounts as unknown[]) ?? []).length + 1 > perContainer)
  )
    return {
      kind: "leave",
      why: `another volume mount would exceed payload.maxVolumeMountsPerContainer (${perContainer})`,
    };
  return { kind: "mount", volumes, existing: !!ours, lacking };
}

/**
 * The fix: a memory-backed emptyDir at /dev/shm in every init and regular container of a pod in
 * scope. Never when any container mounts something of the user's there (or at /dev), when the pod
 * shares the host's IPC, or when a volume of another kind has our name. Idempotent: the second run
 * finds every container mounting it. A container added later (a sidecar another webhook injects
 * before our reinvocation) gets the same volume mounted.
 */
export function mountSharedMemory(target: PodTarget, ctx: RuleContext): RuleChange[] {
  const { template } = target;
  if (!inScope(template, ctx)) return [];
  const p = plan(template, ctx);
  if (p.kind === "leave") return [];
  const spec = template.spec as unknown as Obj;
  const changes: RuleChange[] = [];
  if (!p.existing) {
    const sizing = sizeFor(template, ctx);
    const volume = {
      name: SHM_VOLUME,
      emptyDir: { medium: "Memory", sizeLimit: sizing.sizeLimit },
    };
    const volumes = (spec.volumes ??= []) as unknown[];
    volumes.push(volume);
    const basis = sizing.from
      ? `${ctx.settings.sharedMemory.sizeFraction} of ${sizing.from.limit}, the memory limit of ${sizing.from.of}`
      : "sharedMemory.defaultSizeLimit: no container has a memory limit";
    changes.push({
      rule: RULE,
      message: `${fieldPath(template, "spec.volumes")}[${volumes.length - 1}]=${JSON.stringify(volume)} (${basis})`,
    });
  }
  for (const c of p.lacking) {
    const mounts = (c.container.volumeMounts ??= []) as unknown[];
    const mount = { name: SHM_VOLUME, mountPath: SHM_PATH };
    mounts.push(mount);
    changes.push({
      rule: RULE,
      message: `${fieldPath(template, `spec.${c.kind}[${c.index}]`)}.volumeMounts[${mounts.length - 1}]=${JSON.stringify(mount)}`,
    });
  }
  return changes;
}

/** Whether this capability's fix changed this pod (its trace) or this workload's simulated copy. */
function fixedHere(target: PodTarget): boolean {
  if (target.fixed?.has(`${CAPABILITY}/${RULE}`)) return true;
  const metadata: V1ObjectMeta = target.template.metadata;
  return !!recordedFixes({ metadata }).get(CAPABILITY)?.includes(RULE);
}

/** The size limit of our volume as it stands in the spec. */
function ourSizeLimit(template: PodTemplateRef): string | undefined {
  const volumes = (template.spec as unknown as Obj).volumes;
  if (!Array.isArray(volumes)) return undefined;
  const ours = volumes.find(v => isRecord(v) && v.name === SHM_VOLUME) as Obj | undefined;
  const size = isRecord(ours?.emptyDir) ? ours.emptyDir.sizeLimit : undefined;
  return typeof size === "string" ? size : undefined;
}

/** Whether some container sees a volume of the pod's at /dev/shm (or the pod shares the host's IPC). */
function hasOwnShm(template: PodTemplateRef): boolean {
  const spec = template.spec as unknown;
  if (!isRecord(spec)) return true;
  if (spec.hostIPC === true || (isRecord(spec.os) && spec.os.name === "windows")) return true;
  return containerList(spec).some(
    ({ container }) =>
      Array.isArray(container.volumeMounts) && container.volumeMounts.some(mountsShm),
  );
}

/**
 * The checks on a pod as stored (after every fix) or a workload's fixed copy:
 *  - where the fix mounted /dev/shm, a note of its size and of what counts its pages;
 *  - a pod in scope that still has the runtime's 64 MiB (the fix could not be applied, or the pod
 *    predates the module): a warning (never a denial), rule dev-shm;
 *  - a namespace label that names no choice: a warning, and the setting is used.
 */
export function checkSharedMemory(
  object: KubeObject,
  target: PodTarget,
  ctx: RuleContext,
): RuleFindings {
  const findings = noFindings();
  const { template } = target;
  const { badLabel } = choiceOf(ctx);
  if (badLabel !== undefined) {
    const ns = ctx.namespaceName;
    findings.warnings.push(
      formatNote(
        CAPABILITY,
        `namespace ${ns} has ${NS_KEYS.sharedMemory}=${JSON.stringify(badLabel.slice(0, 63))}, which is not one of ${SHARED_MEMORY_MOUNT.join("|")}: sharedMemory.mount (${ctx.settings.sharedMemory.mount}) is used. Fix: kubectl label namespace ${ns} ${NS_KEYS.sharedMemory}=<${SHARED_MEMORY_MOUNT.join("|")}> --overwrite`,
      ),
    );
  }
  const pods = target.isTemplate ? `the pods of ${describeObject(object)}` : describeObject(object);
  const why = inScope(template, ctx);
  // Our volume, and the trace that we put it there (a trace alone, which anyone may write, is not).
  const size = ourSizeLimit(template);
  if (size !== undefined && fixedHere(target)) {
    const sizing = sizeFor(template, ctx);
    const counted = sizing.from
      ? `what is written there counts within the memory limit of the container that writes it, which quota and node fit already count (no request or limit was raised)`
      : `no container has a memory limit, so what is written there counts against the pod's memory unbounded, and neither quota nor node fit sees it. Fix: set resources.limits.memory on its containers (the size then follows it)`;
    findings.warnings.push(
      formatNote(
        CAPABILITY,
        `${pods} ${target.isTemplate ? "will get" : "got"} /dev/shm as a memory-backed emptyDir (${SHM_VOLUME}) of ${size}${why ? ` (${why})` : ""}: ${counted}`,
      ),
    );
    return findings;
  }
  if (!why || hasOwnShm(template)) return findings;
  const p = plan(template, ctx);
  const reason = p.kind === "leave" && p.why ? ` (not fixed: ${p.why})` : "";
  findings.violations.push({
    rule: RULE,
    severity: "warn",
    message: `${pods} keep the container runtime's 64 MiB /dev/shm although ${why}: PyTorch DataLoader workers die with "Bus error ... out of shared memory" once it is full${reason}`,
    fix: `mount a memory-backed emptyDir at /dev/shm: add {"name":"dshm","emptyDir":{"medium":"Memory","sizeLimit":"${sizeFor(template, ctx).sizeLimit}"}} to ${fieldPath(template, "spec.volumes")} and {"name":"dshm","mountPath":"/dev/shm"} to each container's volumeMounts`,
  });
  return findings;
}
