// Baseline: privileged containers are forbidden (PSA privileged, 1.0).
import {
  ALLOWED,
  fieldsOf,
  forbidden,
  namesOf,
  securityContextOf,
  visitContainers,
  type PodSecurityCheck,
} from "./helpers";

export const privileged: PodSecurityCheck = {
  id: "privileged",
  level: "baseline",
  check(pod) {
    const bad = visitContainers(pod).filter(c => securityContextOf(c)?.privileged === true);
    if (!bad.length) return ALLOWED;
    return forbidden(
      "privileged",
      `${namesOf(bad)} must not set securityContext.privileged=true`,
      `set ${fieldsOf(bad, "securityContext.privileged")} to false (or remove it)`,
    );
  },
};
