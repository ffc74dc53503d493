// Baseline: probes and lifecycle handlers may not name a host (PSA hostProbesAndHostLifecycle, 1.34):
// the kubelet would connect from the node to wherever they point.
import {
  asObject,
  asString,
  forbidInContainers,
  joinQuote,
  podSecurityCheck,
  type ContainerFinding,
} from "./helpers";
import type { ContainerRef } from "../../../lib/objects/pod";

const PROBES = ["livenessProbe", "readinessProbe", "startupProbe"];
const HANDLERS = ["postStart", "preStop"];
const ACTIONS = ["httpGet", "tcpSocket"];

/** The hosts a container's probes and lifecycle handlers name. */
function hostsOf(c: ContainerRef): ContainerFinding[] {
  const container = c.container as unknown as Record<string, unknown>;
  const lifecycle = asObject(container.lifecycle);
  const handlers: [string, unknown][] = [
    ...PROBES.map(p => [p, container[p]] as [string, unknown]),
    ...HANDLERS.map(h => [`lifecycle.${h}`, lifecycle?.[h]] as [string, unknown]),
  ];
  const found: ContainerFinding[] = [];
  for (const [where, handler] of handlers) {
    for (const action of ACTIONS) {
      const host = asString(asObject(asObject(handler)?.[action])?.host);
      if (host) found.push({ value: host, field: `${c.path}.${where}.${action}.host` });
    }
  }
  return found;
}

export const hostProbesAndHostLifecycle = podSecurityCheck({
  id: "hostProbesAndHostLifecycle",
  level: "baseline",
  versions: [
    {
      since: 34,
      check: forbidInContainers({
        reason: "probe or lifecycle host",
        find: hostsOf,
        noun: ["probe or lifecycle host", "probe or lifecycle hosts"],
        list: joinQuote,
        fixNote: "(the probe then targets the pod's own IP)",
      }),
    },
  ],
});
