// Exemptions: parsing, matching and waiving (pure); the format is in docs/exemptions.md.
// Why: docs/adr/0011-exemptions-in-one-owned-namespace.md
import type { V1LabelSelector, V1LabelSelectorRequirement } from "@kubernetes/client-node";
import type { KubeObject } from "../objects/pod";
import { podTemplateOf } from "../workload-kinds/built-in";
import { isRecord } from "../objects/record";
import type { NamespaceInfo } from "../objects/keys";
import { OWNED_BY_LABEL } from "../objects/keys";
import type { ExemptionsSettings } from "./settings";
import { formatNote, type Violation } from "../objects/verdict";

export const EXEMPTION_GVK = {
  group: "admission-guard.dev",
  version: "v1alpha1",
  kind: "Exemption",
  plural: "exemptions",
} as const;
export const EXEMPTION_API_VERSION = `${EXEMPTION_GVK.group}/${EXEMPTION_GVK.version}`;

/** Rules no Exemption can waive: they say the module could not judge the object. */
export const UNWAIVABLE_RULES = ["internal-error", "malformed-object"];
/** The capability that judges Exemptions: no Exemption waives it. */
export const EXEMPTIONS_CAPABILITY = "exemptions";

export interface Waiver {
  capability: string;
  /** undefined: every rule of the capability, and its fixes are skipped. */
  rules?: string[];
}

export interface Exemption {
  /** namespace/name, as messages name it. */
  id: string;
  namespace: string;
  name: string;
  reason: string;
  expires: string;
  expiresAt: number;
  /**
   * When it was last written: its managedFields' latest time, else its creationTimestamp. Its life
   * ends exemptions.maxLifetimeDays after that at the latest, whatever spec.expires says.
   */
  writtenAt?: number;
  /** Set on a copy whose life that cap ended earlier than spec.expires (see inForce). */
  capped?: boolean;
  namespaces: string[];
  names: string[];
  selector?: V1LabelSelector;
  waive: Waiver[];
}

export const isExemptionObject = (obj: KubeObject | undefined): boolean =>
  obj?.kind === EXEMPTION_GVK.kind && obj?.apiVersion === EXEMPTION_API_VERSION;

const SELECTOR_OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist"];

const stringList = (v: unknown): v is string[] =>
  Array.isArray(v) && v.every(s => typeof s === "string" && s.length > 0);

/** An Exemption object read, or every problem with it (what the validating webhook denies). */
export function readExemption(
  obj: KubeObject,
): { exemption: Exemption; problems: [] } | { exemption?: undefined; problems: string[] } {
  const problems: string[] = [];
  const spec = isRecord(obj.spec) ? obj.spec : {};
  const reason = typeof spec.reason === "string" ? spec.reason.trim() : "";
  if (!reason) problems.push("spec.reason is required: say why the workload needs this");
  const expires = typeof spec.expires === "string" ? spec.expires : "";
  const expiresAt = Date.parse(expires);
  if (!expires)
    problems.push('spec.expires is required (an RFC 3339 time, "2027-01-31T00:00:00Z")');
  else if (Number.isNaN(expiresAt) || !/^\d{4}-\d{2}-\d{2}T/.test(expires))
    problems.push(`spec.expires "${expires}" is not an RFC 3339 time ("2027-01-31T00:00:00Z")`);

  const match = isRecord(spec.match) ? spec.match : {};
  const namespaces = match.namespaces;
  if (!stringList(namespaces) || namespaces.length === 0)
    problems.push("spec.match.namespaces is required: the namespaces of the exempted workloads");
  if (match.names !== undefined && !stringList(match.names))
    problems.push("spec.match.names must be a list of names (`*` matches any run of characters)");
  const selector = match.selector;
  if (selector !== undefined) problems.push(...selectorProblems(selector));

  const waive = Array.isArray(spec.waive) ? spec.waive : [];
  if (waive.length === 0)
    problems.push("spec.waive is required: a list of {capability, rules} that are waived");
  const waivers: Waiver[] = [];
  waive.forEach((w, i) => {
    if (!isRecord(w) || typeof w.capability !== "string" || !w.capability) {
      problems.push(`spec.waive[${i}].capability is required`);
      return;
    }
    if (w.rules !== undefined && (!stringList(w.rules) || w.rules.length === 0)) {
      problems.push(
        `spec.waive[${i}].rules must be a non-empty list of rule names (leave it out to waive every rule of ${w.capability})`,
      );
      return;
    }
    waivers.push({ capability: w.capability, rules: w.rules as string[] | undefined });
  });
  if (problems.length) return { problems };
  return {
    exemption: {
      id: `${obj.metadata?.namespace ?? ""}/${obj.metadata?.name ?? ""}`,
      namespace: obj.metadata?.namespace ?? "",
      name: obj.metadata?.name ?? "",
      reason,
      expires,
      expiresAt,
      writtenAt: lastWritten(obj),
      namespaces: namespaces as string[],
      names: (match.names as string[] | undefined) ?? [],
      selector: selector as V1LabelSelector | undefined,
      waive: waivers,
    },
    problems: [],
  };
}

