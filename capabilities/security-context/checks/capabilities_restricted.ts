// Restricted: every container drops ALL capabilities and may add back only NET_BIND_SERVICE (PSA
// capabilities_restricted: from 1.22; from 1.25 pods declaring spec.os.name=windows are exempt, the
// API forbids capabilities there). Replaces the baseline capabilities check where it applies.
import {
  ALLOWED,
  asArray,
  asObject,
  fieldsOf,
  forbidden,
  versionsExemptingWindowsPods,
  joinQuote,
  namesOf,
  securityContextOf,
  sortedUnique,
  visitContainers,
  podSecurityCheck,
  type CheckResult,
} from "./helpers";
import type { ContainerRef, PodTemplateRef } from "../../../lib/objects/pod";

function dropAllAddOnlyNetBind(pod: PodTemplateRef): CheckResult {
  const missingDropAll: ContainerRef[] = [];
  const addingForbidden: ContainerRef[] = [];
  const forbiddenCaps: string[] = [];
  for (const c of visitContainers(pod)) {
    const caps = asObject(securityContextOf(c)?.capabilities);
    if (!asArray(caps?.drop).includes("ALL")) missingDropAll.push(c);
    const extra = asArray(caps?.add)
      .map(String)
      .filter(cap => cap !== "NET_BIND_SERVICE");
    if (extra.length) {
      addingForbidden.push(c);
      forbiddenCaps.push(...extra);
    }
  }
  const details: string[] = [];
  const fixes: string[] = [];
  if (missingDropAll.length) {
    details.push(`${namesOf(missingDropAll)} must set securityContext.capabilities.drop=["ALL"]`);
    fixes.push(`add "ALL" to ${fieldsOf(missingDropAll, "securityContext.capabilities.drop")}`);
  }
  if (addingForbidden.length) {
    const caps = joinQuote(sortedUnique(forbiddenCaps));
    details.push(
      `${namesOf(addingForbidden)} must not include ${caps} in securityContext.capabilities.add`,
    );
    fixes.push(
      `remove ${caps} from ${fieldsOf(addingForbidden, "securityContext.capabilities.add")} (only NET_BIND_SERVICE may be added)`,
    );
  }
  if (!details.length) return ALLOWED;
  return forbidden("unrestricted capabilities", details.join("; "), fixes.join("; "));
}

export const capabilitiesRestricted = podSecurityCheck({
  id: "capabilities_restricted",
  level: "restricted",
  overrides: ["capabilities_baseline"],
  versions: versionsExemptingWindowsPods(22, dropAllAddOnlyNetBind),
});
