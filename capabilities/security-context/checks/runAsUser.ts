// Restricted: no container may be set to run as UID 0 (PSA runAsUser, from 1.23; unset is allowed).
// Pods in their own user namespace (spec.hostUsers: false) are exempt from policy 1.35 on.
import {
  ALLOWED,
  badSetters,
  forbidden,
  versionsExemptingUserNamespacePods,
  podSecurityCheck,
  type CheckResult,
} from "./helpers";
import type { PodTemplateRef } from "../../../lib/objects/pod";

function noRootUid(pod: PodTemplateRef): CheckResult {
  const bad = badSetters(pod, sc => sc?.runAsUser === 0, "securityContext.runAsUser");
  if (!bad) return ALLOWED;
  return forbidden(
    "runAsUser=0",
    `${bad.who} must not set runAsUser=0`,
    `set ${bad.fields} to a non-zero UID (e.g. 1000) or remove it`,
  );
}

export const runAsUser = podSecurityCheck({
  id: "runAsUser",
  level: "restricted",
  versions: versionsExemptingUserNamespacePods(23, noRootUid),
});
