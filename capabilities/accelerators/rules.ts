// The accelerators rules, pure: what a pod asks of GPUs (extended resources and DRA claims on a GPU
// class), the fix that lets it reach the nodes offering them, and the checks that keep it there.
// Why: docs/adr/0034-accelerator-tolerations-from-the-node-view.md
import type { V1PodSpec, V1Taint, V1Toleration } from "@kubernetes/client-node";
import {
  noFindings,
  type PodTarget,
  type RuleChange,
  type RuleContext,
  type RuleFindings,
  type RuleViolation,
} from "../../lib/engine/policy";
import { isGpuDriver, isGpuResource } from "../../lib/objects/accelerators";
import {
  describeContainer,
  describeObject,
  fieldPath,
  hasController,
  isPod,
  type KubeObject,
  type PodTemplateRef,
} from "../../lib/objects/pod";
import { formatQuantity, safeParseQuantity } from "../../lib/objects/quantity";
import { isRecord } from "../../lib/objects/record";
import { formatNote } from "../../lib/objects/verdict";
import { NS_KEYS } from "../../lib/settings";
import { podClaims } from "../resource-quota/dra";
import { list, nodeIdentityMatters } from "../resource-quota/node-classes";
import {
  limitRangeDefaults,
  podResources,
  type ContainerResources,
} from "../resource-quota/resources";
import { describeTaint, selectsNode, tolerates } from "../resource-quota/scheduler-filters";
import { gpuNodes } from "./gpu-nodes";

export const CAPABILITY = "accelerators";
/** The fix's changes. */
export const FIX_RULES = { tolerations: "tolerations", runtimeClass: "runtime-class" } as const;
/** The checks, each with its setting (accelerators.<setting>: deny | warn | off). */
export const CHECKS = {
  "memory-request": "memoryRequest",
  "cpu-request": "cpuRequest",
  "max-per-pod": "maxPerPod",
  "bare-pod": "barePod",
  "gpu-node-without-accelerator": "gpuNodeWithoutAccelerator",
} as const;
export type CheckRule = keyof typeof CHECKS;
export const RULES = Object.keys(CHECKS) as CheckRule[];

/**
 * Accelerator resources of one pod read at most: each may add tolerations, and a pod author must not
 * make the fix write more than a handful (a real pod asks one or two).
 */
export const MAX_RESOURCES = 8;
/** Containers named in one message at most (the rest counted). */
const SHOWN = 5;

type Obj = Record<string, unknown>;

/** The GPUs one pod asks for: extended resources, and devices claimed on a GPU DeviceClass. */
export interface AcceleratorAsks {
  /** Extended resource → what the pod asks (its effective request, as the scheduler counts it). */
  resources: Map<string, bigint>;
  /** Pod claim entries (spec.resourceClaims[].name) whose template asks GPU devices, and how many. */
  claims: Map<string, number>;
  /** Every accelerator together: what max-per-pod counts. */
  total: bigint;
  /** The containers that ask for one (a GPU resource, or a claim above). */
  containers: ContainerResources[];
}

const wholeUnits = (milli: bigint) => (milli + 999n) / 1000n;
const asksSome = (value: unknown) => {
  const parsed = safeParseQuantity(value);
  return parsed.ok && parsed.quantity.milli > 0n;
};

/** The GPU resources a pod spec names (more than 0, limits or requests), in order, at most MAX_RESOURCES. */
function resourceNames(spec: Obj): string[] {
  const names = new Set<string>();
  for (const kind of ["initContainers", "containers"]) {
    for (const c of list<Obj>(spec[kind])) {
      const resources = isRecord(c.resources) ? c.resources : {};
      for (const entries of [resources.limits, resources.requests]) {
        if (!isRecord(entries)) continue;
        for (const [name, value] of Object.entries(entries))
          if (isGpuResource(name) && !names.has(name) && asksSome(value)) names.add(name);
      }
    }
  }
  return [...names].slice(0, MAX_RESOURCES);
}

