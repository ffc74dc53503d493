// A pod (or a workload's pods) against the namespace's ResourceQuotas, as the ResourceQuota
// admission plugin will judge each pod (pkg/quota/v1/evaluator/core/pods.go, admission/quota):
// which quotas match the pod's scopes, which containers must set cpu/memory, and whether
// `used + asked <= hard` for every resource the quota tracks. Pure.
import { formatNote } from "../../lib/objects/verdict";
import type { V1PodSpec, V1ResourceQuota } from "@kubernetes/client-node";
import { describeContainer } from "../../lib/objects/pod";
import { formatQuantity, type Quantity } from "../../lib/objects/quantity";
import type { RuleFindings, RuleViolation } from "../../lib/engine/policy";
import { contributions, fieldOf, roundDown, show } from "./explain";
import {
  isPodQuotaResource,
  MUST_SPECIFY,
  parseList,
  quotaUsage,
  type PodResources,
  type ResourceList,
} from "./resources";
import type { PodCount } from "./workload";
import { isRecord } from "../../lib/objects/record";

export const CAPABILITY = "resource-quota";

/** What the object will ask of the quota. */
export interface QuotaDemand {
  /** "Pod ml/trainer", "Deployment ml/train". */
  subject: string;
  namespace: string;
  isPod: boolean;
  spec: V1PodSpec;
  pod: PodResources;
  bestEffort: boolean;
  count: PodCount;
  /** On UPDATE: the stored object's per-pod usage and pod count; only the increase is checked. */
  old?: { usage: ResourceList; pods: number };
}

interface ScopeSelector {
  scopeName?: string;
  operator?: string;
  values?: string[];
}

function isTerminating(spec: V1PodSpec): boolean {
  const deadline = spec.activeDeadlineSeconds;
  return typeof deadline === "number" && deadline >= 0;
}

/** Pod affinity terms that reach into other namespaces (the CrossNamespacePodAffinity scope). */
function usesCrossNamespaceAffinity(spec: V1PodSpec): boolean {
  const affinity = isRecord(spec.affinity) ? spec.affinity : {};
  for (const kind of ["podAffinity", "podAntiAffinity"] as const) {
    const rules = isRecord(affinity[kind]) ? (affinity[kind] as Record<string, unknown>) : {};
    const required = rules.requiredDuringSchedulingIgnoredDuringExecution;
    const preferred = rules.preferredDuringSchedulingIgnoredDuringExecution;
    const terms = [
      ...(Array.isArray(required) ? required : []),
      ...(Array.isArray(preferred)
        ? preferred.map(p => (isRecord(p) ? p.podAffinityTerm : p))
        : []),
    ];
    for (const term of terms) {
      if (!isRecord(term)) continue;
      if (term.namespaceSelector != null) return true;
      if (Array.isArray(term.namespaces) && term.namespaces.length > 0) return true;
    }
  }
  return false;
}

/** podMatchesScopeFunc: whether one scope (or scopeSelector expression) matches the pod. */
function scopeMatches(selector: ScopeSelector, spec: V1PodSpec, bestEffort: boolean): boolean {
  switch (selector.scopeName) {
    case "Terminating":
      return isTerminating(spec);
    case "NotTerminating":
      return !isTerminating(spec);
    case "BestEffort":
      return bestEffort;
    case "NotBestEffort":
      return !bestEffort;
    case "CrossNamespacePodAffinity":
      return usesCrossNamespaceAffinity(spec);
    case "PriorityClass": {
      const pc = typeof spec.priorityClassName === "string" ? spec.priorityClassName : "";
      const values = Array.isArray(selector.values) ? selector.values : [];
      switch (selector.operator) {
        case "Exists":
          return pc !== "";
        case "In":
          return values.includes(pc);
        case "NotIn":
          return !values.includes(pc);
        // The plugin evaluates a label selector on {PriorityClass: <name or "">}: the key is always
        // there, so DoesNotExist never matches. Mirrored, so we never disagree with it.
        default:
          return false;
      }
    }
    default:
      return false; // scopes of other objects (e.g. VolumeAttributesClass) never match a pod
  }
}

