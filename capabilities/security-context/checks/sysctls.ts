// Baseline: only namespaced, isolated ("safe") sysctls (PSA sysctls, the set of policy 1.37, which
// added tcp_slow_start_after_idle and tcp_notsent_lowat). Sysctls exist only at pod level.
import {
  ALLOWED,
  asArray,
  asObject,
  asString,
  forbidden,
  podField,
  podSecurityContext,
  type PodSecurityCheck,
} from "./helpers";

export const SAFE_SYSCTLS = new Set([
  "kernel.shm_rmid_forced",
  "net.ipv4.ip_local_port_range",
  "net.ipv4.tcp_syncookies",
  "net.ipv4.ping_group_range",
  "net.ipv4.ip_unprivileged_port_start",
  "net.ipv4.ip_local_reserved_ports", // 1.27
  "net.ipv4.tcp_keepalive_time", // 1.29
  "net.ipv4.tcp_fin_timeout",
  "net.ipv4.tcp_keepalive_intvl",
  "net.ipv4.tcp_keepalive_probes",
  "net.ipv4.tcp_rmem", // 1.32
  "net.ipv4.tcp_wmem",
  "net.ipv4.tcp_slow_start_after_idle", // 1.37
  "net.ipv4.tcp_notsent_lowat",
]);

export const sysctls: PodSecurityCheck = {
  id: "sysctls",
  level: "baseline",
  check(pod) {
    const names = asArray(podSecurityContext(pod)?.sysctls)
      .map(s => asString(asObject(s)?.name))
      .filter(name => !SAFE_SYSCTLS.has(name));
    if (!names.length) return ALLOWED;
    return forbidden(
      "forbidden sysctls",
      names.join(", "),
      `remove ${names.join(", ")} from ${podField(pod, "securityContext.sysctls")} (set node-level sysctls on the node instead)`,
    );
  },
};