/** The latest time the object was written: managedFields' times, else its creation. */
function lastWritten(obj: KubeObject): number | undefined {
  const meta = obj.metadata as
    | { managedFields?: { time?: string }[]; creationTimestamp?: string }
    | undefined;
  const times = (meta?.managedFields ?? [])
    .map(f => Date.parse(f?.time ?? ""))
    .filter(t => !Number.isNaN(t));
  if (times.length) return Math.max(...times);
  const created = Date.parse(meta?.creationTimestamp ?? "");
  return Number.isNaN(created) ? undefined : created;
}

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * The Exemption as it counts: its end is spec.expires, or maxLifetimeDays after it was last written
 * if that comes first (one written while the webhook was not looking, or before the maximum was
 * lowered, cannot outlive the rule; writing it again renews it). A copy when capped.
 */
export function inForce(
  exemption: Exemption,
  settings: { exemptions: ExemptionsSettings },
): Exemption {
  if (exemption.writtenAt === undefined) return exemption;
  const cap = exemption.writtenAt + settings.exemptions.maxLifetimeDays * DAY_MS;
  if (cap >= exemption.expiresAt) return exemption;
  return { ...exemption, expiresAt: cap, expires: new Date(cap).toISOString(), capped: true };
}

function selectorProblems(selector: unknown): string[] {
  if (!isRecord(selector)) return ["spec.match.selector must be a label selector"];
  const problems: string[] = [];
  const { matchLabels, matchExpressions } = selector;
  if (
    matchLabels !== undefined &&
    (!isRecord(matchLabels) || !Object.values(matchLabels).every(v => typeof v === "string"))
  )
    problems.push("spec.match.selector.matchLabels must map label keys to string values");
  if (matchExpressions !== undefined) {
    if (!Array.isArray(matchExpressions))
      problems.push("spec.match.selector.matchExpressions must be a list");
    else
      matchExpressions.forEach((e, i) => {
        const at = `spec.match.selector.matchExpressions[${i}]`;
        if (
          !isRecord(e) ||
          typeof e.key !== "string" ||
          !SELECTOR_OPERATORS.includes(String(e.operator))
        )
          problems.push(`${at} needs a key and an operator (${SELECTOR_OPERATORS.join(", ")})`);
        else if ((e.operator === "In" || e.operator === "NotIn") && !stringList(e.values))
          problems.push(`${at}: ${e.operator} needs values`);
        else if (
          (e.operator === "Exists" || e.operator === "DoesNotExist") &&
          Array.isArray(e.values) &&
          e.values.length
        )
          problems.push(`${at}: ${e.operator} takes no values`);
      });
  }
  return problems;
}

/** Whether labels satisfy a label selector, as the API server reads one (every term must hold). */
export function selectorMatches(
  selector: V1LabelSelector,
  labels: Record<string, string>,
): boolean {
  for (const [key, value] of Object.entries(selector.matchLabels ?? {}))
    if (labels[key] !== value) return false;
  return (selector.matchExpressions ?? []).every((e: V1LabelSelectorRequirement) => {
    const has = Object.prototype.hasOwnProperty.call(labels, e.key);
    switch (e.operator) {
      case "In":
        return has && (e.values ?? []).includes(labels[e.key]);
      case "NotIn":
        return !has || !(e.values ?? []).includes(labels[e.key]);
      case "Exists":
        return has;
      case "DoesNotExist":
        return !has;
      default:
        return false; // an operator we do not know matches nothing: never waive by mistake
    }
  });
}

/** A name pattern where `*` matches any run of characters (and nothing else is special). */
export function nameMatches(pattern: string, name: string): boolean {
  const parts = pattern.split("*");
  if (parts.length === 1) return pattern === name;
  if (!name.startsWith(parts[0])) return false;
  let at = parts[0].length;
  for (const part of parts.slice(1, -1)) {
    const found = name.indexOf(part, at);
    if (found < 0) return false;
    at = found + part.length;
  }
  const last = parts[parts.length - 1];
  return name.length - last.length >= at && name.endsWith(last);
}