/** Whether a quota's scopes match pods of this spec (a quota that does not match never counts them). */
export function quotaMatches(
  quota: V1ResourceQuota,
  spec: V1PodSpec,
  bestEffort: boolean,
): boolean {
  return scopeSelectors(quota).every(s => scopeMatches(s, spec, bestEffort));
}

function scopeSelectors(quota: V1ResourceQuota): ScopeSelector[] {
  const spec = isRecord(quota.spec) ? quota.spec : {};
  const scopes = Array.isArray(spec.scopes) ? spec.scopes : [];
  const expressions =
    isRecord(spec.scopeSelector) && Array.isArray(spec.scopeSelector.matchExpressions)
      ? spec.scopeSelector.matchExpressions
      : [];
  return [
    ...scopes.map(scopeName => ({ scopeName, operator: "Exists" })),
    ...expressions.filter(isRecord),
  ];
}

/** A quota's ResourceList, undefined when absent. A stored quota always parses; a broken entry of a hand-written snapshot is left out. */
export const parseResourceList = (raw: unknown): ResourceList | undefined =>
  isRecord(raw) ? parseList(raw) : undefined;

/**
 * What is read of a quota on every request: its limits as the plugin reads them (status.hard, set
 * by the quota controller, else spec.hard), its usage (undefined until the controller counted it),
 * and the pod resources it tracks, sorted as Kubernetes prints them.
 */
export interface QuotaReading {
  hard: ResourceList;
  used?: ResourceList;
  tracked: string[];
}

// The cluster view replaces a quota object when it changes (a watch event, a new snapshot), never
// changes it in place: each one is read once, not on every request.
const readings = new WeakMap<V1ResourceQuota, QuotaReading>();

export function quotaReading(quota: V1ResourceQuota): QuotaReading {
  let reading = readings.get(quota);
  if (!reading) {
    const status = parseResourceList(quota.status?.hard);
    const hard =
      status && status.size ? status : (parseResourceList(quota.spec?.hard) ?? new Map());
    reading = {
      hard,
      used: parseResourceList(quota.status?.used),
      tracked: [...hard.keys()].filter(isPodQuotaResource).sort(),
    };
    readings.set(quota, reading);
  }
  return reading;
}

interface Shortfall {
  resource: string;
  need: bigint;
  perPod: Quantity;
  hard: Quantity;
  used?: Quantity;
}

/** What a check of quotas (or of node fit) finds: its denials and its notes. */
export type Findings = Pick<RuleFindings, "violations" | "warnings">;

/** A quota's name as messages give it. */
export const quotaName = (quota: V1ResourceQuota): string => quota.metadata?.name ?? "(unnamed)";

/** The quotas in name order: the order messages list them in, whatever order the cache holds. */
export const byName = (quotas: V1ResourceQuota[]): V1ResourceQuota[] =>
  [...quotas].sort((a, b) => (a.metadata?.name ?? "").localeCompare(b.metadata?.name ?? ""));

