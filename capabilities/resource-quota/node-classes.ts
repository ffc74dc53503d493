// Node classes: the nodes of a list grouped by what the scheduler's filters read of a node, so a
// pod is judged once per class, not per node. Pure. Why: docs/adr/0007-node-classes.md
import type { V1Node, V1PodSpec, V1Taint } from "@kubernetes/client-node";
import { parseList, type ResourceList } from "./resources";
import { isRecord } from "../../lib/objects/record";

export const list = <T>(x: unknown): T[] => (Array.isArray(x) ? (x as T[]).filter(isRecord) : []);

/** Labels unique to each node by convention: left out of the signature. */
export const PER_NODE_LABELS: ReadonlySet<string> = new Set(["kubernetes.io/hostname"]);

export interface NodeInfo {
  name: string;
  allocatable: ResourceList;
  node: V1Node;
  /** What the scheduler's filters read of the node; null when it must be a class of its own. */
  signature: string | null;
}

export interface NodeClass {
  /** The first member: the node the label/taint tests and the messages use. */
  node: NodeInfo;
  /** Every member's name, in list order. */
  names: string[];
  /** Every member's place in the list (entries that are objects, counted from 0), in list order. */
  positions: number[];
}

export interface NodeClasses {
  /** In the order of their first members. */
  classes: NodeClass[];
  /** How many nodes the list holds (its entries that are objects). */
  total: number;
  /** Set when `classes` hold only the nodes a pod names (namedNodes): the rest, not judged. */
  unnamed?: UnnamedNodes;
}

/** The nodes a pod does not name, counted without being read again. */
export interface UnnamedNodes {
  /** Cordoned ones, then the others; each with its first place in the list (empty groups left out). */
  groups: { cordoned: boolean; count: number; first: number }[];
  /** The resources some node of the whole list offers (has a non-zero allocatable of). */
  offered: ReadonlySet<string>;
}

// Shared with node-fit.ts's filters, so that the signature reads a node exactly as they do.
export const labelsOf = (node: V1Node): Record<string, string> =>
  isRecord(node.metadata?.labels) ? node.metadata.labels : {};

/** The taints the scheduler filters on (NoSchedule, NoExecute). */
export const schedulingTaints = (node: V1Node): V1Taint[] =>
  list<V1Taint>(node.spec?.taints).filter(
    t => t.effect === "NoSchedule" || t.effect === "NoExecute",
  );

export const isCordoned = (node: V1Node): boolean => node.spec?.unschedulable === true;

// Parsed once per node object: the cache (and a snapshot) hands out the same object until the node
// changes, and a large cluster would otherwise re-parse thousands of quantities per request.
const parsedNodes = new WeakMap<V1Node, NodeInfo>();
export function nodeInfo(node: V1Node): NodeInfo {
  let info = parsedNodes.get(node);
  if (!info) {
    const allocatable = parseList(node.status?.allocatable);
    info = {
      name: node.metadata?.name ?? "(unnamed)",
      allocatable,
      node,
      signature: signatureOf(node, allocatable),
    };
    parsedNodes.set(node, info);
  }
  return info;
}

const isOptionalString = (x: unknown): x is string | undefined =>
  x === undefined || typeof x === "string";

function signatureOf(node: V1Node, allocatable: ResourceList): string | null {
  const labels: string[][] = [];
  for (const [key, value] of Object.entries(labelsOf(node))) {
    if (typeof value !== "string") return null;
    if (!PER_NODE_LABELS.has(key)) labels.push([key, value]);
  }
  const taints: (string | null)[][] = [];
  for (const t of schedulingTaints(node)) {
    if (!isOptionalString(t.key) || !isOptionalString(t.value)) return null;
    taints.push([t.key ?? null, t.value ?? null, t.effect]);
  }
  const byName = (a: string[], b: string[]) => (a[0] < b[0] ? -1 : 1); // keys are unique
  return JSON.stringify([
    isCordoned(node),
    labels.sort(byName),
    taints.map(t => JSON.stringify(t)).sort(),
    [...allocatable].map(([r, q]) => [r, q.milli.toString()]).sort(byName),
  ]);
}

