// The shape every Pod Security Standards check has, modelled on Pod Security Admission's own
// (policy/check_*.go in kubernetes/pod-security-admission): an id, a level, the baseline checks a
// restricted check replaces, and one pure function over the pod's metadata and spec that says
// allowed, or why not (forbiddenReason, forbiddenDetail) and how to fix it.
//
// Input is untrusted: any field may be missing or of the wrong type, and no check may throw.
// A value of the wrong type counts as unset (the API server would not have decoded it).
import { containersOf, type ContainerRef, type PodTemplateRef } from "../../../lib/objects/pod";

/** The level a check belongs to (privileged has none). */
export type Level = "baseline" | "restricted";

export interface CheckResult {
  allowed: boolean;
  /** Short, as PSA's: "host namespaces", "runAsNonRoot != true". */
  forbiddenReason?: string;
  /** The containers, fields and values involved. */
  forbiddenDetail?: string;
  /** The field to change and the value to set. */
  fix?: string;
}

/** One behaviour of a check, from a policy version on (PSA's VersionedCheck). */
export interface VersionedCheck {
  /** The first policy version it applies to, as the minor of v1.N. */
  since: number;
  check(pod: PodTemplateRef): CheckResult;
}

export interface PodSecurityCheck {
  /** PSA's check id, used as our rule name: "runAsNonRoot", "capabilities_restricted". */
  id: string;
  level: Level;
  /** Baseline checks this restricted check replaces wherever it applies. */
  overrides?: string[];
  /** Its behaviours, oldest first: before the first one's version the check does not exist. */
  versions: readonly VersionedCheck[];
  /** The newest behaviour (what `latest` evaluates). */
  check(pod: PodTemplateRef): CheckResult;
}

/** A check from its versions; `check` is the newest of them. */
export function podSecurityCheck(def: Omit<PodSecurityCheck, "check">): PodSecurityCheck {
  return { ...def, check: def.versions[def.versions.length - 1].check };
}

/** The check's behaviour at policy version 1.`minor`; undefined when it does not exist yet there. */
export function behaviourAt(check: PodSecurityCheck, minor: number): VersionedCheck | undefined {
  let found: VersionedCheck | undefined;
  for (const v of check.versions) if (v.since <= minor) found = v;
  return found;
}

export const ALLOWED: CheckResult = { allowed: true };

export type Obj = Record<string, unknown>;

export function asObject(x: unknown): Obj | undefined {
  return typeof x === "object" && x !== null && !Array.isArray(x) ? (x as Obj) : undefined;
}

export function asArray(x: unknown): unknown[] {
  return Array.isArray(x) ? x : [];
}

/** Go's zero value for a string field: "" when missing or not a string. */
export function asString(x: unknown): string {
  return typeof x === "string" ? x : "";
}

export function specOf(pod: PodTemplateRef): Obj {
  return asObject(pod.spec) ?? {};
}

export function podSecurityContext(pod: PodTemplateRef): Obj | undefined {
  return asObject(specOf(pod).securityContext);
}

export function securityContextOf(ref: ContainerRef): Obj | undefined {
  return asObject((ref.container as unknown as Obj).securityContext);
}

export function containerName(ref: ContainerRef): string {
  return asString(ref.container.name);
}

export function annotationsOf(pod: PodTemplateRef): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(asObject(asObject(pod.metadata)?.annotations) ?? {})) {
    if (typeof v === "string") out[k] = v;
  }
  return out;
}

/** Every container of the pod (init, regular, ephemeral), as PSA's visitContainers sees them. */
export function visitContainers(pod: PodTemplateRef): ContainerRef[] {
  return containersOf(pod);
}

/** PSA exempts some restricted checks for pods that declare `spec.os.name: windows` (from policy 1.25). */
export function isWindowsPod(pod: PodTemplateRef): boolean {
  return asObject(specOf(pod).os)?.name === "windows";
}

/** From this policy version (1.N) PSA exempts pods declaring `spec.os.name: windows` from some checks. */
const WINDOWS_EXEMPT_SINCE = 25;

/** The versions of a check from policy 1.`since`, that from 1.25 on allows every Windows pod. */
export function versionsExemptingWindowsPods(
  since: number,
  check: VersionedCheck["check"],
): VersionedCheck[] {
  return [
    { since, check },
    { since: WINDOWS_EXEMPT_SINCE, check: pod => (isWindowsPod(pod) ? ALLOWED : check(pod)) },
  ];
}

/** From this policy version (1.N) PSA relaxes some checks for a pod in its own user namespace (KEP-127). */
export const USER_NAMESPACE_RELAXED_SINCE = 35;

