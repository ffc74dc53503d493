// Restricted: every container sets allowPrivilegeEscalation=false (PSA allowPrivilegeEscalation:
// from 1.8, the field's first version; from 1.25 pods declaring spec.os.name=windows are exempt,
// the API forbids the field there).
import {
  ALLOWED,
  asArray,
  asObject,
  fieldsOf,
  forbidden,
  versionsExemptingWindowsPods,
  namesOf,
  securityContextOf,
  visitContainers,
  podSecurityCheck,
  type CheckResult,
} from "./helpers";
import type { PodTemplateRef } from "../../../lib/objects/pod";

function everyContainerSetsFalse(pod: PodTemplateRef): CheckResult {
  const bad = visitContainers(pod).filter(
    c => securityContextOf(c)?.allowPrivilegeEscalation !== false,
  );
  if (!bad.length) return ALLOWED;
  // The API rejects allowPrivilegeEscalation=false next to privileged or an added SYS_ADMIN.
  const blocked = bad.filter(c => {
    const sc = securityContextOf(c);
    const added = asArray(asObject(sc?.capabilities)?.add);
    return sc?.privileged === true || added.some(a => a === "SYS_ADMIN" || a === "CAP_SYS_ADMIN");
  });
  const note = blocked.length
    ? ` (first remove privileged and SYS_ADMIN from ${namesOf(blocked)}: the API rejects them together with false)`
    : "";
  return forbidden(
    "allowPrivilegeEscalation != false",
    `${namesOf(bad)} must set securityContext.allowPrivilegeEscalation=false`,
    `set ${fieldsOf(bad, "securityContext.allowPrivilegeEscalation")} to false${note}`,
  );
}

export const allowPrivilegeEscalation = podSecurityCheck({
  id: "allowPrivilegeEscalation",
  level: "restricted",
  versions: versionsExemptingWindowsPods(8, everyContainerSetsFalse),
});