/** Every node a class of its own, or (bySignature) nodes of one signature a class together. */
function group(nodes: V1Node[], bySignature: boolean): NodeClasses {
  const classes: NodeClass[] = [];
  const withSignature = new Map<string, NodeClass>();
  let total = 0;
  for (const n of Array.isArray(nodes) ? nodes : []) {
    if (!isRecord(n)) continue;
    const info = nodeInfo(n);
    const position = total++;
    const known = bySignature && info.signature !== null && withSignature.get(info.signature);
    if (known) {
      known.names.push(info.name);
      known.positions.push(position);
      continue;
    }
    const created = { node: info, names: [info.name], positions: [position] };
    classes.push(created);
    if (bySignature && info.signature !== null) withSignature.set(info.signature, created);
  }
  return { classes, total };
}

// Keyed by the array: recomputed only when the cluster hands out a new list (callers must not
// modify a list they have passed, as with the cluster's own lists).
const grouped = new WeakMap<V1Node[], NodeClasses>();
const oneByOne = new WeakMap<V1Node[], NodeClasses>();

// The list grouped last. Most new lists replace a node by an update of it with the same name and
// signature (kubelets report status at least every 5 minutes: ~33 new lists a second at 10,000
// nodes); its classes still hold, and a walk by reference costs far less than regrouping.
let last: { nodes: V1Node[]; result: NodeClasses } | undefined;
function sameClasses(before: V1Node[], nodes: V1Node[]): boolean {
  if (before.length !== nodes.length) return false;
  for (let i = 0; i < nodes.length; i++) {
    if (before[i] === nodes[i]) continue;
    if (!isRecord(before[i]) || !isRecord(nodes[i])) return false;
    const a = nodeInfo(before[i]);
    const b = nodeInfo(nodes[i]);
    if (a.signature === null || a.signature !== b.signature || a.name !== b.name) return false;
  }
  return true;
}

/** Nodes grouped by signature (a repeated entry is a member each time). */
export function nodeClasses(nodes: V1Node[]): NodeClasses {
  let result = grouped.get(nodes);
  if (!result) {
    result = last && sameClasses(last.nodes, nodes) ? last.result : group(nodes, true);
    grouped.set(nodes, result);
    last = { nodes, result };
  }
  return result;
}

/** Every node a class of its own: for pods to which node identity matters. */
export function singleNodeClasses(nodes: V1Node[]): NodeClasses {
  let result = oneByOne.get(nodes);
  if (!result) oneByOne.set(nodes, (result = group(nodes, false)));
  return result;
}

/** Whether the pod tells nodes apart by what the signature leaves out: name or per-node labels. */
export function nodeIdentityMatters(spec: V1PodSpec): boolean {
  if (typeof spec.nodeName === "string" && spec.nodeName) return true;
  if (
    isRecord(spec.nodeSelector) &&
    Object.keys(spec.nodeSelector).some(k => PER_NODE_LABELS.has(k))
  )
    return true;
  const required = spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  if (!isRecord(required)) return false;
  return list<Record<string, unknown>>(required.nodeSelectorTerms).some(
    term =>
      list(term.matchFields).length > 0 ||
      list<{ key?: unknown }>(term.matchExpressions).some(
        e => !!e.key && (typeof e.key !== "string" || PER_NODE_LABELS.has(e.key)),
      ),
  );
}

/**
 * The names outside which no node can take the pod, or undefined when the pod does not bound them:
 * spec.nodeName, or, when every required term has a `metadata.name In` requirement, the union of
 * the values of each term's first one (a superset is enough: the named nodes are judged in full).
 */
export function namesOf(spec: V1PodSpec): unknown[] | undefined {
  if (typeof spec.nodeName === "string" && spec.nodeName) return [spec.nodeName];
  const required = spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  if (!isRecord(required)) return undefined;
  const terms = list<Record<string, unknown>>(required.nodeSelectorTerms);
  const names: unknown[] = [];
  for (const term of terms) {
    const byName = list<{ key?: unknown; operator?: unknown; values?: unknown }>(
      term.matchFields,
    ).find(f => f.key === "metadata.name" && f.operator === "In");
    if (!byName) return undefined;
    // A loop, not push(...values): a list of 100k+ values would overflow the call stack.
    if (Array.isArray(byName.values)) for (const v of byName.values) names.push(v);
  }
  return terms.length ? names : undefined;
}