/** `spec.hostUsers: false`: the pod runs in its own user namespace (PSA relaxes some checks from 1.35). */
export function isUserNamespacePod(pod: PodTemplateRef): boolean {
  return specOf(pod).hostUsers === false;
}

/**
 * The versions of a check from policy 1.`since`, that from 1.35 on allows every pod in its own user
 * namespace.
 */
export function versionsExemptingUserNamespacePods(
  since: number,
  check: VersionedCheck["check"],
): VersionedCheck[] {
  return [
    { since, check },
    {
      since: USER_NAMESPACE_RELAXED_SINCE,
      check: pod => (isUserNamespacePod(pod) ? ALLOWED : check(pod)),
    },
  ];
}

export function pluralize(singular: string, plural: string, count: number): string {
  return count === 1 ? singular : plural;
}

export function joinQuote(items: string[]): string {
  return items.map(i => `"${i}"`).join(", ");
}

/** `container "a"` / `containers "a", "b"`. */
export function namesOf(refs: ContainerRef[]): string {
  return `${pluralize("container", "containers", refs.length)} ${joinQuote(refs.map(containerName))}`;
}

/** The field of each container: `spec.containers[0].securityContext.privileged, spec.initContainers[1]...`. */
export function fieldsOf(refs: ContainerRef[], field: string): string {
  return refs.map(r => `${r.path}.${field}`).join(", ");
}

/** The pod-level field path: `spec.securityContext.runAsNonRoot` (under the template path for workloads). */
export function podField(pod: PodTemplateRef, field: string): string {
  return pod.path ? `${pod.path}.spec.${field}` : `spec.${field}`;
}

export function forbidden(reason: string, detail: string, fix: string): CheckResult {
  return { allowed: false, forbiddenReason: reason, forbiddenDetail: detail, fix };
}

/** What a check finds in a container: the offending value, and the field that holds it. */
export interface ContainerFinding {
  value: string;
  field: string;
}

/**
 * The containers in which `find` finds something, and all it found in container order: the values
 * (for the detail) and their fields (for the fix).
 */
function findInContainers(
  pod: PodTemplateRef,
  find: (ref: ContainerRef) => ContainerFinding[],
): { containers: ContainerRef[]; values: string[]; fields: string[] } {
  const containers: ContainerRef[] = [];
  const values: string[] = [];
  const fields: string[] = [];
  for (const ref of visitContainers(pod)) {
    const found = find(ref);
    if (!found.length) continue;
    containers.push(ref);
    for (const { value, field } of found) {
      values.push(value);
      fields.push(field);
    }
  }
  return { containers, values, fields };
}

/**
 * The check forbidding what `find` finds in any container: `containers "a", "b" use hostPorts 80,
 * 443`, fixed by removing every field that holds one.
 */
export function forbidInContainers(o: {
  reason: string;
  find: (ref: ContainerRef) => ContainerFinding[];
  /** What is found, singular and plural: ["hostPort", "hostPorts"]. */
  noun: [string, string];
  /** How the values (sorted, deduplicated) are listed. */
  list: (values: string[]) => string;
  /** Said after the fields to remove: "(expose the port with a Service instead)". */
  fixNote: string;
}): VersionedCheck["check"] {
  return pod => {
    const { containers, values, fields } = findInContainers(pod, o.find);
    if (!containers.length) return ALLOWED;
    const list = sortedUnique(values);
    return forbidden(
      o.reason,
      `${namesOf(containers)} ${pluralize("uses", "use", containers.length)} ${pluralize(o.noun[0], o.noun[1], list.length)} ${o.list(list)}`,
      `remove ${fields.join(", ")} ${o.fixNote}`,
    );
  };
}

/** Sorted, deduplicated (PSA's sets.NewString().List()). */
export function sortedUnique(items: Iterable<string>): string[] {
  return [...new Set(items)].sort();
}

/**
 * PSA's "pod and containers "a", "b"": who set a forbidden value in their securityContext (the pod,
 * containers or both) and the fields to change; undefined when nobody did. `isBad` is asked of the
 * pod's securityContext first, then of each container's.
 */
export function badSetters(
  pod: PodTemplateRef,
  isBad: (securityContext: Obj | undefined) => boolean,
  field: string,
): { who: string; fields: string } | undefined {
  const podIsBad = isBad(podSecurityContext(pod));
  const containers = visitContainers(pod).filter(c => isBad(securityContextOf(c)));
  const who: string[] = [];
  const fields: string[] = [];
  if (podIsBad) {
    who.push("pod");
    fields.push(podField(pod, field));
  }
  if (containers.length) {
    who.push(namesOf(containers));
    fields.push(fieldsOf(containers, field));
  }
  return who.length ? { who: who.join(" and "), fields: fields.join(", ") } : undefined;
}
