// Baseline: privileged containers are forbidden (PSA privileged, 1.0).
import {
  ALLOWED,
  fieldsOf,
  forbidden,
  namesOf,
  securityContextOf,
  visitContainers,
  podSecurityCheck,
} from "./helpers";

export const privileged = podSecurityCheck({
  id: "privileged",
  level: "baseline",
  versions: [
    {
      since: 0,
      check(pod) {
        const bad = visitContainers(pod).filter(c => securityContextOf(c)?.privileged === true);
        if (!bad.length) return ALLOWED;
        return forbidden(
          "privileged",
          `${namesOf(bad)} must not set securityContext.privileged=true`,
          `set ${fieldsOf(bad, "securityContext.privileged")} to false (or remove it)`,
        );
      },
    },
  ],
});