/** The pod's claim entries on templates whose requests name a GPU class, with their devices. */
function gpuClaims(template: PodTemplateRef, ctx: RuleContext): Map<string, number> {
  const out = new Map<string, number>();
  const entries = (template.spec as { resourceClaims?: unknown }).resourceClaims;
  if (!Array.isArray(entries) || !entries.length || !ctx.namespaceName) return out;
  const isGpuClass = (name: string) => isGpuDriver(ctx.cluster.deviceClass?.(name)?.driver);
  const devices = new Map<string, number>(); // template name → GPU devices
  for (const claim of podClaims(template, ctx.namespaceName, ctx.cluster).claims) {
    let n = 0;
    for (const r of claim.template.requests) {
      if (r.exactly && isGpuClass(r.exactly.deviceClassName)) n += r.exactly.devices;
      const alternatives = (r.firstAvailable ?? []).filter(a => isGpuClass(a.deviceClassName));
      if (alternatives.length) n += Math.max(...alternatives.map(a => a.devices));
    }
    if (n > 0) devices.set(claim.templateName, n);
  }
  for (const entry of entries) {
    if (!isRecord(entry) || typeof entry.name !== "string") continue;
    const n = devices.get(String(entry.resourceClaimTemplateName));
    if (n) out.set(entry.name, n);
  }
  return out;
}

/** What a pod spec asks of accelerators (LimitRange defaults applied, as the API server will). */
export function acceleratorAsks(template: PodTemplateRef, ctx: RuleContext): AcceleratorAsks {
  const spec = template.spec as unknown;
  const none: AcceleratorAsks = {
    resources: new Map(),
    claims: new Map(),
    total: 0n,
    containers: [],
  };
  if (!isRecord(spec)) return none;
  const names = resourceNames(spec);
  const claims = gpuClaims(template, ctx);
  if (!names.length && !claims.size) return none;
  const ranges = ctx.namespaceName ? ctx.cluster.limitRanges(ctx.namespaceName) : undefined;
  const pod = podResources(template, limitRangeDefaults(ranges));
  const resources = new Map<string, bigint>();
  for (const name of names) {
    const milli = pod.requests.get(name)?.milli ?? 0n;
    if (milli > 0n) resources.set(name, wholeUnits(milli));
  }
  let total = [...resources.values()].reduce((a, b) => a + b, 0n);
  for (const n of claims.values()) total += BigInt(n);
  const containers = pod.containers.filter(
    c =>
      [...c.requests].some(([r, q]) => resources.has(r) && q.milli > 0n) ||
      list<{ name?: unknown }>((c.ref.container.resources as Obj | undefined)?.claims).some(
        claim => typeof claim.name === "string" && claims.has(claim.name),
      ),
  );
  return { resources, claims, total, containers };
}

/** The toleration that tolerates exactly this taint (its value too, when it has one). */
export function tolerationFor(taint: V1Taint): V1Toleration {
  return taint.value
    ? { key: taint.key, operator: "Equal", value: taint.value, effect: taint.effect }
    : { key: taint.key, operator: "Exists", effect: taint.effect };
}

/**
 * The fix: for each accelerator resource the pod asks for, a toleration of each taint the nodes
 * offering it carry (gpu-nodes.ts) and of the ExtendedResourceToleration convention (key = the
 * resource, Exists, NoSchedule), unless the pod already tolerates it; and runtimeClassName when the
 * setting names one and the pod has none. Nothing else, ever. Idempotent: a second run finds every
 * taint tolerated.
 */
export function fixAccelerators(target: PodTarget, ctx: RuleContext): RuleChange[] {
  const settings = ctx.settings.accelerators;
  const spec = target.template.spec as unknown;
  if (!settings.mutate || !isRecord(spec)) return [];
  const names = resourceNames(spec);
  const claims = names.length ? new Map() : gpuClaims(target.template, ctx);
  if (!names.length && !claims.size) return [];
  const changes: RuleChange[] = [];
  if (names.length && (spec.tolerations === undefined || Array.isArray(spec.tolerations))) {
    const view = gpuNodes(ctx.cluster.nodes());
    const tolerations = (spec.tolerations ?? []) as V1Toleration[];
    const have = () => list<V1Toleration>(tolerations);
    const added: { toleration: V1Toleration; why: string }[] = [];
    for (const resource of names) {
      const nodes = view?.resources.get(resource);
      const wanted: [V1Taint, string][] = (nodes?.taints ?? []).map(t => [
        t,
        `a taint of every node offering ${resource} (${nodes!.offering}, first ${nodes!.first}) and of no other`,
      ]);
      wanted.push([
        { key: resource, effect: "NoSchedule" },
        `the ExtendedResourceToleration convention for ${resource}`,
      ]);
      for (const [taint, why] of wanted) {
        if (tolerates(have(), taint)) continue;
        const toleration = tolerationFor(taint);
        tolerations.push(toleration);
        added.push({ toleration, why });
      }
    }
    if (added.length) spec.tolerations = tolerations;
    const first = tolerations.length - added.length;
    added.forEach(({ toleration, why }, i) =>
      changes.push({
        rule: FIX_RULES.tolerations,
        message: `${fieldPath(target.template, "spec.tolerations")}[${first + i}]=${JSON.stringify(toleration)} (${why})`,
      }),
    );
  }
  if (settings.runtimeClassName && !spec.runtimeClassName) {
    spec.runtimeClassName = settings.runtimeClassName;
    changes.push({
      rule: FIX_RULES.runtimeClass,
      message: `${fieldPath(target.template, "spec.runtimeClassName")}=${JSON.stringify(settings.runtimeClassName)} (accelerators.runtimeClassName: the pod asks for ${names[0] ?? "a GPU device claim"})`,
    });
  }
  return changes;
}

