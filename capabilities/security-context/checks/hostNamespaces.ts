// Baseline: sharing the host's network, PID or IPC namespace is forbidden (PSA hostNamespaces, 1.0).
import { ALLOWED, forbidden, podField, specOf, podSecurityCheck } from "./helpers";

const FIELDS = ["hostIPC", "hostNetwork", "hostPID"] as const;

export const hostNamespaces = podSecurityCheck({
  id: "hostNamespaces",
  level: "baseline",
  versions: [
    {
      since: 0,
      check(pod) {
        const spec = specOf(pod);
        const bad = FIELDS.filter(f => spec[f] === true);
        if (!bad.length) return ALLOWED;
        return forbidden(
          "host namespaces",
          bad.map(f => `${podField(pod, f)}=true`).join(", "),
          `remove ${bad.map(f => podField(pod, f)).join(", ")} (or set it to false)`,
        );
      },
    },
  ],
});
