// /proc must keep its default masks (PSA procMount, our procMount_baseline, from 1.0; and
// procMount_restricted from 1.35): from 1.35 baseline allows any procMount in a user-namespaced pod
// (hostUsers: false), and restricted keeps the unconditional check in its place.
import {
  ALLOWED,
  asString,
  fieldsOf,
  forbidden,
  versionsExemptingUserNamespacePods,
  joinQuote,
  namesOf,
  securityContextOf,
  sortedUnique,
  visitContainers,
  type CheckResult,
  podSecurityCheck,
  USER_NAMESPACE_RELAXED_SINCE,
} from "./helpers";
import type { PodTemplateRef } from "../../../lib/objects/pod";

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

export const procMountBaseline = podSecurityCheck({
  id: "procMount_baseline",
  level: "baseline",
  versions: versionsExemptingUserNamespacePods(0, defaultProcMountOnly),
});

export const procMountRestricted = podSecurityCheck({
  id: "procMount_restricted",
  level: "restricted",
  overrides: ["procMount_baseline"],
  versions: [{ since: USER_NAMESPACE_RELAXED_SINCE, check: defaultProcMountOnly }],
});
