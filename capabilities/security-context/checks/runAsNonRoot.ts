// Restricted: containers must run as non-root (PSA runAsNonRoot, 1.0): runAsNonRoot=true at pod
// level (unless a container sets false) or on every container. Pods in their own user namespace
// (spec.hostUsers: false) are exempt from policy 1.35 on.
import {
  ALLOWED,
  badSetters,
  forbidden,
  versionsExemptingUserNamespacePods,
  namesOf,
  podField,
  podSecurityContext,
  securityContextOf,
  visitContainers,
  podSecurityCheck,
  type CheckResult,
} from "./helpers";
import type { PodTemplateRef } from "../../../lib/objects/pod";

function nonRootRequired(pod: PodTemplateRef): CheckResult {
  const podValue = podSecurityContext(pod)?.runAsNonRoot;
  const containers = visitContainers(pod);
  const explicitlyBad = badSetters(
    pod,
    sc => sc?.runAsNonRoot === false,
    "securityContext.runAsNonRoot",
  );
  if (explicitlyBad) {
    return forbidden(
      "runAsNonRoot != true",
      `${explicitlyBad.who} must not set securityContext.runAsNonRoot=false`,
      `set ${explicitlyBad.fields} to true (and run the image as a non-zero UID)`,
    );
  }
  // A container that leaves it unset inherits the pod's; without a pod-level true it has none.
  const implicitlyBad =
    podValue === true
      ? []
      : containers.filter(c => typeof securityContextOf(c)?.runAsNonRoot !== "boolean");
  if (implicitlyBad.length) {
    return forbidden(
      "runAsNonRoot != true",
      `pod or ${namesOf(implicitlyBad)} must set securityContext.runAsNonRoot=true`,
      `set ${podField(pod, "securityContext.runAsNonRoot")} to true`,
    );
  }
  return ALLOWED;
}

export const runAsNonRoot = podSecurityCheck({
  id: "runAsNonRoot",
  level: "restricted",
  versions: versionsExemptingUserNamespacePods(0, nonRootRequired),
});
