// The node view as accelerators reads it: for each accelerator resource some node offers, the taints
// that keep other pods off the nodes offering it. Pure, and computed once per node list (the cache
// hands out a new list only when a node changes), never per request.
// Why: docs/adr/0034-accelerator-tolerations-from-the-node-view.md
import type { V1Node, V1Taint } from "@kubernetes/client-node";
import { isGpuResource } from "../../lib/objects/accelerators";
import { nodeClasses, schedulingTaints } from "../resource-quota/node-classes";

/** The node view as accelerators reads it. */
export interface GpuNodeView {
  /** Accelerator resource → its nodes. */
  resources: ReadonlyMap<string, GpuNodes>;
  /** The node classes, each with whether it offers any accelerator. */
  classes: { node: V1Node; offersGpu: boolean }[];
  /** Whether some node offers no accelerator (a pod without one has somewhere else to go). */
  someWithout: boolean;
}

/** What the nodes say of one accelerator resource. */
export interface GpuNodes {
  /** The taints carried by every node that offers it and by no node that does not. */
  taints: V1Taint[];
  /** How many nodes offer it (allocatable > 0), and the first of them. */
  offering: number;
  first: string;
}

/**
 * Taints a node carries for a while, whatever it offers (conditions, cordons, a node being removed):
 * every GPU node may carry one at once, and tolerating it would keep a pod on a failing node. Never
 * read as an accelerator's.
 */
const TRANSIENT_PREFIXES = [
  "node.kubernetes.io/",
  "node.cloudprovider.kubernetes.io/",
  "node-role.kubernetes.io/",
  "karpenter.sh/",
];
const TRANSIENT_KEYS = new Set([
  "ToBeDeletedByClusterAutoscaler",
  "DeletionCandidateOfClusterAutoscaler",
]);
export const isTransientTaint = (key: string): boolean =>
  TRANSIENT_KEYS.has(key) || TRANSIENT_PREFIXES.some(p => key.startsWith(p));

/** A taint as one string: key, value and effect, which together say what tolerates it. */
const taintId = (t: V1Taint) => JSON.stringify([t.key, t.value ?? "", t.effect]);

const cached = new WeakMap<V1Node[], GpuNodeView>();

/** The view of a node list; undefined when there is none (not known). */
export function gpuNodes(nodes: V1Node[] | undefined): GpuNodeView | undefined {
  if (!Array.isArray(nodes)) return undefined;
  let out = cached.get(nodes);
  if (!out) cached.set(nodes, (out = compute(nodes)));
  return out;
}

function compute(nodes: V1Node[]): GpuNodeView {
  // Classes: nodes alike in taints and allocatable are read once (a cluster of 10,000 nodes has a
  // handful of shapes).
  const classes = nodeClasses(nodes).classes.map(c => ({
    node: c.node.node,
    count: c.names.length,
    first: c.node.name,
    offers: new Set(
      [...c.node.allocatable].filter(([r, q]) => isGpuResource(r) && q.milli > 0n).map(([r]) => r),
    ),
    taints: new Map(
      schedulingTaints(c.node.node)
        .filter(t => typeof t.key === "string" && t.key && !isTransientTaint(t.key))
        .map(t => [taintId(t), t] as const),
    ),
  }));
  const out = new Map<string, GpuNodes>();
  for (const resource of new Set(classes.flatMap(c => [...c.offers]))) {
    const offering = classes.filter(c => c.offers.has(resource));
    const others = classes.filter(c => !c.offers.has(resource));
    const common = [...offering[0].taints].filter(
      ([id]) => offering.every(c => c.taints.has(id)) && !others.some(c => c.taints.has(id)),
    );
    out.set(resource, {
      taints: common.map(([, t]) => t),
      offering: offering.reduce((n, c) => n + c.count, 0),
      first: offering[0].first,
    });
  }
  return {
    resources: out,
    classes: classes.map(c => ({ node: c.node, offersGpu: c.offers.size > 0 })),
    someWithout: classes.some(c => c.offers.size === 0),
  };
}