/** What an Exemption is matched against: a Pod's own, or a workload's name and its pods' labels. */
export interface Subject {
  namespace: string;
  name: string;
  labels: Record<string, string>;
}

export function subjectOf(obj: KubeObject, namespace: string): Subject {
  const meta = obj.metadata ?? {};
  // A controller's pod may arrive with only generateName ("nvidia-driver-"): `nvidia-driver-*` matches it.
  const name = meta.name || meta.generateName || "";
  const template = podTemplateOf(obj);
  const labels = (obj.kind === "Pod" ? meta.labels : template?.metadata.labels) ?? {};
  return { namespace, name, labels: isRecord(labels) ? (labels as Record<string, string>) : {} };
}

export function exemptionMatches(exemption: Exemption, subject: Subject): boolean {
  if (!exemption.namespaces.includes(subject.namespace)) return false;
  if (exemption.names.length && !exemption.names.some(p => nameMatches(p, subject.name)))
    return false;
  return !exemption.selector || selectorMatches(exemption.selector, subject.labels);
}

export function waives(exemption: Exemption, capability: string, rule: string): boolean {
  if (UNWAIVABLE_RULES.includes(rule) || capability === EXEMPTIONS_CAPABILITY) return false;
  return exemption.waive.some(
    w => w.capability === capability && (!w.rules || w.rules.includes(rule)),
  );
}

/** The Exemptions that bear on one object: those in force, and those that matched but expired. */
export interface ApplicableExemptions {
  active: Exemption[];
  expired: Exemption[];
}

export const NO_EXEMPTIONS: ApplicableExemptions = { active: [], expired: [] };

// Read for every request: each stored object is parsed once (a watch event replaces the object).
const parsed = new WeakMap<object, Exemption | null>();

function parsedExemption(obj: KubeObject): Exemption | null {
  let exemption = parsed.get(obj);
  if (exemption === undefined) parsed.set(obj, (exemption = readExemption(obj).exemption ?? null));
  return exemption;
}

/**
 * Whether the Exemptions namespace is the install's own: labelled OWNED_BY_LABEL with the module's
 * uuid (the build overlay, scripts/overlay/entries.ts writes it). Unknown (not in the cache): not owned.
 */
export function exemptionsNamespaceOwned(
  namespace: NamespaceInfo | undefined,
  moduleUuid: string,
): boolean {
  return !!moduleUuid && namespace?.labels[OWNED_BY_LABEL] === moduleUuid;
}

/** Whether Exemptions can count: their namespace is the install's own, exists without it, or is absent. */
export type ExemptionsNamespaceState = "owned" | "not-owned" | "absent";

/**
 * The Exemptions namespace as the install creates it (the build overlay's manifest and chart, and
 * `pepr dev`: lib/cluster/exemptions-namespace.ts): labelled as the install's own.
 */
export function ownedExemptionsNamespace(
  name: string,
  moduleUuid: string,
): KubeObject & { apiVersion: string; kind: string; metadata: { name: string } } {
  return {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: {
      name,
      labels: { "app.kubernetes.io/managed-by": "admission-guard", [OWNED_BY_LABEL]: moduleUuid },
    },
  };
}

/**
 * What is wrong with an Exemptions namespace that exists but is not the install's own, or undefined
 * when it is owned or not known. Said by the webhook refusing an Exemption there and by the
 * controller's log, with the same fix (notOwnedFix).
 */
export function notOwnedReason(
  namespace: NamespaceInfo | undefined,
  moduleUuid: string,
): string | undefined {
  if (!namespace || !moduleUuid || exemptionsNamespaceOwned(namespace, moduleUuid))
    return undefined;
  const has = namespace.labels[OWNED_BY_LABEL];
  return `namespace ${namespace.name} lacks the label ${OWNED_BY_LABEL}=${moduleUuid} that the install writes on the namespace it creates (${has === undefined ? "it has no such label" : `it has ${OWNED_BY_LABEL}=${has}`}), so none of its Exemptions count`;
}

/**
 * The admin's fix for an Exemptions namespace the install does not own. Never a blind `kubectl
 * label`: a tenant who created the namespace first may hold RoleBindings there, and the label would
 * let them grant Exemptions. Why: docs/adr/0028-exemptions-refused-where-they-do-not-count.md
 */
export function notOwnedFix(namespace: string, moduleUuid: string): string {
  return `a cluster admin first checks who may write there (kubectl get rolebindings,roles -n ${namespace}: a namespace a tenant created may hold their RoleBindings, and the label would let them grant Exemptions), then, if only platform admins may, runs kubectl label namespace ${namespace} ${OWNED_BY_LABEL}=${moduleUuid}, else deletes the namespace and creates it labelled (docs/exemptions.md)`;
}