/** A node list indexed by name (the raw metadata.name: compared as the filters compare it). */
interface NameIndex {
  infos: NodeInfo[];
  positions: Map<unknown, number[]>;
  /** By place in the list. */
  isCordoned: boolean[];
  /** Places in the list of the cordoned nodes, and of the others. */
  cordoned: number[];
  uncordoned: number[];
  offered: Set<string>;
}
const indexed = new WeakMap<V1Node[], NameIndex>();
// The list indexed last: kept for a new list whose changed nodes keep their name and signature (so
// their cordon and allocatable), as nodeClasses keeps its grouping; only the changed entries swapped.
let lastIndexed: { nodes: V1Node[]; index: NameIndex } | undefined;
function nameIndex(nodes: V1Node[]): NameIndex {
  let index = indexed.get(nodes);
  if (!index) {
    index = (lastIndexed && reindexed(lastIndexed, nodes)) ?? indexByName(nodes);
    indexed.set(nodes, index);
    lastIndexed = { nodes, index };
  }
  return index;
}

function reindexed(last: { nodes: V1Node[]; index: NameIndex }, nodes: V1Node[]) {
  // Same names and signatures in the same places: only the node objects (their infos) change.
  if (!Array.isArray(nodes) || !sameClasses(last.nodes, nodes)) return undefined;
  return { ...last.index, infos: nodes.filter(isRecord).map(nodeInfo) };
}

function indexByName(nodes: V1Node[]): NameIndex {
  const index: NameIndex = {
    infos: [],
    positions: new Map(),
    isCordoned: [],
    cordoned: [],
    uncordoned: [],
    offered: new Set(),
  };
  for (const n of Array.isArray(nodes) ? nodes : []) {
    if (!isRecord(n)) continue;
    const info = nodeInfo(n);
    const position = index.infos.push(info) - 1;
    const name = info.node.metadata?.name;
    const same = index.positions.get(name);
    if (same) same.push(position);
    else index.positions.set(name, [position]);
    index.isCordoned.push(isCordoned(n));
    (index.isCordoned[position] ? index.cordoned : index.uncordoned).push(position);
    for (const [r, q] of info.allocatable) if (q.milli > 0n) index.offered.add(r);
  }
  return index;
}

/** The named nodes, each a class of its own in list order, and the others counted. */
export function namedNodes(nodes: V1Node[], names: unknown[]): NodeClasses {
  const index = nameIndex(nodes);
  const named = new Set(names.flatMap(name => index.positions.get(name) ?? []));
  const classes = [...named]
    .sort((a, b) => a - b)
    .map(p => ({ node: index.infos[p], names: [index.infos[p].name], positions: [p] }));
  return {
    classes,
    total: index.infos.length,
    unnamed: {
      groups: [notNamed(index, named, true), notNamed(index, named, false)].filter(
        g => g.count > 0,
      ),
      offered: index.offered,
    },
  };
}

/** The cordoned (or the other) nodes not named; the first found in at most (named + 1) steps. */
function notNamed(index: NameIndex, named: Set<number>, cordoned: boolean) {
  const positions = cordoned ? index.cordoned : index.uncordoned;
  let namedHere = 0;
  for (const p of named) if (index.isCordoned[p] === cordoned) namedHere++;
  return {
    cordoned,
    count: positions.length - namedHere,
    first: positions.find(p => !named.has(p)) ?? -1,
  };
}

/** The nodes to judge a pod on: those it names, else classes, else single nodes when node
 * identity matters to it. */
export function nodesToJudge(nodes: V1Node[], spec: V1PodSpec): NodeClasses {
  const names = namesOf(spec);
  if (names) return namedNodes(nodes, names);
  return nodeIdentityMatters(spec) ? singleNodeClasses(nodes) : nodeClasses(nodes);
}
