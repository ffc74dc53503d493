// Baseline: only namespaced, isolated ("safe") sysctls (PSA sysctls, 1.0; the safe set grew in 1.27,
// 1.29, 1.32 and 1.37). Sysctls exist only at pod level.
import {
  ALLOWED,
  asArray,
  asObject,
  asString,
  forbidden,
  podField,
  podSecurityContext,
  podSecurityCheck,
  type CheckResult,
} from "./helpers";
import type { PodTemplateRef } from "../../../lib/objects/pod";

/** The safe set of each policy version that changed it. */
const SAFE_SYSCTLS_BY_VERSION: [since: number, added: string[]][] = [
  [
    0,
    [
      "kernel.shm_rmid_forced",
      "net.ipv4.ip_local_port_range",
      "net.ipv4.tcp_syncookies",
      "net.ipv4.ping_group_range",
      "net.ipv4.ip_unprivileged_port_start",
    ],
  ],
  [27, ["net.ipv4.ip_local_reserved_ports"]],
  [
    29,
    [
      "net.ipv4.tcp_keepalive_time",
      "net.ipv4.tcp_fin_timeout",
      "net.ipv4.tcp_keepalive_intvl",
      "net.ipv4.tcp_keepalive_probes",
    ],
  ],
  [32, ["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"]],
  [37, ["net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat"]],
];

/** Each version's safe set: its own additions and every earlier version's. */
const SAFE_SETS = SAFE_SYSCTLS_BY_VERSION.map(([since], i) => ({
  since,
  safe: new Set(SAFE_SYSCTLS_BY_VERSION.slice(0, i + 1).flatMap(([, added]) => added)),
}));

/** The safe set of policy version 1.`minor`. */
export function safeSysctlsAt(minor: number): ReadonlySet<string> {
  let safe = SAFE_SETS[0].safe;
  for (const set of SAFE_SETS) if (set.since <= minor) safe = set.safe;
  return safe;
}

/** The safe set of the newest policy. */
export const SAFE_SYSCTLS: ReadonlySet<string> = SAFE_SETS[SAFE_SETS.length - 1].safe;

function safeOnly(pod: PodTemplateRef, safe: ReadonlySet<string>): CheckResult {
  const names = asArray(podSecurityContext(pod)?.sysctls)
    .map(s => asString(asObject(s)?.name))
    .filter(name => !safe.has(name));
  if (!names.length) return ALLOWED;
  return forbidden(
    "forbidden sysctls",
    names.join(", "),
    `remove ${names.join(", ")} from ${podField(pod, "securityContext.sysctls")} (set node-level sysctls on the node instead)`,
  );
}

export const sysctls = podSecurityCheck({
  id: "sysctls",
  level: "baseline",
  versions: SAFE_SETS.map(({ since, safe }) => ({ since, check: pod => safeOnly(pod, safe) })),
});
