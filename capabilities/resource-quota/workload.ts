// How many pods a Pod or a workload runs at once: what its template is multiplied by against quota.
import type { KubeObject } from "../../lib/objects/pod";
import { isRecord } from "../../lib/objects/record";

/** A non-negative integer field, or the default when it is absent or malformed. */
function count(value: unknown, fallback: number): number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : fallback;
}

/** A Job spec's pods at once: parallelism (default 1) capped by completions; none while suspended. */
function jobPods(spec: unknown): number {
  if (!isRecord(spec)) return 1;
  if (spec.suspend === true) return 0;
  const parallelism = count(spec.parallelism, 1);
  const completions = spec.completions;
  return typeof completions === "number" && completions >= 0
    ? Math.min(parallelism, count(completions, parallelism))
    : parallelism;
}

export interface PodCount {
  pods: number;
  /** The field that sets it, for messages: "spec.replicas", "spec.parallelism". */
  field: string;
  /** The word for it: "replicas", "parallelism". */
  noun: string;
}

/**
 * Pods the object runs at once, or undefined for a DaemonSet (one per eligible node: node fit
 * only) and for kinds without pods.
 */
export function podCount(obj: KubeObject): PodCount | undefined {
  const spec = obj.spec;
  switch (obj.kind) {
    case "Pod":
      return { pods: 1, field: "", noun: "pod" };
    case "Deployment":
    case "StatefulSet":
    case "ReplicaSet":
    case "ReplicationController":
      return {
        pods: count(isRecord(spec) ? spec.replicas : undefined, 1),
        field: "spec.replicas",
        noun: "replicas",
      };
    case "Job":
      return { pods: jobPods(spec), field: "spec.parallelism", noun: "parallelism" };
    case "CronJob": {
      const jobSpec = isRecord(spec) && isRecord(spec.jobTemplate) ? spec.jobTemplate.spec : {};
      return {
        pods: jobPods(jobSpec),
        field: "spec.jobTemplate.spec.parallelism",
        noun: "parallelism",
      };
    }
    default:
      return undefined;
  }
}
