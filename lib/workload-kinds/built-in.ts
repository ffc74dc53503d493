// Where the pod spec lives in Kubernetes' own workload kinds (the table's BUILT_IN_WORKLOADS), and
// which objects are workloads at all, those kinds or the ML and platform kinds. Pure: no Pepr, no I/O.
import type { V1ObjectMeta, V1PodSpec } from "@kubernetes/client-node";
import type { KubeObject, PodTemplateRef } from "../objects/pod";
import { isRecord } from "../objects/record";
import { groupOf, type WorkloadKindSpec } from "./kind-spec";
import { workloadKindOf } from "./roles";
import { BUILT_IN_WORKLOADS } from "./table";

/** The kinds' names: Deployment, ..., CronJob. */
export const WORKLOAD_KINDS: readonly string[] = BUILT_IN_WORKLOADS.map(k => k.kind);

/** The API groups of the built-in kinds (a Volcano `Job` is not a batch Job). */
const BUILT_IN_GROUPS = new Set(["", "apps", "batch", "extensions"]);

/** A Deployment, StatefulSet, ... of Kubernetes itself (an object without apiVersion counts as one). */
export function isBuiltInWorkload(obj: KubeObject): boolean {
  if (!WORKLOAD_KINDS.includes(obj?.kind ?? "")) return false;
  const apiVersion = obj.apiVersion;
  if (typeof apiVersion !== "string") return true;
  return BUILT_IN_GROUPS.has(groupOf(apiVersion));
}

/**
 * A workload: a built-in one (its template at spec.template), or one of the ML kinds and the
 * platform's own (`platformKinds`, setting workloads.kinds), whose templates are elsewhere.
 */
export function isWorkload(obj: KubeObject, platformKinds?: readonly WorkloadKindSpec[]): boolean {
  return isBuiltInWorkload(obj) || !!workloadKindOf(obj, platformKinds);
}

/**
 * The pod spec of a Pod or of a workload's pod template, or undefined when the object has none
 * (an unknown kind, or a malformed object without spec). Missing metadata is created on the object
 * so that callers can add labels; a missing spec is not invented.
 */
export function podTemplateOf(obj: KubeObject): PodTemplateRef | undefined {
  if (!isRecord(obj)) return undefined;
  if (obj.kind === "Pod") {
    if (!isRecord(obj.spec)) return undefined;
    if (!isRecord(obj.metadata)) obj.metadata = {};
    return {
      metadata: obj.metadata as V1ObjectMeta,
      spec: obj.spec as unknown as V1PodSpec,
      path: "",
    };
  }
  if (!isBuiltInWorkload(obj)) return undefined;
  let holder: unknown = obj.spec;
  let path = "spec";
  if (obj.kind === "CronJob") {
    holder = isRecord(holder) && isRecord(holder.jobTemplate) ? holder.jobTemplate.spec : undefined;
    path = "spec.jobTemplate.spec";
  }
  if (!isRecord(holder) || !isRecord(holder.template)) return undefined;
  const template = holder.template;
  if (!isRecord(template.spec)) return undefined;
  if (!isRecord(template.metadata)) template.metadata = {};
  return {
    metadata: template.metadata as V1ObjectMeta,
    spec: template.spec as unknown as V1PodSpec,
    path: `${path}.template`,
  };
}