/**
 * The Exemptions that match this object: only those in the exemptions namespace and well-formed
 * count (one written before the webhook could judge it, or while it was down, is skipped here).
 */
export function applicableExemptions(
  obj: KubeObject,
  namespace: string,
  stored: readonly KubeObject[] | undefined,
  settings: { exemptions: ExemptionsSettings },
  now = Date.now(),
): ApplicableExemptions {
  if (!settings.exemptions.enabled || !stored?.length) return NO_EXEMPTIONS;
  const subject = subjectOf(obj, namespace);
  const out: ApplicableExemptions = { active: [], expired: [] };
  for (const item of stored) {
    if (item.metadata?.namespace !== settings.exemptions.namespace || !isExemptionObject(item))
      continue;
    const parsedOne = parsedExemption(item);
    if (!parsedOne || !exemptionMatches(parsedOne, subject)) continue;
    const exemption = inForce(parsedOne, settings);
    (exemption.expiresAt > now ? out.active : out.expired).push(exemption);
  }
  return out;
}

/** Capabilities an Exemption waives whole: their fixes are skipped too (the object stays as written). */
export function wholeCapabilitiesWaived(applicable: ApplicableExemptions): Set<string> {
  return new Set(
    applicable.active.flatMap(e => e.waive.filter(w => !w.rules).map(w => w.capability)),
  );
}

export interface WaivedViolation {
  violation: Violation;
  exemption: Exemption;
}

/** Splits violations into those that stand and those an Exemption in force waives. */
export function applyExemptions(
  violations: Violation[],
  applicable: ApplicableExemptions,
  /** A policy's notWaivable rules (lib/engine/policy.ts): false for those. */
  waivable: (v: Violation) => boolean = () => true,
): { standing: Violation[]; waived: WaivedViolation[] } {
  if (!applicable.active.length) return { standing: violations, waived: [] };
  const standing: Violation[] = [];
  const waived: WaivedViolation[] = [];
  for (const violation of violations) {
    const exemption =
      waivable(violation) &&
      applicable.active.find(e => waives(e, violation.capability, violation.rule));
    if (exemption) waived.push({ violation, exemption });
    else standing.push(violation);
  }
  return { standing, waived };
}

/** The warning for a waived violation: what stood, and on whose word it is allowed. */
export function waivedWarning({ violation, exemption }: WaivedViolation): string {
  return formatNote(
    violation.capability,
    `${violation.rule} waived by Exemption ${exemption.id} until ${exemption.expires} (${exemption.reason}): ${violation.message}`,
  );
}

/** The warning for an Exemption that matched the object but no longer counts. */
export function expiredWarning(exemption: Exemption): string {
  const waived = exemption.waive
    .map(w => (w.rules ? w.rules.map(r => `${w.capability}/${r}`).join(", ") : `${w.capability}/*`))
    .join(", ");
  const why = exemption.capped
    ? ` (exemptions.maxLifetimeDays after it was last written, before its spec.expires)`
    : "";
  return `admission-guard: Exemption ${exemption.id} expired at ${exemption.expires}${why} and no longer waives ${waived}. Fix: ask a platform admin to renew it (kubectl -n ${exemption.namespace} edit exemption ${exemption.name}) or fix the workload`;
}

/**
 * Appended to a denial: an Exemption is a way out, and who grants it. undefined when Exemptions are
 * off or none of the denying rules can be waived.
 */
export function exemptionPath(
  violations: Violation[],
  settings: { exemptions: ExemptionsSettings },
  canWaive: (v: Violation) => boolean = () => true,
): string | undefined {
  if (!settings.exemptions.enabled) return undefined;
  const waivable = violations.filter(
    v =>
      v.severity !== "warn" &&
      !UNWAIVABLE_RULES.includes(v.rule) &&
      v.capability !== EXEMPTIONS_CAPABILITY &&
      canWaive(v),
  );
  if (!waivable.length) return undefined;
  const rules = [...new Set(waivable.map(v => `${v.capability}/${v.rule}`))].join(", ");
  const ns = settings.exemptions.namespace;
  // No "; " inside: Pepr joins the denials of its actions with it.
  return `admission-guard: if the workload must run as it is, a platform admin (whoever may write Exemptions in namespace ${ns}) can waive ${rules} for it with an Exemption (kubectl explain exemptions.spec)`;
}
