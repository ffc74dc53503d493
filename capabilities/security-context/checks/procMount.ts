// /proc must keep its default masks (PSA procMount_baseline and procMount_restricted, policy 1.35):
// baseline allows any procMount in a user-namespaced pod (hostUsers: false); restricted never does.
import {
  ALLOWED,
  asString,
  fieldsOf,
  forbidden,
  isUserNamespacePod,
  joinQuote,
  namesOf,
  securityContextOf,
  sortedUnique,
  visitContainers,
  type CheckResult,
  type PodSecurityCheck,
} from "./helpers";
import type { PodTemplateRef } from "../../../lib/pod";

function defaultProcMountOnly(pod: PodTemplateRef): CheckResult {
  const types: string[] = [];
  const bad = visitContainers(pod).filter(c => {
    const value = securityContextOf(c)?.procMount;
    if (value === undefined || value === null || value === "Default") return false;
    types.push(asString(value));
    return true;
  });
  if (!bad.length) return ALLOWED;
  return forbidden(
    "procMount",
    `${namesOf(bad)} must not set securityContext.procMount to ${joinQuote(sortedUnique(types))}`,
    `remove ${fieldsOf(bad, "securityContext.procMount")} (or set it to Default)`,
  );
}

export const procMountBaseline: PodSecurityCheck = {
  id: "procMount_baseline",
  level: "baseline",
  check: pod => (isUserNamespacePod(pod) ? ALLOWED : defaultProcMountOnly(pod)),
};

export const procMountRestricted: PodSecurityCheck = {
  id: "procMount_restricted",
  level: "restricted",
  overrides: ["procMount_baseline"],
  check: defaultProcMountOnly,
};