/** The most accelerators per pod: the namespace label when it is a whole number, else the setting. */
export function maxPerPod(ctx: RuleContext): { max: number; from: string; badLabel?: string } {
  const setting = {
    max: ctx.settings.accelerators.maxPerPodCount,
    from: "accelerators.maxPerPodCount",
  };
  const label = ctx.namespace?.labels[NS_KEYS.maxAccelerators];
  if (label === undefined) return setting;
  if (/^(0|[1-9][0-9]{0,3})$/.test(label))
    return { max: Number(label), from: `the namespace label ${NS_KEYS.maxAccelerators}=${label}` };
  return { ...setting, badLabel: label };
}

const isDaemonPod = (object: KubeObject) =>
  object.kind === "DaemonSet" ||
  (object.metadata?.ownerReferences ?? []).some(
    o => o.controller === true && o.kind === "DaemonSet",
  );

/** `container "a" (spec.containers[0]), container "b" (...) and 3 more`. */
const named = (containers: ContainerResources[], say: (c: ContainerResources) => string) => {
  const shown = containers
    .slice(0, SHOWN)
    .map(c => `${describeContainer(c.ref)} (${c.ref.path})${say(c)}`);
  return containers.length > SHOWN
    ? `${shown.join(", ")} and ${containers.length - SHOWN} more`
    : shown.join(", ");
};

/** Which node classes a pod that asks for no accelerator lands on only because they are GPU nodes. */
function landsOnGpuNodes(spec: V1PodSpec, ctx: RuleContext): string | undefined {
  const view = gpuNodes(ctx.cluster.nodes());
  // Where every node offers a GPU, a pod without one has nowhere else to go.
  if (!view?.someWithout) return undefined;
  const tolerations = list<V1Toleration>(spec.tolerations);
  for (const [resource, nodes] of view.resources) {
    if (!nodes.taints.length || !nodes.taints.every(t => tolerates(tolerations, t))) continue;
    const taints = nodes.taints.map(describeTaint);
    return `tolerates ${taints.join(", ")}, the taint${taints.length > 1 ? "s" : ""} that keep${taints.length > 1 ? "" : "s"} other pods off the ${nodes.offering} node(s) offering ${resource}`;
  }
  const selects =
    isRecord(spec.nodeSelector) ||
    isRecord(spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution);
  if (!selects || nodeIdentityMatters(spec)) return undefined;
  const selected = view.classes.filter(c => selectsNode(spec, c.node));
  if (selected.length && selected.every(c => c.offersGpu))
    return "selects only nodes that offer a GPU (spec.nodeSelector/affinity)";
  return undefined;
}

/**
 * The checks on a pod as stored (after every fix) or a workload's fixed copy: each rule is off, or
 * a warning, or a denial, as its setting says.
 */
