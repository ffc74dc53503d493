// Restricted: containers must run as non-root (PSA runAsNonRoot, 1.35): runAsNonRoot=true at pod
// level (unless a container sets false) or on every container. Pods in their own user namespace
// (spec.hostUsers: false) are exempt from policy 1.35 on.
import {
  ALLOWED,
  fieldsOf,
  forbidden,
  isUserNamespacePod,
  namesOf,
  podField,
  podSecurityContext,
  securityContextOf,
  visitContainers,
  type PodSecurityCheck,
} from "./helpers";

export const runAsNonRoot: PodSecurityCheck = {
  id: "runAsNonRoot",
  level: "restricted",
  check(pod) {
    if (isUserNamespacePod(pod)) return ALLOWED;
    const setters: string[] = [];
    const fields: string[] = [];
    const podValue = podSecurityContext(pod)?.runAsNonRoot;
    if (podValue === false) {
      setters.push("pod");
      fields.push(podField(pod, "securityContext.runAsNonRoot"));
    }
    const podTrue = podValue === true;
    const containers = visitContainers(pod);
    const explicitlyBad = containers.filter(c => securityContextOf(c)?.runAsNonRoot === false);
    if (explicitlyBad.length) {
      setters.push(namesOf(explicitlyBad));
      fields.push(fieldsOf(explicitlyBad, "securityContext.runAsNonRoot"));
    }
    if (setters.length) {
      return forbidden(
        "runAsNonRoot != true",
        `${setters.join(" and ")} must not set securityContext.runAsNonRoot=false`,
        `set ${fields.join(", ")} to true (and run the image as a non-zero UID)`,
      );
    }
    const implicitlyBad = containers.filter(
      c => typeof securityContextOf(c)?.runAsNonRoot !== "boolean" && !podTrue,
    );
    if (implicitlyBad.length) {
      return forbidden(
        "runAsNonRoot != true",
        `pod or ${namesOf(implicitlyBad)} must set securityContext.runAsNonRoot=true`,
        `set ${podField(pod, "securityContext.runAsNonRoot")} to true`,
      );
    }
    return ALLOWED;
  },
};
