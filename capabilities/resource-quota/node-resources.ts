// Resource arithmetic of node fit: what a node offers of a resource and what it lacks for a pod's
// requests, in exact milli-units (lib/objects/quantity.ts). Pure.
import { isExtendedResource, type ResourceList } from "./resources";
import type { NodeClass, NodeInfo } from "./node-classes";

export const REPORTED_BY_EVERY_NODE = ["cpu", "memory", "ephemeral-storage"];
export const isScheduledResource = (r: string) =>
  REPORTED_BY_EVERY_NODE.includes(r) || r.startsWith("hugepages-") || isExtendedResource(r);

/** The node's allocatable for a resource; undefined when the node does not say (cpu/memory/ephemeral-storage only). */
export function allocatableOf(node: NodeInfo, resource: string): bigint | undefined {
  const q = node.allocatable.get(resource);
  if (q) return q.milli;
  return REPORTED_BY_EVERY_NODE.includes(resource) ? undefined : 0n;
}

/** Resources a node lacks room for: resource → its allocatable. */
export function shortOn(node: NodeInfo, asks: ResourceList): Map<string, bigint> {
  const short = new Map<string, bigint>();
  for (const [r, q] of asks) {
    const have = allocatableOf(node, r);
    if (have !== undefined && q.milli > have) short.set(r, have);
  }
  return short;
}

/**
 * The candidate with the most allocatable of a resource; ties go to the first (in list order, as
 * classes are). Nodes that do not report the resource are not judged on it.
 */
export function largest(candidates: NodeClass[], resource: string) {
  let best: { cls: NodeClass; have: bigint } | undefined;
  for (const c of candidates) {
    const have = allocatableOf(c.node, resource);
    if (have !== undefined && (!best || have > best.have)) best = { cls: c, have };
  }
  return best;
}
