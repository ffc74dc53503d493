// Baseline: probes and lifecycle handlers may not name a host (PSA hostProbesAndHostLifecycle, 1.34):
// the kubelet would connect from the node to wherever they point.
import {
  ALLOWED,
  asObject,
  asString,
  forbidden,
  joinQuote,
  namesOf,
  pluralize,
  sortedUnique,
  visitContainers,
  podSecurityCheck,
} from "./helpers";

const PROBES = ["livenessProbe", "readinessProbe", "startupProbe"];
const HANDLERS = ["postStart", "preStop"];
const ACTIONS = ["httpGet", "tcpSocket"];

export const hostProbesAndHostLifecycle = podSecurityCheck({
  id: "hostProbesAndHostLifecycle",
  level: "baseline",
  versions: [
    {
      since: 34,
      check(pod) {
        const hosts: string[] = [];
        const fields: string[] = [];
        const bad = visitContainers(pod).filter(c => {
          const container = c.container as unknown as Record<string, unknown>;
          const lifecycle = asObject(container.lifecycle);
          const handlers: [string, unknown][] = [
            ...PROBES.map(p => [p, container[p]] as [string, unknown]),
            ...HANDLERS.map(h => [`lifecycle.${h}`, lifecycle?.[h]] as [string, unknown]),
          ];
          let found = false;
          for (const [where, handler] of handlers) {
            for (const action of ACTIONS) {
              const host = asString(asObject(asObject(handler)?.[action])?.host);
              if (!host) continue;
              found = true;
              hosts.push(host);
              fields.push(`${c.path}.${where}.${action}.host`);
            }
          }
          return found;
        });
        if (!bad.length) return ALLOWED;
        const list = sortedUnique(hosts);
        return forbidden(
          "probe or lifecycle host",
          `${namesOf(bad)} ${pluralize("uses", "use", bad.length)} ${pluralize("probe or lifecycle host", "probe or lifecycle hosts", list.length)} ${joinQuote(list)}`,
          `remove ${fields.join(", ")} (the probe then targets the pod's own IP)`,
        );
      },
    },
  ],
});
