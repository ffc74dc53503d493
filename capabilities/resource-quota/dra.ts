// Devices claimed through Dynamic Resource Allocation, against ResourceQuotas (as the claim
// evaluator charges them) and the nodes' ResourceSlices. Pure.
// Why: docs/adr/0019-dra-counted-as-the-api-server-counts.md
import type { V1ResourceQuota } from "@kubernetes/client-node";
import type { ClusterView } from "../../lib/cluster/view";
import type { ClaimTemplateAsRead, DeviceAsk } from "../../lib/objects/dra";
import type { PodTemplateRef } from "../../lib/objects/pod";
import type { RuleViolation } from "../../lib/engine/policy";
import { isRecord } from "../../lib/objects/record";
import { formatNote } from "../../lib/objects/verdict";
import { byName, CAPABILITY, quotaName, quotaReading, type Findings } from "./quota";
import type { PodCount } from "./workload";

export const CLAIM_COUNT = "count/resourceclaims.resource.k8s.io";
export const PER_CLASS = ".deviceclass.resource.k8s.io/devices";
export const devicesOfClass = (deviceClassName: string) => `${deviceClassName}${PER_CLASS}`;

/** Whether the claim evaluator tracks a quota resource name (its MatchingResources). */
export const isClaimQuotaResource = (name: string): boolean =>
  name === CLAIM_COUNT || (name.endsWith(PER_CLASS) && name.length > PER_CLASS.length);

/** Claim entries of one pod read at most (the API server accepts far fewer). */
const MAX_POD_CLAIMS = 128;

/** One ResourceClaim each pod gets from a template. */
export interface TemplateClaim {
  templateName: string;
  /** "spec.template.spec.resourceClaims[0]". */
  field: string;
  template: ClaimTemplateAsRead;
}

/** What a pod's claims are charged, per pod. */
export interface PodClaims {
  claims: TemplateClaim[];
  /** Quota resource → count per pod. */
  usage: Map<string, number>;
  /** Quota resource → what asks it ("ResourceClaimTemplate two-gpus asks 2"). */
  parts: Map<string, string[]>;
  /** Templates not counted, with why. */
  unknown: string[];
}

/** The quota charge of one claim of this template (the claim evaluator's Usage). */
function claimUsage(template: ClaimTemplateAsRead): Map<string, number> {
  const usage = new Map<string, number>([[CLAIM_COUNT, 1]]);
  const add = (cls: string, n: number) =>
    usage.set(devicesOfClass(cls), (usage.get(devicesOfClass(cls)) ?? 0) + n);
  for (const r of template.requests) {
    if (r.exactly) add(r.exactly.deviceClassName, r.exactly.devices);
    else if (r.firstAvailable) {
      const most = new Map<string, number>();
      for (const a of r.firstAvailable)
        most.set(a.deviceClassName, Math.max(most.get(a.deviceClassName) ?? 0, a.devices));
      for (const [cls, n] of most) add(cls, n);
    }
  }
  return usage;
}

const describeAsk = (a: DeviceAsk) =>
  a.mode === "ExactCount"
    ? `${a.devices} of class ${a.deviceClassName}`
    : a.mode === "All"
      ? `All of class ${a.deviceClassName}, counted as ${a.devices}`
      : `class ${a.deviceClassName} in mode ${a.mode}, counted as 0`;