/** Checks every matching quota; returns violations (one per quota) and notes. */
export function checkQuotas(quotas: V1ResourceQuota[], demand: QuotaDemand): Findings {
  const violations: RuleViolation[] = [];
  const warnings: string[] = [];
  const usage = quotaUsage(demand.pod.requests, demand.pod.limits);
  for (const quota of byName(quotas)) {
    const name = quotaName(quota);
    const { hard, used, tracked } = quotaReading(quota);
    if (!tracked.length) continue;
    if (!scopeSelectors(quota).every(s => scopeMatches(s, demand.spec, demand.bestEffort)))
      continue;

    const missing = mustSpecify(demand, tracked);
    if (missing) violations.push(mustSpecifyViolation(demand, name, tracked, missing));

    const shortfalls: Shortfall[] = [];
    const unknown: string[] = [];
    for (const resource of tracked) {
      const perPod = usage.get(resource);
      if (!perPod) continue;
      const need = needOf(demand, resource, perPod);
      if (need === undefined) continue;
      const limit = hard.get(resource)!;
      const usedNow = used?.get(resource);
      if (!usedNow) {
        if (need > limit.milli) shortfalls.push({ resource, need, perPod, hard: limit });
        else unknown.push(resource);
        continue;
      }
      if (usedNow.milli + need > limit.milli)
        shortfalls.push({ resource, need, perPod, hard: limit, used: usedNow });
    }
    if (unknown.length)
      warnings.push(
        formatNote(
          CAPABILITY,
          `ResourceQuota ${name} has no usage recorded yet for ${unknown.join(", ")} (the quota controller has not counted it); checked against its hard limit only`,
        ),
      );
    if (shortfalls.length) violations.push(exceededViolation(demand, name, shortfalls));
  }
  return { violations, warnings };
}

/**
 * What the object adds to a quota resource: pods × per-pod on CREATE; on UPDATE the increase over
 * the stored object. undefined when there is nothing to check (no pods, no increase).
 */
function needOf(demand: QuotaDemand, resource: string, perPod: Quantity): bigint | undefined {
  const total = perPod.milli * BigInt(demand.count.pods);
  if (demand.old) {
    const before = (demand.old.usage.get(resource)?.milli ?? 0n) * BigInt(demand.old.pods);
    return total - before > 0n ? total - before : undefined;
  }
  return demand.count.pods > 0 ? total : undefined;
}

/** Containers that lack a cpu/memory field a matching quota tracks: resource → container refs. */
export function mustSpecify(
  demand: QuotaDemand,
  tracked: string[],
): Map<string, string[]> | undefined {
  const required = tracked.filter(r => MUST_SPECIFY.has(r));
  if (!required.length || demand.count.pods === 0) return undefined;
  const missing = new Map<string, string[]>();
  for (const c of demand.pod.containers) {
    const has = quotaUsage(c.requests, c.limits);
    for (const r of required) {
      if (has.has(r)) continue;
      missing.set(r, [...(missing.get(r) ?? []), `${describeContainer(c.ref)} (${c.ref.path})`]);
    }
  }
  return missing.size ? missing : undefined;
}

export function mustSpecifyViolation(
  demand: QuotaDemand,
  quota: string,
  tracked: string[],
  missing: Map<string, string[]>,
): RuleViolation {
  // By container field: a quota tracking both `cpu` and `requests.cpu` asks for one field.
  const byField = new Map<string, Set<string>>();
  const requests: Record<string, string> = {};
  const limits: Record<string, string> = {};
  for (const [r, where] of missing) {
    const { side, resource } = fieldOf(r);
    const field = `resources.${side}.${resource}`;
    byField.set(field, new Set([...(byField.get(field) ?? []), ...where]));
    const example = resource === "cpu" ? (side === "limits" ? "1" : "100m") : "256Mi";
    (side === "limits" ? limits : requests)[resource] = example;
  }
  const lines = [...byField].map(
    ([field, where]) => `${[...where].join(", ")} ${where.size > 1 ? "set" : "sets"} no ${field}`,
  );
  const fields = [...byField.keys()];
  const item: Record<string, unknown> = { type: "Container" };
  if (Object.keys(requests).length) item.defaultRequest = requests;
  if (Object.keys(limits).length) item.default = limits;
  const limitRange = JSON.stringify({
    apiVersion: "v1",
    kind: "LimitRange",
    metadata: { name: "default-resources" },
    spec: { limits: [item] },
  });
  const tracks = tracked.filter(r => MUST_SPECIFY.has(r)).join(", ");
  return {
    rule: "quota-must-specify",
    message: `${demand.subject}: ${lines.join("; ")}, which ResourceQuota ${quota} tracks (${tracks}): the quota plugin refuses pods with a container that does not specify them ("must specify ${[...missing.keys()].join(", ")}")`,
    fix: `set ${fields.join(" and ")} on those containers; the lasting fix is namespace defaults an admin sets once with a LimitRange (example values, choose your own): kubectl apply -n ${demand.namespace} -f - <<< '${limitRange}'`,
  };
}

