// Baseline: host ports are forbidden (PSA hostPorts, 1.0): ports[*].hostPort must be unset or 0.
import {
  asArray,
  asObject,
  forbidInContainers,
  podSecurityCheck,
  type ContainerFinding,
} from "./helpers";
import type { ContainerRef } from "../../../lib/objects/pod";

/** The host ports a container asks for (unset and 0 ask for none). */
function hostPortsOf(c: ContainerRef): ContainerFinding[] {
  return asArray((c.container as unknown as Record<string, unknown>).ports).flatMap((p, i) => {
    const hostPort = asObject(p)?.hostPort;
    if (hostPort === undefined || hostPort === null || hostPort === 0) return [];
    return [{ value: String(hostPort), field: `${c.path}.ports[${i}].hostPort` }];
  });
}

export const hostPorts = podSecurityCheck({
  id: "hostPorts",
  level: "baseline",
  versions: [
    {
      since: 0,
      check: forbidInContainers({
        reason: "hostPort",
        find: hostPortsOf,
        noun: ["hostPort", "hostPorts"],
        list: ports => ports.join(", "),
        fixNote: "(expose the port with a Service instead)",
      }),
    },
  ],
});