/** The claims a pod of this template gets from ResourceClaimTemplates, as the quota charges them. */
export function podClaims(
  template: PodTemplateRef,
  namespace: string,
  cluster: ClusterView,
): PodClaims {
  const out: PodClaims = { claims: [], usage: new Map(), parts: new Map(), unknown: [] };
  const entries = (template.spec as { resourceClaims?: unknown })?.resourceClaims;
  if (!Array.isArray(entries)) return out;
  const base = template.path ? `${template.path}.spec` : "spec";
  entries.slice(0, MAX_POD_CLAIMS).forEach((entry, i) => {
    if (!isRecord(entry) || typeof entry.resourceClaimTemplateName !== "string") return;
    const templateName = entry.resourceClaimTemplateName;
    const field = `${base}.resourceClaims[${i}]`;
    const found = cluster.resourceClaimTemplate?.(namespace, templateName);
    if (!found) {
      out.unknown.push(
        `ResourceClaimTemplate ${templateName} (${field}) ${
          found === null
            ? `does not exist in namespace ${namespace} (yet)`
            : cluster.source === "live"
              ? "is not known: the API server serves no resource.k8s.io, or the controller's cache has not synced"
              : "is not in the cluster snapshot (give check --cluster the output of kubectl get resourceclaimtemplates,deviceclasses,resourceslices -A -o yaml, or the template with the manifests)"
        }`,
      );
      return;
    }
    out.claims.push({ templateName, field, template: found });
    for (const [resource, n] of claimUsage(found)) {
      out.usage.set(resource, (out.usage.get(resource) ?? 0) + n);
      if (resource === CLAIM_COUNT) continue;
      const cls = resource.slice(0, -PER_CLASS.length);
      const asks = found.requests.flatMap(r =>
        r.exactly
          ? r.exactly.deviceClassName === cls
            ? [`request ${r.name}: ${describeAsk(r.exactly)}`]
            : []
          : (r.firstAvailable ?? []).some(a => a.deviceClassName === cls)
            ? [`request ${r.name}: firstAvailable, its largest alternative of class ${cls}: ${n}`]
            : [],
      );
      const list = out.parts.get(resource) ?? [];
      list.push(`ResourceClaimTemplate ${templateName} asks ${n} (${asks.join(", ")})`);
      out.parts.set(resource, list);
    }
    const count = out.parts.get(CLAIM_COUNT) ?? [];
    count.push(`ResourceClaimTemplate ${templateName}`);
    out.parts.set(CLAIM_COUNT, count);
  });
  return out;
}

/** The note for templates not counted (quota and node fit alike): said once per object. */
export function unknownTemplatesNote(subject: string, claims: PodClaims[]): string | undefined {
  const unknown = [...new Set(claims.flatMap(c => c.unknown))];
  if (!unknown.length) return undefined;
  return formatNote(
    CAPABILITY,
    `DRA devices not checked for ${subject} (quota, node fit): ${unknown.join("; ")}`,
  );
}

/** One group of alike pods: a Pod, a workload's replicas, a gang's role. */
export interface ClaimPart {
  /** The role's name (a gang), else undefined. */
  role?: string;
  claims: PodClaims;
  pods: number;
  /** The field that sets the pod count ("spec.replicas"), "" for a Pod. */
  field: string;
  noun: string;
}

export interface ClaimDemand {
  subject: string;
  namespace: string;
  isPod: boolean;
  /** A gang: its roles start together. */
  gang: boolean;
  parts: ClaimPart[];
  /** On UPDATE: the stored object's parts; only what the update adds is checked. */
  old?: ClaimPart[];
  /** Why Kueue holds it back (a gang): then a warning, not a denial. */
  queued?: string;
}

const hasScopes = (quota: V1ResourceQuota) => {
  const spec = isRecord(quota.spec) ? quota.spec : {};
  const selector = isRecord(spec.scopeSelector) ? spec.scopeSelector.matchExpressions : undefined;
  return (
    (Array.isArray(spec.scopes) && spec.scopes.length > 0) ||
    (Array.isArray(selector) && selector.length > 0)
  );
};

const totalOf = (parts: ClaimPart[], resource: string) =>
  parts.reduce((sum, p) => sum + (p.claims.usage.get(resource) ?? 0) * p.pods, 0);

/** The quota resources a quota tracks of claims, sorted as Kubernetes prints them. */
function trackedClaimResources(quota: V1ResourceQuota): string[] {
  return [...quotaReading(quota).hard.keys()].filter(isClaimQuotaResource).sort();
}