function exceededViolation(
  demand: QuotaDemand,
  quota: string,
  shortfalls: Shortfall[],
): RuleViolation {
  const { count } = demand;
  const lines = shortfalls.map(s => {
    const need = formatQuantity(s.need, s.perPod.format);
    let asks: string;
    if (demand.isPod)
      // A Pod's only update that asks more is an in-place resize: what it adds.
      asks = demand.old
        ? `the resize adds ${need} (the pod asked ${show(demand.old.usage.get(s.resource))})`
        : `pod asks ${need}`;
    else if (demand.old)
      asks = `the update adds ${need} (${count.pods} ${count.noun} × ${show(s.perPod)}, was ${demand.old.pods} × ${show(demand.old.usage.get(s.resource))})`;
    else
      asks = `${demand.subject.split(" ")[0]} asks ${need} (${count.pods} ${count.noun} × ${show(s.perPod)})`;
    if (!s.used)
      return `${s.resource}: ${asks}, more than quota ${quota} allows at all (hard ${show(s.hard)}; no usage recorded yet)`;
    const left = s.hard.milli - s.used.milli;
    return `${s.resource}: ${asks}, quota ${quota} has ${formatQuantity(left > 0n ? left : 0n, s.hard.format)} of ${show(s.hard)} left (${show(s.used)} used)`;
  });

  const fixes: string[] = [];
  const lower: string[] = [];
  const alreadyMine = (s: Shortfall) =>
    demand.old ? (demand.old.usage.get(s.resource)?.milli ?? 0n) * BigInt(demand.old.pods) : 0n;
  const room = (s: Shortfall) => s.hard.milli - (s.used?.milli ?? 0n) + alreadyMine(s);
  for (const s of shortfalls) {
    if (s.resource === "pods" || s.resource === "count/pods") continue;
    const { side, resource } = fieldOf(s.resource);
    const fit = roundDown(room(s) / BigInt(Math.max(count.pods, 1)), resource, s.perPod.format);
    if (!fit) continue;
    const who = contributions(demand.pod, side, resource);
    lower.push(`${side}.${resource} to at most ${show(fit)}${who ? ` (${who})` : ""}`);
  }
  if (lower.length)
    fixes.push(`lower ${demand.isPod ? "the pod's" : "each pod's"} ${lower.join(" and ")}`);
  if (!demand.isPod) {
    let most = count.pods;
    for (const s of shortfalls) {
      if (s.perPod.milli <= 0n) continue;
      const fits = room(s) / s.perPod.milli;
      if (fits < BigInt(most)) most = Number(fits > 0n ? fits : 0n);
    }
    if (most >= 1 && most < count.pods)
      fixes.push(`lower ${count.field} from ${count.pods} to at most ${most}`);
  }
  if (shortfalls.some(s => s.resource === "pods" || s.resource === "count/pods"))
    fixes.push(`delete pods namespace ${demand.namespace} no longer needs`);
  const hard: Record<string, string> = {};
  for (const s of shortfalls)
    hard[s.resource] = formatQuantity((s.used?.milli ?? 0n) + s.need, s.hard.format);
  fixes.push(
    `have an admin raise the quota${shortfalls.some(s => !s.used) ? " (to at least these values)" : ""}: kubectl patch resourcequota ${quota} -n ${demand.namespace} --type merge -p '${JSON.stringify({ spec: { hard } })}'`,
  );
  return {
    rule: "quota-exceeded",
    message: `${demand.subject} exceeds the namespace quota: ${lines.join("; ")}`,
    fix: fixes.join("; or "),
  };
}
