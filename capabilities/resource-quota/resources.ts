// A pod's requests and limits, and the quota usage it is charged, computed as Kubernetes computes
// them (resource.PodRequests/PodLimits, the pods quota evaluator). Pure.
// Why: docs/adr/0016-exact-quantities-as-kubernetes-computes.md
import type { V1LimitRange, V1PodSpec } from "@kubernetes/client-node";
import { containersOf, type ContainerRef, type PodTemplateRef } from "../../lib/objects/pod";
import { addQuantities, safeParseQuantity, type Quantity } from "../../lib/objects/quantity";
import { isRecord } from "../../lib/objects/record";

export type ResourceList = Map<string, Quantity>;

export interface ContainerResources {
  ref: ContainerRef;
  requests: ResourceList;
  limits: ResourceList;
}

export interface PodResources {
  /** Regular and init containers (ephemeral containers have no resources). */
  containers: ContainerResources[];
  requests: ResourceList;
  limits: ResourceList;
  /** Quantities that do not parse, as "field: reason". */
  errors: string[];
}

export interface LimitRangeDefaults {
  requests: ResourceList;
  limits: ResourceList;
}

/** Parses a ResourceList field; entries that do not parse are reported in `errors`, not thrown. */
export function parseList(raw: unknown, field = "", errors: string[] = []): ResourceList {
  const out: ResourceList = new Map();
  if (!isRecord(raw)) return out;
  for (const [name, value] of Object.entries(raw)) {
    const parsed = safeParseQuantity(value);
    if (parsed.ok) out.set(name, parsed.quantity);
    else errors.push(`${field}.${name}: ${parsed.error}`);
  }
  return out;
}

function add(into: ResourceList, from: ResourceList): void {
  for (const [name, q] of from) {
    const have = into.get(name);
    into.set(name, have ? addQuantities(have, q) : q);
  }
}

function max(into: ResourceList, from: ResourceList): void {
  for (const [name, q] of from) {
    const have = into.get(name);
    if (!have || q.milli > have.milli) into.set(name, q);
  }
}

/**
 * The container defaults of the namespace's LimitRanges, as LimitRanger applies them: LimitRanges
 * in name order, the first to default a resource wins. Each item gets the API server's own
 * LimitRange defaulting first (max → default, default → defaultRequest, min → defaultRequest), so
 * a hand-written snapshot behaves like a stored object.
 */
export function limitRangeDefaults(limitRanges: V1LimitRange[] | undefined): LimitRangeDefaults {
  const out: LimitRangeDefaults = { requests: new Map(), limits: new Map() };
  // A stored LimitRange always parses; a broken entry of a hand-written snapshot is skipped.
  const sorted = [...(limitRanges ?? [])].sort((a, b) =>
    (a.metadata?.name ?? "").localeCompare(b.metadata?.name ?? ""),
  );
  for (const lr of sorted) {
    const requests: ResourceList = new Map();
    const limits: ResourceList = new Map();
    const items = Array.isArray(lr?.spec?.limits) ? lr.spec.limits : [];
    for (const item of items) {
      if (!isRecord(item) || item.type !== "Container") continue;
      const def = parseList(item.default);
      const defReq = parseList(item.defaultRequest);
      for (const [k, v] of parseList(item.max)) if (!def.has(k)) def.set(k, v);
      for (const [k, v] of def) if (!defReq.has(k)) defReq.set(k, v);
      for (const [k, v] of parseList(item.min)) if (!defReq.has(k)) defReq.set(k, v);
      for (const [k, v] of def) limits.set(k, v);
      for (const [k, v] of defReq) requests.set(k, v);
    }
    for (const [k, v] of limits) if (!out.limits.has(k)) out.limits.set(k, v);
    for (const [k, v] of requests) if (!out.requests.has(k)) out.requests.set(k, v);
  }
  return out;
}

/** One container's requests and limits after API defaulting and LimitRange defaults. */
function containerResources(
  ref: ContainerRef,
  defaults: LimitRangeDefaults,
  errors: string[],
): ContainerResources {
  const resources = isRecord(ref.container.resources) ? ref.container.resources : {};
  const requests = parseList(resources.requests, `${ref.path}.resources.requests`, errors);
  const limits = parseList(resources.limits, `${ref.path}.resources.limits`, errors);
  for (const [k, v] of limits) if (!requests.has(k)) requests.set(k, v);
  for (const [k, v] of defaults.limits) if (!limits.has(k)) limits.set(k, v);
  for (const [k, v] of defaults.requests) if (!requests.has(k)) requests.set(k, v);
  return { ref, requests, limits };
}

/** Pod-level resources (spec.resources) Kubernetes supports: they replace the containers' sum. */
const isPodLevelResource = (name: string) =>
  name === "cpu" || name === "memory" || name.startsWith("hugepages-");