/** Checks every quota without scopes against the claims the pods get: violations and notes. */
export function checkClaimQuotas(quotas: V1ResourceQuota[], demand: ClaimDemand): Findings {
  const violations: RuleViolation[] = [];
  const warnings: string[] = [];
  if (!demand.parts.some(p => p.claims.claims.length && p.pods > 0))
    return { violations, warnings };
  for (const quota of byName(quotas)) {
    // The claim evaluator matches no scope (MatchesNoScopeFunc): a scoped quota never counts claims.
    if (hasScopes(quota)) continue;
    const tracked = trackedClaimResources(quota);
    if (!tracked.length) continue;
    const name = quotaName(quota);
    const { hard, used } = quotaReading(quota);
    const lines: string[] = [];
    const unknown: string[] = [];
    const raised: Record<string, string> = {};
    const lower = new Set<string>();
    let fewest: number | undefined;
    const biggest = [...demand.parts].sort((a, b) => b.pods - a.pods)[0];
    for (const resource of tracked) {
      const now = totalOf(demand.parts, resource);
      const before = demand.old ? totalOf(demand.old, resource) : 0;
      const need = now - before;
      if (need <= 0) continue;
      const limit = Number(hard.get(resource)!.milli / 1000n);
      const usedQ = used?.get(resource);
      const usedNow = usedQ ? Number(usedQ.milli / 1000n) : undefined;
      if (usedNow === undefined && need <= limit) {
        unknown.push(resource);
        continue;
      }
      if ((usedNow ?? 0) + need <= limit) continue;
      const asking = demand.parts.filter(p => p.pods > 0 && p.claims.usage.get(resource));
      const why = [...new Set(asking.flatMap(p => p.claims.parts.get(resource) ?? []))].join("; ");
      let asks: string;
      if (demand.isPod) asks = `pod asks ${need} (${why})`;
      else {
        const breakdown = asking
          .map(
            p =>
              `${p.role ? `${p.role}: ` : ""}${p.pods} ${p.role ? "×" : `${p.noun} ×`} ${p.claims.usage.get(resource)}`,
          )
          .join(", ");
        asks = demand.old
          ? `the update adds ${need} (now ${breakdown}; ${why})`
          : demand.gang
            ? `its pods ask ${need} at once (${breakdown}; ${why})`
            : `${demand.subject.split(" ")[0]} asks ${need} (${breakdown}; ${why})`;
      }
      const room = limit - (usedNow ?? 0);
      lines.push(
        usedNow === undefined
          ? `${resource}: ${asks}, more than quota ${name} allows at all (hard ${limit}; no usage recorded yet)`
          : `${resource}: ${asks}, quota ${name} has ${Math.max(room, 0)} of ${limit} left (${usedNow} used)`,
      );
      raised[resource] = String((usedNow ?? 0) + need);
      for (const p of asking)
        for (const c of p.claims.claims)
          if (resource === CLAIM_COUNT || claimUsageOf(c, resource))
            lower.add(
              resource === CLAIM_COUNT
                ? `give each pod fewer claims from templates (${c.field}), or have its pods share one existing ResourceClaim (resourceClaimName)`
                : `ask fewer devices of class ${resource.slice(0, -PER_CLASS.length)} in ResourceClaimTemplate ${c.templateName} (spec.spec.devices.requests[].count)`,
            );
      // The largest group shrunk until what it asks fits (the others as they are).
      const perPod = biggest?.claims.usage.get(resource) ?? 0;
      if (biggest && perPod > 0 && !demand.isPod) {
        const others = now - perPod * biggest.pods;
        const fits = Math.floor((room + before - others) / perPod);
        fewest = fewest === undefined ? fits : Math.min(fewest, fits);
      } else fewest = -1;
    }
    if (unknown.length)
      warnings.push(
        formatNote(
          CAPABILITY,
          `ResourceQuota ${name} has no usage recorded yet for ${unknown.join(", ")} (the quota controller has not counted it); checked against its hard limit only`,
        ),
      );
    if (!lines.length) continue;
    const fixes: string[] = [];
    if (biggest && fewest !== undefined && fewest >= (demand.gang ? 0 : 1) && fewest < biggest.pods)
      fixes.push(
        `lower ${biggest.field || `the ${biggest.role ?? ""} role's pods`} from ${biggest.pods} to at most ${fewest}`,
      );
    fixes.push(...lower);
    fixes.push(
      `have an admin raise the quota: kubectl patch resourcequota ${name} -n ${demand.namespace} --type merge -p '${JSON.stringify({ spec: { hard: raised } })}'`,
    );
    if (demand.gang && !demand.queued)
      fixes.push(
        "queue it with Kueue (label kueue.x-k8s.io/queue-name), which starts the whole job once there is room",
      );
    violations.push({
      rule: "quota-exceeded",
      message: `${demand.subject} exceeds the namespace quota with the ResourceClaims its pods get${demand.gang ? " as a whole (its pods start together)" : ""}: ${lines.join("; ")}${demand.queued ? `; ${demand.queued}: Kueue starts it when its ClusterQueue has room` : ""}`,
      fix: fixes.join("; or "),
      ...(demand.queued ? { severity: "warn" as const } : {}),
    });
  }
  return { violations, warnings };
}

