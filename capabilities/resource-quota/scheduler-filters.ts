// The scheduler's filters a pod must pass on a node, as kube-scheduler applies them
// (NodeUnschedulable, NodeAffinity with nodeSelector, TaintToleration, NodeName): which nodes are
// candidates at all. Pure; node-fit.ts judges resources on the candidates.
import type { V1Node, V1PodSpec, V1Taint, V1Toleration } from "@kubernetes/client-node";
import { isCordoned, labelsOf, list, schedulingTaints } from "./node-classes";
import { isRecord } from "../../lib/objects/record";

/** Tolerations the DaemonSet controller adds to every daemon pod. */
export const DAEMONSET_TOLERATIONS: V1Toleration[] = [
  { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute" },
  { key: "node.kubernetes.io/unreachable", operator: "Exists", effect: "NoExecute" },
  { key: "node.kubernetes.io/disk-pressure", operator: "Exists", effect: "NoSchedule" },
  { key: "node.kubernetes.io/memory-pressure", operator: "Exists", effect: "NoSchedule" },
  { key: "node.kubernetes.io/pid-pressure", operator: "Exists", effect: "NoSchedule" },
  { key: "node.kubernetes.io/unschedulable", operator: "Exists", effect: "NoSchedule" },
];
export const NETWORK_UNAVAILABLE: V1Toleration = {
  key: "node.kubernetes.io/network-unavailable",
  operator: "Exists",
  effect: "NoSchedule",
};

export function tolerates(tolerations: V1Toleration[], taint: V1Taint): boolean {
  return tolerations.some(t => {
    if (t.effect && t.effect !== taint.effect) return false;
    if (t.key && t.key !== taint.key) return false;
    const op = t.operator || "Equal";
    if (op === "Exists") return true;
    return op === "Equal" && (t.value ?? "") === (taint.value ?? "");
  });
}

/** A taint as kubectl writes it: `key=value:Effect`, or `key:Effect` when it has no value. */
export const describeTaint = (t: V1Taint) => `${t.key}${t.value ? `=${t.value}` : ""}:${t.effect}`;

interface Requirement {
  key?: string;
  operator?: string;
  values?: string[];
}

export function requirementMatches(req: Requirement, value: string | undefined): boolean {
  const values = Array.isArray(req.values) ? req.values : [];
  switch (req.operator) {
    case "In":
      return value !== undefined && values.includes(value);
    case "NotIn":
      return value === undefined || !values.includes(value);
    case "Exists":
      return value !== undefined;
    case "DoesNotExist":
      return value === undefined;
    case "Gt":
    case "Lt": {
      if (value === undefined || values.length !== 1) return false;
      const [a, b] = [Number(value), Number(values[0])];
      if (!Number.isInteger(a) || !Number.isInteger(b)) return false;
      return req.operator === "Gt" ? a > b : a < b;
    }
    default:
      return false;
  }
}

/** nodeSelector and required node affinity (terms ORed, expressions within a term ANDed). */
export function selectsNode(spec: V1PodSpec, node: V1Node): boolean {
  const labels = labelsOf(node);
  // Own keys only: a selector on "constructor" must not find Object.prototype's.
  const label = (key: string) => (Object.hasOwn(labels, key) ? labels[key] : undefined);
  if (isRecord(spec.nodeSelector)) {
    for (const [k, v] of Object.entries(spec.nodeSelector)) if (label(k) !== v) return false;
  }
  const required = spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  if (!isRecord(required)) return true;
  const name = node.metadata?.name;
  return list<Record<string, unknown>>(required.nodeSelectorTerms).some(term => {
    const expressions = list<Requirement>(term.matchExpressions);
    const fields = list<Requirement>(term.matchFields);
    if (!expressions.length && !fields.length) return false; // an empty term matches nothing
    return (
      expressions.every(e =>
        requirementMatches(e, typeof e.key === "string" ? label(e.key) : undefined),
      ) && fields.every(f => requirementMatches(f, f.key === "metadata.name" ? name : undefined))
    );
  });
}

export type Exclusion = "unschedulable" | "selector" | "taints" | "nodeName";

export const boundByName = (spec: V1PodSpec) =>
  typeof spec.nodeName === "string" && !!spec.nodeName;
export const toleratesCordon = (tolerations: V1Toleration[]) =>
  tolerates(tolerations, { key: "node.kubernetes.io/unschedulable", effect: "NoSchedule" });

/** The first reason the node is no candidate, in the order the scheduler's filters are listed. */
export function exclusion(
  spec: V1PodSpec,
  node: V1Node,
  tolerations: V1Toleration[],
): Exclusion | undefined {
  // A pod bound to a node by name skips the scheduler: only that node counts, whatever its taints.
  if (boundByName(spec)) return node.metadata?.name === spec.nodeName ? undefined : "nodeName";
  if (isCordoned(node) && !toleratesCordon(tolerations)) return "unschedulable";
  if (!selectsNode(spec, node)) return "selector";
  if (schedulingTaints(node).some(taint => !tolerates(tolerations, taint))) return "taints";
  return undefined;
}

/** What exclusion() says of a node the pod does not name (namedNodes): its name fails either test. */
export function unnamedExclusion(
  spec: V1PodSpec,
  cordoned: boolean,
  tolerations: V1Toleration[],
): Exclusion {
  if (boundByName(spec)) return "nodeName";
  return cordoned && !toleratesCordon(tolerations) ? "unschedulable" : "selector";
}
