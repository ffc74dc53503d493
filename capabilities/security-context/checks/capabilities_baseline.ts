// Baseline: only the container runtime's default capabilities may be added (PSA
// capabilities_baseline, 1.0). Replaced by capabilities_restricted at the restricted level.
import {
  ALLOWED,
  asArray,
  asObject,
  fieldsOf,
  forbidden,
  joinQuote,
  namesOf,
  securityContextOf,
  sortedUnique,
  visitContainers,
  podSecurityCheck,
} from "./helpers";

export const BASELINE_CAPABILITIES = new Set([
  "AUDIT_WRITE",
  "CHOWN",
  "DAC_OVERRIDE",
  "FOWNER",
  "FSETID",
  "KILL",
  "MKNOD",
  "NET_BIND_SERVICE",
  "SETFCAP",
  "SETGID",
  "SETPCAP",
  "SETUID",
  "SYS_CHROOT",
]);

export const capabilitiesBaseline = podSecurityCheck({
  id: "capabilities_baseline",
  level: "baseline",
  versions: [
    {
      since: 0,
      check(pod) {
        const extra: string[] = [];
        const bad = visitContainers(pod).filter(c => {
          const added = asArray(asObject(securityContextOf(c)?.capabilities)?.add).map(String);
          const notAllowed = added.filter(cap => !BASELINE_CAPABILITIES.has(cap));
          extra.push(...notAllowed);
          return notAllowed.length > 0;
        });
        if (!bad.length) return ALLOWED;
        const caps = sortedUnique(extra);
        return forbidden(
          "non-default capabilities",
          `${namesOf(bad)} must not include ${joinQuote(caps)} in securityContext.capabilities.add`,
          `remove ${joinQuote(caps)} from ${fieldsOf(bad, "securityContext.capabilities.add")}`,
        );
      },
    },
  ],
});