const claimUsageOf = (c: TemplateClaim, resource: string) => claimUsage(c.template).get(resource);

/**
 * Whether one pod's claims can be allocated on a single node: per driver, the ExactCount devices
 * of every claim whose class is exactly that driver's, against the most any one node's
 * ResourceSlices offer. Judged against every node (a node the pod may not go to only makes it
 * more lenient), so it costs one lookup per driver whatever the cluster's size.
 */
export function checkClaimFit(subject: string, claims: PodClaims, cluster: ClusterView): Findings {
  const violations: RuleViolation[] = [];
  const warnings: string[] = [];
  if (!claims.claims.length) return { violations, warnings };
  const need = new Map<string, { devices: number; parts: string[]; templates: Set<string> }>();
  const notChecked = new Set<string>();
  for (const c of claims.claims) {
    for (const r of c.template.requests) {
      // All and firstAvailable take what there is: not judged here.
      const ask = r.exactly;
      if (!ask || ask.mode !== "ExactCount" || ask.devices <= 0) continue;
      const cls = cluster.deviceClass?.(ask.deviceClassName);
      if (!cls?.driver) {
        notChecked.add(
          cls === null
            ? `DeviceClass ${ask.deviceClassName} does not exist (yet)`
            : cls
              ? `DeviceClass ${ask.deviceClassName} selects devices by more than their driver (its CEL selectors are not evaluated here)`
              : `DeviceClass ${ask.deviceClassName} is not known`,
        );
        continue;
      }
      const n = need.get(cls.driver) ?? { devices: 0, parts: [], templates: new Set<string>() };
      n.devices += ask.devices;
      n.parts.push(
        `ResourceClaimTemplate ${c.templateName} request ${r.name}: ${ask.devices} of class ${ask.deviceClassName}`,
      );
      n.templates.add(c.templateName);
      need.set(cls.driver, n);
    }
  }
  const capacity = need.size ? cluster.deviceCapacity?.() : undefined;
  if (need.size && !capacity)
    notChecked.add(
      cluster.source === "live"
        ? "the controller's cache of ResourceSlices is not synced (or the API server serves no resource.k8s.io)"
        : "the cluster snapshot holds no ResourceSlice",
    );
  for (const [driver, n] of capacity ? need : []) {
    const offered = capacity!.get(driver);
    if (!offered || (!offered.nodes && !offered.shared)) {
      warnings.push(
        formatNote(
          CAPABILITY,
          `${subject}: no node publishes devices of DRA driver ${driver} in its ResourceSlices; its pods stay Pending until one does (${n.parts.join("; ")})`,
        ),
      );
      continue;
    }
    if (offered.shared) {
      notChecked.add(`driver ${driver} offers devices that several nodes reach (not node-local)`);
      continue;
    }
    if (n.devices <= offered.most) continue;
    violations.push({
      rule: "node-fit",
      message: `${subject} fits no node: each pod's ResourceClaims ask ${n.devices} devices of DRA driver ${driver} on one node (${n.parts.join("; ")}); the most any node's ResourceSlices offer is ${offered.most} (node ${offered.node}, ${offered.nodes} node${offered.nodes === 1 ? "" : "s"} with any)`,
      fix: `ask at most ${offered.most} devices of driver ${driver} per pod (ResourceClaimTemplate ${[...n.templates].join(", ")}: spec.spec.devices.requests[].count) and spread the work over more pods; or add nodes whose driver ${driver} publishes more devices; or, if an autoscaler adds larger nodes, set resourceQuota.nodeFit=false`,
    });
  }
  if (notChecked.size)
    warnings.push(
      formatNote(
        CAPABILITY,
        `node fit not checked for the DRA devices of ${subject}: ${[...notChecked].join("; ")}`,
      ),
    );
  return { violations, warnings };
}

