// Baseline: host ports are forbidden (PSA hostPorts, 1.0): ports[*].hostPort must be unset or 0.
import {
  ALLOWED,
  asArray,
  asObject,
  forbidden,
  namesOf,
  pluralize,
  sortedUnique,
  visitContainers,
  podSecurityCheck,
} from "./helpers";

export const hostPorts = podSecurityCheck({
  id: "hostPorts",
  level: "baseline",
  versions: [
    {
      since: 0,
      check(pod) {
        const ports: string[] = [];
        const fields: string[] = [];
        const bad = visitContainers(pod).filter(c => {
          let found = false;
          asArray((c.container as unknown as Record<string, unknown>).ports).forEach((p, i) => {
            const hostPort = asObject(p)?.hostPort;
            if (hostPort === undefined || hostPort === null || hostPort === 0) return;
            found = true;
            ports.push(String(hostPort));
            fields.push(`${c.path}.ports[${i}].hostPort`);
          });
          return found;
        });
        if (!bad.length) return ALLOWED;
        const list = sortedUnique(ports);
        return forbidden(
          "hostPort",
          `${namesOf(bad)} ${pluralize("uses", "use", bad.length)} ${pluralize("hostPort", "hostPorts", list.length)} ${list.join(", ")}`,
          `remove ${fields.join(", ")} (expose the port with a Service instead)`,
        );
      },
    },
  ],
});
