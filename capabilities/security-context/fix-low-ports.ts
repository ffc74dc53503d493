// A server on a privileged port (TGI's PORT=80, an image that EXPOSEs 80 or 443) run as a non-root
// UID with every capability dropped cannot bind it. Pod Security allows the pod-level sysctl
// net.ipv4.ip_unprivileged_port_start at baseline and restricted (it is namespaced to the pod's
// network namespace): set to the lowest such port, the bind works and no capability is added.
// Pure: the image's config comes in as data. Why: docs/adr/0038-ml-image-shapes-from-the-config.md
import { fieldPath, type ContainerRef, type PodTemplateRef } from "../../lib/objects/pod";
import type { V1Container } from "@kubernetes/client-node";
import { lowPort, PORT_ENV } from "../../lib/images/config-shapes";
import { policyMinor, type LevelVersion } from "./checks";
import { asArray, asObject, isWindowsPod, type Obj } from "./checks/helpers";
import { safeSysctlsAt } from "./checks/sysctls";
import { imageContainersAndEphemeral, unset, type FixContext } from "./fix-context";
import type { ImageUser } from "./image-user";

export const LOW_PORT_SYSCTL = "net.ipv4.ip_unprivileged_port_start";
export const LOW_PORTS_RULE = "lowPorts";
/**
 * The policy version from which the sysctl is set: Kubernetes 1.22 made it a safe sysctl in the
 * kubelet and in Pod Security's baseline together (kubernetes/kubernetes#103326). Pod Security's
 * table lists it from its first policy, but a namespace pinned below 1.22 names a cluster whose
 * kubelets may refuse it.
 */
export const LOW_PORT_SYSCTL_SINCE = 22;
const NET_BIND = new Set(["NET_BIND_SERVICE", "CAP_NET_BIND_SERVICE"]);

/** A privileged port a container listens on, and what says so (for the messages). */
export interface LowPort {
  port: number;
  container: string;
  from: string;
}

/** Literal env values of the container by name; a name set from elsewhere (valueFrom) is unknown. */
function envOf(container: Obj): Map<string, string | undefined> {
  const out = new Map<string, string | undefined>();
  for (const e of asArray(container.env)) {
    const entry = asObject(e);
    if (typeof entry?.name !== "string") continue;
    out.set(entry.name, typeof entry.value === "string" ? entry.value : undefined);
  }
  return out;
}

/**
 * The lowest privileged port the container listens on: its ports[].containerPort, its image's
 * ExposedPorts, and PORT-style Env values (the container's env replacing the image's).
 */
export function lowestPortOf(ref: ContainerRef, user: ImageUser | undefined): LowPort | undefined {
  const container = ref.container as unknown as Obj;
  const name = String(container.name ?? "");
  const found: LowPort[] = [];
  for (const p of asArray(container.ports)) {
    const port = lowPort(asObject(p)?.containerPort);
    if (port !== undefined) found.push({ port, container: name, from: `containerPort ${port}` });
  }
  const shapes = user && user.kind !== "unknown" ? user.shapes : undefined;
  for (const port of shapes?.exposed ?? [])
    found.push({ port, container: name, from: `its image's EXPOSE ${port}` });
  const env = envOf(container);
  for (const [key, port] of shapes?.portEnv ?? [])
    if (!env.has(key))
      found.push({ port, container: name, from: `its image's Env ${key}=${port}` });
  for (const [key, value] of env) {
    const port = PORT_ENV.test(key) ? lowPort(value) : undefined;
    if (port !== undefined) found.push({ port, container: name, from: `env ${key}=${port}` });
  }
  return found.sort((a, b) => a.port - b.port)[0];
}

/**
 * Whether the container runs as a non-root UID (its own or the pod's runAsUser over 0, or
 * runAsNonRoot without one, or its image's numeric user) with every capability dropped and
 * NET_BIND_SERVICE not added back: then it cannot bind a privileged port.
 */
export function cannotBindLow(
  ref: ContainerRef,
  podSc: Obj | undefined,
  user?: ImageUser,
): boolean {
  const sc = asObject((ref.container as unknown as Obj).securityContext);
  const caps = asObject(sc?.capabilities);
  const drop = asArray(caps?.drop).map(String);
  const add = asArray(caps?.add).map(String);
  if (!drop.includes("ALL") || add.some(c => NET_BIND.has(c))) return false;
  const uid = [sc?.runAsUser, podSc?.runAsUser].find(u => typeof u === "number");
  if (typeof uid === "number") return uid > 0;
  if (user?.kind === "numeric") return user.uid > 0;
  return (sc?.runAsNonRoot ?? podSc?.runAsNonRoot) === true;
}

