// Restricted: every container sets allowPrivilegeEscalation=false (PSA allowPrivilegeEscalation,
// 1.25). Pods declaring spec.os.name=windows are exempt: the API forbids the field there.
import {
  ALLOWED,
  fieldsOf,
  forbidden,
  isWindowsPod,
  namesOf,
  securityContextOf,
  visitContainers,
  type PodSecurityCheck,
} from "./helpers";

export const allowPrivilegeEscalation: PodSecurityCheck = {
  id: "allowPrivilegeEscalation",
  level: "restricted",
  check(pod) {
    if (isWindowsPod(pod)) return ALLOWED;
    const bad = visitContainers(pod).filter(
      c => securityContextOf(c)?.allowPrivilegeEscalation !== false,
    );
    if (!bad.length) return ALLOWED;
    return forbidden(
      "allowPrivilegeEscalation != false",
      `${namesOf(bad)} must set securityContext.allowPrivilegeEscalation=false`,
      `set ${fieldsOf(bad, "securityContext.allowPrivilegeEscalation")} to false (a privileged container, or one adding SYS_ADMIN, cannot: drop those first)`,
    );
  },
};
