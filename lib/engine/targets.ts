// A workload's pod templates as the policies' targets: a built-in workload's one, or one per role
// of an ML kind (a PyTorchJob's Master and Worker). Pure.
import type { KubeObject } from "../objects/pod";
import { podTemplateOf } from "../workload-kinds/built-in";
import type { PodTarget } from "./policy";
import type { RuntimeSource } from "../workload-kinds/serving-runtimes";
import type { WorkloadKindSpec } from "../workload-kinds/kind-spec";
import { podRolesOf, workloadKindOf } from "../workload-kinds/roles";

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