/** The lowest privileged port some container of the pod listens on and cannot bind. */
export function lowPortNeeded(
  template: PodTemplateRef,
  users: ReadonlyMap<V1Container, ImageUser> | undefined,
): LowPort | undefined {
  const spec = asObject(template.spec);
  if (!spec || spec.hostNetwork === true || isWindowsPod(template)) return undefined;
  const podSc = asObject(spec.securityContext);
  let lowest: LowPort | undefined;
  for (const ref of imageContainersAndEphemeral(template)) {
    const user = users?.get(ref.container);
    if (!cannotBindLow(ref, podSc, user)) continue;
    const low = lowestPortOf(ref, user);
    if (low && (!lowest || low.port < lowest.port)) lowest = low;
  }
  return lowest;
}

/** Whether the namespace's level, at the version it is evaluated at, allows the sysctl. */
export function sysctlAllowed(level: LevelVersion): boolean {
  if (level.level === "privileged") return true;
  const minor = policyMinor(level.version);
  return minor >= LOW_PORT_SYSCTL_SINCE && safeSysctlsAt(minor).has(LOW_PORT_SYSCTL);
}

/** The pod's own value of the sysctl, when it sets one (a name spelled with / counts too). */
export function podSysctl(podSc: Obj | undefined): string | undefined {
  const own = asArray(podSc?.sysctls)
    .map(asObject)
    .find(s => String(s?.name ?? "").replace(/\//g, ".") === LOW_PORT_SYSCTL);
  return own ? String(own.value ?? "") : undefined;
}

/**
 * Sets the sysctl to the lowest privileged port a container listens on and cannot bind, after
 * the containers' fills (they decide the user and drop ALL). Never where the pod sets it already
 * (policy.ts warns when its value is above the port), nor with hostNetwork (the node's own
 * namespace: the API refuses it there), nor where the namespace's level would refuse it.
 */
export function fixLowPorts(ctx: FixContext, podSc: Obj): void {
  const { template, inputs, settings, rec } = ctx;
  if ((inputs.lowPorts ?? settings.lowPorts) === "off") return;
  if (!sysctlAllowed(inputs.level ?? { level: "restricted", version: "latest" })) return;
  if (!unset(podSc.sysctls) && !Array.isArray(podSc.sysctls)) return;
  if (podSysctl(podSc) !== undefined) return;
  const low = lowPortNeeded(template, inputs.users);
  if (!low) return;
  const list = (podSc.sysctls ??= []) as unknown[];
  // The lowest port, not 0: ports below it stay privileged (ADR 0038).
  const sysctl = { name: LOW_PORT_SYSCTL, value: String(low.port) };
  list.push(sysctl);
  rec.changes.push({
    rule: LOW_PORTS_RULE,
    message: `${fieldPath(template, "spec.securityContext.sysctls")}[${list.length - 1}]=${JSON.stringify(sysctl)}`,
  });
}

/**
 * What to say when the pod sets the sysctl itself above the port a container needs (it is never
 * overridden): the bind will fail as it would without the sysctl. Undefined: nothing to say.
 */
export function lowPortWarning(
  template: PodTemplateRef,
  users: ReadonlyMap<V1Container, ImageUser> | undefined,
): string | undefined {
  const podSc = asObject(asObject(template.spec)?.securityContext);
  const own = podSysctl(podSc);
  if (own === undefined) return undefined;
  const value = /^\d{1,5}$/.test(own) ? Number(own) : undefined;
  const low = lowPortNeeded(template, users);
  if (!low || value === undefined || value <= low.port) return undefined;
  const at = fieldPath(template, "spec.securityContext.sysctls");
  return `container "${low.container}" listens on port ${low.port} (${low.from}) as a non-root UID with every capability dropped, but the pod sets ${LOW_PORT_SYSCTL}=${value} in ${at}, above it, so the bind will fail (the module never changes a sysctl the pod sets). Fix: set ${LOW_PORT_SYSCTL} to ${low.port} or lower in ${at}`;
}

/**
 * What to say when a container needs the sysctl and the pod has none because the fix may not set
 * it here (`why`: the setting off, a namespace pinned below v1.22...): the bind will fail.
 */
export function lowPortUnsetWarning(
  template: PodTemplateRef,
  users: ReadonlyMap<V1Container, ImageUser> | undefined,
  why: string,
): string | undefined {
  const low = lowPortNeeded(template, users);
  if (!low) return undefined;
  const at = fieldPath(template, "spec.securityContext.sysctls");
  return `container "${low.container}" listens on port ${low.port} (${low.from}) as a non-root UID with every capability dropped, and ${LOW_PORT_SYSCTL} is not set (${why}), so the bind will fail. Fix: set ${LOW_PORT_SYSCTL} to ${low.port} in ${at} (a safe sysctl from Kubernetes v1.22), or listen on a port of 1024 or more`;
}