/**
 * A Pod's or a workload's claims (policy.ts checkResources): against the quotas when given (not on
 * the report scan: a stored object is counted already), and node fit when asked.
 */
export function checkPodClaims(o: {
  subject: string;
  namespace: string;
  template: PodTemplateRef;
  cluster: ClusterView;
  isPod: boolean;
  count?: PodCount;
  /** On UPDATE: the stored template and its pods. */
  old?: { template: PodTemplateRef; pods: number };
  quotas?: V1ResourceQuota[];
  nodeFit: boolean;
}): Findings {
  const out: Findings = { violations: [], warnings: [] };
  const claims = podClaims(o.template, o.namespace, o.cluster);
  if (!claims.claims.length && !claims.unknown.length) return out;
  if (o.quotas && o.count) {
    const oldClaims = o.old && podClaims(o.old.template, o.namespace, o.cluster);
    const part = (c: PodClaims, pods: number): ClaimPart => ({
      claims: c,
      pods,
      field: o.count!.field,
      noun: o.count!.noun,
    });
    const note = unknownTemplatesNote(o.subject, [claims]);
    if (note) out.warnings.push(note);
    const q = checkClaimQuotas(o.quotas, {
      subject: o.subject,
      namespace: o.namespace,
      isPod: o.isPod,
      gang: false,
      parts: [part(claims, o.count.pods)],
      old: oldClaims && [part(oldClaims, o.old!.pods)],
    });
    out.violations.push(...q.violations);
    out.warnings.push(...q.warnings);
  }
  if (o.nodeFit) {
    const fit = checkClaimFit(o.subject, claims, o.cluster);
    out.violations.push(...fit.violations);
    out.warnings.push(...fit.warnings);
  }
  return out;
}

/** One role's pod against the nodes (policy.ts checkRole); the gang's quota says what is unknown. */
export function checkRoleClaimFit(
  subject: string,
  template: PodTemplateRef,
  namespace: string,
  cluster: ClusterView,
): Findings {
  return checkClaimFit(subject, podClaims(template, namespace, cluster), cluster);
}

/** A gang's roles: template, pods at once, the field that sets them. */
export interface ClaimRole {
  name: string;
  template: PodTemplateRef;
  pods: number;
  field: string;
}

/** The whole gang's claims against the quotas (policy.ts checkGang): every role × its pods. */
export function checkGangClaims(o: {
  subject: string;
  namespace: string;
  cluster: ClusterView;
  roles: ClaimRole[];
  old?: ClaimRole[];
  quotas: V1ResourceQuota[];
  queued?: string;
}): Findings {
  const parts = (roles: ClaimRole[]) =>
    roles.map(
      (r): ClaimPart => ({
        role: r.name,
        claims: podClaims(r.template, o.namespace, o.cluster),
        pods: r.pods,
        field: r.field,
        noun: "replicas",
      }),
    );
  const now = parts(o.roles);
  const out: Findings = { violations: [], warnings: [] };
  const note = unknownTemplatesNote(
    o.subject,
    now.map(p => p.claims),
  );
  if (note) out.warnings.push(note);
  const q = checkClaimQuotas(o.quotas, {
    subject: o.subject,
    namespace: o.namespace,
    isPod: false,
    gang: true,
    parts: now,
    old: o.old && parts(o.old),
    queued: o.queued,
  });
  out.violations.push(...q.violations);
  out.warnings.push(...q.warnings);
  return out;
}
