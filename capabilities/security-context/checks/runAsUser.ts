// Restricted: no container may be set to run as UID 0 (PSA runAsUser, 1.35; unset is allowed).
// Pods in their own user namespace (spec.hostUsers: false) are exempt from policy 1.35 on.
import {
  ALLOWED,
  badSetters,
  forbidden,
  isUserNamespacePod,
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
    const bad = badSetters(
      pod,
      podSecurityContext(pod)?.runAsUser === 0,
      visitContainers(pod).filter(c => securityContextOf(c)?.runAsUser === 0),
      "securityContext.runAsUser",
    );
    if (!bad) return ALLOWED;
    return forbidden(
      "runAsUser=0",
      `${bad.who} must not set runAsUser=0`,
      `set ${bad.fields} to a non-zero UID (e.g. 1000) or remove it`,
    );
  },
};
