// Restricted: no container may be set to run as UID 0 (PSA runAsUser, 1.35; unset is allowed).
// Pods in their own user namespace (spec.hostUsers: false) are exempt from policy 1.35 on.
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

export const runAsUser: PodSecurityCheck = {
  id: "runAsUser",
  level: "restricted",
  check(pod) {
    if (isUserNamespacePod(pod)) return ALLOWED;
    const setters: string[] = [];
    const fields: string[] = [];
    if (podSecurityContext(pod)?.runAsUser === 0) {
      setters.push("pod");
      fields.push(podField(pod, "securityContext.runAsUser"));
    }
    const bad = visitContainers(pod).filter(c => securityContextOf(c)?.runAsUser === 0);
    if (bad.length) {
      setters.push(namesOf(bad));
      fields.push(fieldsOf(bad, "securityContext.runAsUser"));
    }
    if (!setters.length) return ALLOWED;
    return forbidden(
      "runAsUser=0",
      `${setters.join(" and ")} must not set runAsUser=0`,
      `set ${fields.join(", ")} to a non-zero UID (e.g. 1000) or remove it`,
    );
  },
};
