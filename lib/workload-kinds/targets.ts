// A workload's pod templates as the policies' targets: a built-in workload's one, or one per role
// of an ML kind (a PyTorchJob's Master and Worker). Pure.
import { podTemplateOf, type KubeObject } from "../objects/pod";
import type { PodTarget } from "../objects/policy";
import type { RuntimeSource } from "../objects/serving-runtimes";
import type { WorkloadKindSpec } from "./kind-spec";
import { podRolesOf, workloadKindOf } from "./roles";

/**
 * The pod templates of a workload, as targets: a built-in workload's one (no role), or every role
 * of a kind with several (workload-kinds). None for an object without any.
 */
export function workloadTargets(
  workload: KubeObject,
  platformKinds: readonly WorkloadKindSpec[],
  extra: Partial<PodTarget> = {},
  /** The cluster view and namespace, for a kind whose pods are built from it (an InferenceService's runtimes). */
  cluster?: RuntimeSource,
  namespace?: string,
): PodTarget[] {
  const kind = workloadKindOf(workload, platformKinds);
  if (kind)
    return podRolesOf(workload, kind, cluster, namespace).map(role => ({
      object: workload,
      template: role.template,
      isTemplate: true,
      role,
      ...extra,
    }));
  const template = podTemplateOf(workload);
  return template ? [{ object: workload, template, isTemplate: true, ...extra }] : [];
}