export function checkAccelerators(
  object: KubeObject,
  target: PodTarget,
  ctx: RuleContext,
): RuleFindings {
  const findings = noFindings();
  const settings = ctx.settings.accelerators;
  const { template } = target;
  const pods = target.isTemplate ? `the pods of ${describeObject(object)}` : describeObject(object);
  const asks = acceleratorAsks(template, ctx);
  const report = (rule: CheckRule, v: Omit<RuleViolation, "rule" | "severity">) => {
    const action = settings[CHECKS[rule]];
    if (action === "off") return;
    findings.violations.push({
      rule,
      ...v,
      ...(action === "warn" ? { severity: "warn" as const } : {}),
    });
  };
  const limit = maxPerPod(ctx);
  if (limit.badLabel !== undefined) {
    const ns = ctx.namespaceName;
    findings.warnings.push(
      formatNote(
        CAPABILITY,
        `namespace ${ns} has ${NS_KEYS.maxAccelerators}=${JSON.stringify(limit.badLabel.slice(0, 63))}, which is not a whole number from 0 to 9999: ${limit.from} (${limit.max}) is used. Fix: kubectl label namespace ${ns} ${NS_KEYS.maxAccelerators}=<number> --overwrite`,
      ),
    );
  }
  const spec = template.spec as unknown;
  if (!isRecord(spec)) return findings;

  if (asks.total === 0n) {
    if (isDaemonPod(object)) return findings;
    const lands = landsOnGpuNodes(template.spec, ctx);
    if (lands)
      report("gpu-node-without-accelerator", {
        message: `${pods} ask${target.isTemplate ? "" : "s"} for no accelerator but ${lands}: they take a GPU node's CPU and memory from the jobs that need its GPUs`,
        fix: `remove those tolerations from ${fieldPath(template, "spec.tolerations")} and the GPU nodes from ${fieldPath(template, "spec.nodeSelector")}/affinity, or ask for the GPU the pod uses in resources.limits (e.g. nvidia.com/gpu: 1)`,
      });
    return findings;
  }

  const asked = [
    ...[...asks.resources].map(([r, n]) => `${n} ${r}`),
    ...[...asks.claims].map(([c, n]) => `${n} GPU device(s) of claim ${c}`),
  ].join(", ");

  const lowMemory = asks.containers.filter(c => {
    const request = c.requests.get("memory")?.milli ?? 0n;
    const limit = c.limits.get("memory")?.milli;
    return request === 0n || (limit !== undefined && request < limit);
  });
  if (lowMemory.length)
    report("memory-request", {
      message: `${pods}: ${named(lowMemory, c => {
        const request = c.requests.get("memory");
        const limit = c.limits.get("memory");
        if (!request || request.milli === 0n) return " asks no memory";
        return ` asks memory ${formatQuantity(request.milli, request.format)} below its limit ${formatQuantity(limit!.milli, limit!.format)}`;
      })} while using a GPU (${asked}): under memory pressure the kubelet evicts such a pod first, after hours on an expensive node`,
      fix: `set resources.requests.memory equal to resources.limits.memory in ${lowMemory
        .slice(0, SHOWN)
        .map(c => c.ref.path)
        .join(", ")}`,
    });

  const noCpu = asks.containers.filter(c => (c.requests.get("cpu")?.milli ?? 0n) === 0n);
  if (noCpu.length)
    report("cpu-request", {
      message: `${pods}: ${named(noCpu, () => " asks no CPU")} while using a GPU (${asked}): its neighbours' CPU requests starve it, and the GPU idles while it waits for data`,
      fix: `set resources.requests.cpu (e.g. the cores its data loader workers use) in ${noCpu
        .slice(0, SHOWN)
        .map(c => c.ref.path)
        .join(", ")}`,
    });

  if (limit.max > 0 && asks.total > BigInt(limit.max))
    report("max-per-pod", {
      message: `${pods} ask${target.isTemplate ? "" : "s"} for ${asks.total} accelerators (${asked}), more than ${limit.max}, the most one pod may have (${limit.from})`,
      fix: `lower the GPU limits in ${fieldPath(template, "spec.containers")}[*].resources.limits to ${limit.max} in all, or split the work over more pods (a PyTorchJob's or JobSet's workers)`,
    });

  if (!target.isTemplate && isPod(object) && !hasController(object))
    report("bare-pod", {
      message: `${pods} asks for ${asked} and no controller owns it (no ownerReferences controller): it holds the GPUs until someone deletes it, long after its work ended`,
      fix: `run it as a Job (kubectl create job ${object.metadata?.name ?? "<name>"} --image=<image>, or spec.template of a Job/JobSet/PyTorchJob), which frees the GPUs when it completes; or delete it once done (kubectl delete pod -n ${ctx.namespaceName} ${object.metadata?.name ?? "<name>"})`,
    });
  return findings;
}