function aggregate(
  containers: ContainerResources[],
  pick: (c: ContainerResources) => ResourceList,
): ResourceList {
  const total: ResourceList = new Map();
  for (const c of containers) if (c.ref.kind === "containers") add(total, pick(c));
  const sidecars: ResourceList = new Map();
  const initPeak: ResourceList = new Map();
  for (const c of containers) {
    if (c.ref.kind !== "initContainers") continue;
    if ((c.ref.container as { restartPolicy?: string }).restartPolicy === "Always") {
      add(total, pick(c));
      add(sidecars, pick(c));
      max(initPeak, sidecars);
    } else {
      const running: ResourceList = new Map(sidecars);
      add(running, pick(c));
      max(initPeak, running);
    }
  }
  max(total, initPeak);
  return total;
}

/** The pod's requests and limits, exactly as the scheduler and the quota plugin compute them. */
export function podResources(template: PodTemplateRef, defaults: LimitRangeDefaults): PodResources {
  const errors: string[] = [];
  const containers = containersOf(template)
    .filter(ref => ref.kind !== "ephemeralContainers")
    .map(ref => containerResources(ref, defaults, errors));
  const requests = aggregate(containers, c => c.requests);
  const limits = aggregate(containers, c => c.limits);

  const spec = template.spec as V1PodSpec & { resources?: unknown };
  const base = template.path ? `${template.path}.spec` : "spec";
  if (isRecord(spec.resources)) {
    const podRequests = parseList(spec.resources.requests, `${base}.resources.requests`, errors);
    const podLimits = parseList(spec.resources.limits, `${base}.resources.limits`, errors);
    for (const [k, v] of podLimits) if (!podRequests.has(k)) podRequests.set(k, v);
    for (const [k, v] of podRequests) if (isPodLevelResource(k)) requests.set(k, v);
    for (const [k, v] of podLimits) if (isPodLevelResource(k)) limits.set(k, v);
  }
  const overhead = parseList(spec.overhead, `${base}.overhead`, errors);
  add(requests, overhead);
  for (const [k, v] of overhead) {
    const have = limits.get(k);
    if (have) limits.set(k, addQuantities(have, v));
  }
  return { containers, requests, limits, errors };
}

/** An extended resource such as nvidia.com/gpu: has a domain that is not kubernetes.io. */
export function isExtendedResource(name: string): boolean {
  return (
    name.includes("/") &&
    !name.includes("kubernetes.io/") &&
    !name.startsWith("requests.") &&
    /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?\/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(name)
  );
}

const COMPUTE = ["cpu", "memory", "ephemeral-storage"];

/**
 * What a pod is charged in a ResourceQuota (podComputeUsageHelper): cpu/memory/ephemeral-storage
 * requests under their bare and `requests.` names, limits under `limits.`, hugepages under both,
 * extended resources under `requests.` only; plus `pods` and `count/pods`.
 */
export function quotaUsage(requests: ResourceList, limits: ResourceList): ResourceList {
  const one: Quantity = { milli: 1000n, format: "DecimalSI" };
  const usage: ResourceList = new Map([
    ["pods", one],
    ["count/pods", one],
  ]);
  for (const name of COMPUTE) {
    const request = requests.get(name);
    if (request) {
      usage.set(name, request);
      usage.set(`requests.${name}`, request);
    }
    const limit = limits.get(name);
    if (limit) usage.set(`limits.${name}`, limit);
  }
  for (const [name, request] of requests) {
    if (name.startsWith("hugepages-")) {
      usage.set(name, request);
      usage.set(`requests.${name}`, request);
    }
    if (isExtendedResource(name)) usage.set(`requests.${name}`, request);
  }
  return usage;
}

/** Whether a quota resource name is one the pod evaluator tracks (MatchingResources). */
export function isPodQuotaResource(name: string): boolean {
  if (name === "pods" || name === "count/pods") return true;
  for (const base of COMPUTE) {
    if (name === base || name === `requests.${base}` || name === `limits.${base}`) return true;
  }
  if (name.startsWith("hugepages-") || name.startsWith("requests.hugepages-")) return true;
  return name.startsWith("requests.") && isExtendedResource(name.slice("requests.".length));
}

/** Quota resources every container must set when a matching quota tracks them (a Kubernetes legacy rule). */
export const MUST_SPECIFY = new Set([
  "cpu",
  "memory",
  "requests.cpu",
  "requests.memory",
  "limits.cpu",
  "limits.memory",
]);

/** BestEffort QoS: no container (nor the pod level) requests or limits any cpu or memory. */
export function isBestEffort(pod: PodResources, spec: V1PodSpec): boolean {
  const positive = (list: ResourceList) =>
    ["cpu", "memory"].some(name => (list.get(name)?.milli ?? 0n) > 0n);
  const podLevel = (spec as { resources?: unknown }).resources;
  if (isRecord(podLevel)) {
    if (positive(parseList(podLevel.requests)) || positive(parseList(podLevel.limits)))
      return false;
  }
  return !pod.containers.some(c => positive(c.requests) || positive(c.limits));
}
