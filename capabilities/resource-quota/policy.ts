// The resource-quota policy (pure; index.ts is its Pepr capability): denies early, with the numbers, what the ResourceQuota plugin or the scheduler
// would refuse later — a Pod that exceeds the namespace quota or fits no node, and a workload whose
// pods would (Kubernetes checks quota only when each pod is created, so a Deployment that can never
// run is otherwise accepted and fails quietly in ReplicaSet events). The built-in ResourceQuota
// plugin stays the authority: quota can change between our check and storage.
//
// Cluster data comes through ctx.cluster (watched caches in the webhook, a snapshot for `check`).
// No data is not a violation: a check that cannot be made is skipped with a warning, unless
// settings.resourceQuota.onUnavailable is "deny". See docs/resource-quota.md.
import { kindsInForce } from "../../lib/workload-kinds/in-force";
import type { V1PodSpec } from "@kubernetes/client-node";
import {
  describeObject,
  isPod,
  resourcesChanged,
  type KubeObject,
  type PodTemplateRef,
} from "../../lib/objects/pod";
import { formatNote } from "../../lib/objects/verdict";
import {
  noFindings,
  type PodTarget,
  type PolicyRules,
  type RuleContext,
  type RuleFindings,
} from "../../lib/engine/policy";
import { isSuspended, workloadKindOf } from "../../lib/workload-kinds/roles";
import { checkGangClaims, checkPodClaims, checkRoleClaimFit } from "./dra";
import { checkGangQuotas, type GangRole } from "./gang";
import { defaultsOf, judgeGangCapacity } from "./gang-capacity";
import { gangOfJob, gangOfKueuePod, gangOfRoles, isGangKind } from "./gang-capacity-demand";
import { checkNodeFit } from "./node-fit";
import { CAPABILITY, checkQuotas, type QuotaDemand } from "./quota";
import {
  isBestEffort,
  limitRangeDefaults,
  podResources,
  quotaUsage,
  type LimitRangeDefaults,
  type PodResources,
} from "./resources";
import { podCount } from "./workload";

/** What decides how many pods a workload makes and what they ask: if equal before and after an UPDATE, it creates no new pods. */
function schedulingSignature(pod: PodResources, spec: V1PodSpec): string {
  const list = (l: Map<string, { milli: bigint }>) =>
    [...l]
      .map(([k, q]) => `${k}=${q.milli}`)
      .sort()
      .join(",");
  return JSON.stringify([
    pod.containers.map(c => [c.ref.path, list(c.requests), list(c.limits)]),
    list(pod.requests),
    list(pod.limits),
    spec.nodeSelector ?? null,
    spec.affinity ?? null,
    spec.tolerations ?? null,
    spec.priorityClassName ?? null,
    spec.activeDeadlineSeconds ?? null,
    (spec as { resourceClaims?: unknown }).resourceClaims ?? null,
  ]);
}

function unavailable(
  findings: RuleFindings,
  ctx: RuleContext,
  subject: string,
  what: "quota" | "node fit" | "whole-gang capacity",
  kinds: string,
): void {
  const detail =
    ctx.cluster.source === "live"
      ? `the controller's cache of ${kinds} has not synced yet (starting up, or the API server is unreachable)`
      : `the cluster snapshot holds no ${kinds} (give check --cluster the output of kubectl get resourcequota,limitrange -A -o yaml and kubectl get nodes -o yaml)`;
  if (ctx.settings.resourceQuota.onUnavailable === "deny") {
    findings.violations.push({
      rule: "cluster-data-unavailable",
      message: `${subject}: ${what} cannot be checked: ${detail}`,
      fix: `retry in a moment; if it persists, check that admission-guard may list and watch resourcequotas, limitranges and nodes (docs/resource-quota.md), or set resourceQuota.onUnavailable=allow`,
    });
  } else {
    findings.warnings.push(formatNote(CAPABILITY, `${what} not checked for ${subject}: ${detail}`));
  }
}

/** The stored object's pods on UPDATE, or undefined when it has none to compare with. */
function previous(ctx: RuleContext, now: PodTemplateRef, defaults: LimitRangeDefaults) {
  const template = ctx.stored?.templateAt(now.path);
  if (!ctx.stored || !template) return undefined;
  const pod = podResources(template, defaults);
  return { pod, spec: template.spec, pods: podCount(ctx.stored.object)?.pods ?? 0 };
}

const invalidQuantity = (subject: string, errors: string[]) => ({
  rule: "invalid-quantity",
  message: `${subject} has resource values that are not Kubernetes quantities: ${errors.join("; ")}`,
  fix: `write each value as a quantity, e.g. cpu "500m" or "2", memory "512Mi" or "8Gi"`,
});

function checkResources(
  object: KubeObject,
  template: PodTemplateRef,
  ctx: RuleContext,
): RuleFindings {
  const findings = noFindings();
  const settings = ctx.settings.resourceQuota;
  const subject = describeObject(object);
  const namespace = ctx.namespaceName;
  // LimitRanges unknown count as none: the live view reports quotas only once LimitRanges are synced too.
  const defaults = limitRangeDefaults(namespace ? ctx.cluster.limitRanges(namespace) : undefined);
  const pod = podResources(template, defaults);
  if (pod.errors.length) {
    findings.violations.push(invalidQuantity(subject, pod.errors));
    return findings;
  }
  const count = podCount(object);
  const old = previous(ctx, template, defaults);
  if (old) {
    // An UPDATE that neither adds pods nor changes what they ask or where they go creates no new pods.
    const same = schedulingSignature(pod, template.spec) === schedulingSignature(old.pod, old.spec);
    if (same && (count?.pods ?? 0) <= old.pods) return findings;
  }

  // A stored object (the report scan) is in the quota's usage already: counting it again would fail it.
  if (count && namespace && ctx.scan)
    findings.skipped = QUOTA_RULES.map(rule => ({
      rule,
      reason: "a stored object is counted in its namespace's quota usage already",
    }));
  if (count && namespace && !ctx.scan) {
    const quotas = ctx.cluster.resourceQuotas(namespace);
    if (!quotas) unavailable(findings, ctx, subject, "quota", "ResourceQuotas");
    else if (quotas.length) {
      const demand: QuotaDemand = {
        subject,
        namespace,
        isPod: isPod(object),
        spec: template.spec,
        pod,
        bestEffort: isBestEffort(pod, template.spec),
        count,
        old: old && { usage: quotaUsage(old.pod.requests, old.pod.limits), pods: old.pods },
      };
      const result = checkQuotas(quotas, demand);
      findings.violations.push(...result.violations);
      findings.warnings.push(...result.warnings);
    }
  }
  // A pod the scheduler placed fits its node; a stored workload's pods are judged as new ones.
  const placed = ctx.scan && isPod(object) && !!template.spec?.nodeName;
  if (placed || !settings.nodeFit)
    (findings.skipped ??= []).push({
      rule: "node-fit",
      reason: placed
        ? `placed by the scheduler on node ${template.spec!.nodeName}`
        : "resourceQuota.nodeFit is off",
    });
  if (settings.nodeFit && (count?.pods ?? 1) > 0 && !placed) {
    const nodes = ctx.cluster.nodes();
    if (!nodes) unavailable(findings, ctx, subject, "node fit", "Nodes");
    else {
      const result = checkNodeFit(nodes, {
        subject,
        spec: template.spec,
        pod,
        daemonSet: object.kind === "DaemonSet",
      });
      findings.violations.push(...result.violations);
      findings.warnings.push(...result.warnings);
    }
  }
  // Devices claimed through DRA (dra.ts): the claims its pods get, against quota and the nodes' slices.
  if (namespace) {
    const charged = !!count && !ctx.scan;
    const dra = checkPodClaims({
      subject,
      namespace,
      template,
      cluster: ctx.cluster,
      isPod: isPod(object),
      count,
      old: old && {
        template: { metadata: {}, spec: old.spec, path: template.path },
        pods: old.pods,
      },
      quotas: charged ? (ctx.cluster.resourceQuotas(namespace) ?? []) : undefined,
      nodeFit: settings.nodeFit && (count?.pods ?? 1) > 0 && !placed,
    });
    findings.violations.push(...dra.violations);
    findings.warnings.push(...dra.warnings);
  }
  return findings;
}

/**
 * One role of a gang (a PyTorchJob's Worker): its quantities and whether one of its pods fits a
 * node. Quota is the gang's, judged once by checkGang.
 */
function checkRole(object: KubeObject, target: PodTarget, ctx: RuleContext): RuleFindings {
  const findings = noFindings();
  const role = target.role!;
  const subject = `${describeObject(object)} (role ${role.name})`;
  const namespace = ctx.namespaceName;
  const defaults = limitRangeDefaults(namespace ? ctx.cluster.limitRanges(namespace) : undefined);
  const pod = podResources(target.template, defaults);
  if (pod.errors.length) {
    findings.violations.push(invalidQuantity(subject, pod.errors));
    return findings;
  }
  if (!ctx.settings.resourceQuota.nodeFit) {
    findings.skipped = [{ rule: "node-fit", reason: "resourceQuota.nodeFit is off" }];
    return findings;
  }
  if (role.pods === 0) return findings;
  const nodes = ctx.cluster.nodes();
  if (!nodes) unavailable(findings, ctx, subject, "node fit", "Nodes");
  else {
    const result = checkNodeFit(nodes, {
      subject,
      spec: target.template.spec,
      pod,
      daemonSet: false,
    });
    findings.violations.push(...result.violations);
    findings.warnings.push(...result.warnings);
  }
  if (namespace) {
    const dra = checkRoleClaimFit(subject, target.template, namespace, ctx.cluster);
    findings.violations.push(...dra.violations);
    findings.warnings.push(...dra.warnings);
  }
  return findings;
}

/** The roles as the quota sees them; undefined when a role's quantities do not parse (checkRole says so). */
function gangRoles(
  targets: readonly PodTarget[],
  defaults: LimitRangeDefaults,
): GangRole[] | undefined {
  const roles: GangRole[] = [];
  const parsed = new Map<PodTarget, ReturnType<typeof podResources>>();
  for (const t of targets) {
    if (!t.role) continue;
    // A role alike an earlier one (the same template) asks what that one asks.
    const pod = (t.sameAs && parsed.get(t.sameAs)) || podResources(t.template, defaults);
    parsed.set(t, pod);
    if (pod.errors.length) return undefined;
    roles.push({
      name: t.role.name,
      spec: t.template.spec,
      pod,
      bestEffort: isBestEffort(pod, t.template.spec),
      pods: t.role.pods,
      field: t.role.field,
      atMost: t.role.atMost,
    });
  }
  return roles;
}

/** Why Kueue holds the workload back, or undefined. */
function queuedBy(object: KubeObject, ctx: RuleContext): string | undefined {
  const queue = object.metadata?.labels?.[KUEUE_QUEUE_LABEL];
  if (queue) return `it is queued by Kueue (${KUEUE_QUEUE_LABEL}=${queue})`;
  const kind = workloadKindOf(object, kindsInForce(ctx.settings.workloads));
  if (kind && isSuspended(object, kind)) return `it is suspended (${kind.suspend}: true)`;
  return undefined;
}

const KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name";

/** The whole gang against the namespace quota: every role × its pods, at once. */
function checkGang(object: KubeObject, targets: PodTarget[], ctx: RuleContext): RuleFindings {
  const findings = noFindings();
  const namespace = ctx.namespaceName;
  if (!namespace) return findings;
  if (ctx.scan) {
    findings.skipped = QUOTA_RULES.map(rule => ({
      rule,
      reason: "a stored object is counted in its namespace's quota usage already",
    }));
    return findings;
  }
  const defaults = limitRangeDefaults(ctx.cluster.limitRanges(namespace));
  const roles = gangRoles(targets, defaults);
  if (!roles) return findings;
  const subject = describeObject(object);
  const quotas = ctx.cluster.resourceQuotas(namespace);
  // Devices claimed through DRA (dra.ts): every role's claims × its pods, at once.
  const claimRoles = (list: readonly PodTarget[]) =>
    list.flatMap(t =>
      t.role
        ? [{ name: t.role.name, template: t.template, pods: t.role.pods, field: t.role.field }]
        : [],
    );
  const dra = checkGangClaims({
    subject,
    namespace,
    cluster: ctx.cluster,
    roles: claimRoles(targets),
    old: ctx.stored && claimRoles(ctx.stored.targets),
    quotas: quotas ?? [],
    queued: queuedBy(object, ctx),
  });
  findings.violations.push(...dra.violations);
  findings.warnings.push(...dra.warnings);
  if (!quotas) {
    unavailable(findings, ctx, subject, "quota", "ResourceQuotas");
    return findings;
  }
  if (!quotas.length) return findings;
  const old = ctx.stored && gangRoles(ctx.stored.targets, defaults);
  const result = checkGangQuotas(quotas, {
    subject,
    namespace,
    roles,
    old,
    queued: queuedBy(object, ctx),
    startsTogether: isGangKind(object),
  });
  findings.violations.push(...result.violations);
  findings.warnings.push(...result.warnings);
  return findings;
}

/** The rules a quota decides; not evaluated on a stored object (the scan). */
const QUOTA_RULES = ["quota-exceeded", "quota-must-specify"];

export const resourceQuotaRules: PolicyRules = {
  name: CAPABILITY,
  switchedBy: "resourceQuota",
  rules: [
    "quota-exceeded",
    "quota-must-specify",
    "node-fit",
    "gang-capacity",
    "invalid-quantity",
    "cluster-data-unavailable",
  ],
  notWaivable: {
    "quota-exceeded": "the API server's ResourceQuota admission refuses the pod anyway",
    "quota-must-specify": "the API server's ResourceQuota admission refuses the pod anyway",
    "invalid-quantity": "the API server refuses a value that is not a quantity anyway",
  },
  description:
    "Denies early, with the numbers, pods and workloads that exceed the namespace quota or fit no node",
  check(object, target, ctx) {
    if (!target) return noFindings();
    // A Pod's count is fixed at creation and its resources change only by an in-place resize
    // (pods/resize): judged on what it adds to the quota, and against its own node's allocatable
    // (the kubelet never grants more: the resize stays Infeasible). Any other Pod update adds
    // nothing. A workload's update: what it adds. Why: docs/adr/0029-pod-resize-is-judged.md
    if (isPod(object) && ctx.stored && !resourcesChanged(object, ctx.stored.object))
      return noFindings();
    if (target.role) return checkRole(object, target, ctx);
    return withGangCapacity(checkResources(object, target.template, ctx), object, target, ctx);
  },
  checkGang(object, targets, ctx) {
    const findings = checkGang(object, targets, ctx);
    // The whole gang against the nodes (gang-capacity.ts), after each role's node fit.
    const defaults = defaultsOf(ctx);
    const stored = ctx.stored;
    const capacity = judgeGangCapacity(
      object,
      gangOfRoles(object, targets, defaults),
      () => stored && gangOfRoles(stored.object, stored.targets, defaults),
      ctx,
      (f, subject) => unavailable(f, ctx, subject, "whole-gang capacity", "Nodes"),
      queuedBy(object, ctx),
    );
    return mergeInto(findings, capacity);
  },
};

function mergeInto(findings: RuleFindings, more: RuleFindings): RuleFindings {
  findings.violations.push(...more.violations);
  findings.warnings.push(...more.warnings);
  if (more.skipped?.length) (findings.skipped ??= []).push(...more.skipped);
  return findings;
}

/**
 * A batch Job whose pods run at once (completions = parallelism), or a Pod of a Kueue pod group,
 * against the nodes as a whole (gang-capacity.ts); nothing for any other single-template object.
 */
function withGangCapacity(
  findings: RuleFindings,
  object: KubeObject,
  target: PodTarget,
  ctx: RuleContext,
): RuleFindings {
  if (findings.violations.some(v => v.rule === "invalid-quantity" || v.rule === "node-fit"))
    return findings;
  const gangOf = isPod(object) ? (ctx.scan ? undefined : gangOfKueuePod) : gangOfJob;
  if (!gangOf) return findings;
  const defaults = defaultsOf(ctx);
  const shape = (o: KubeObject, t: PodTemplateRef | undefined) => {
    if (!t) return undefined;
    const pod = podResources(t, defaults);
    return pod.errors.length ? undefined : gangOf(o, t, pod);
  };
  const stored = ctx.stored;
  const capacity = judgeGangCapacity(
    object,
    shape(object, target.template),
    () => stored && shape(stored.object, stored.templateAt(target.template.path)),
    ctx,
    (f, subject) => unavailable(f, ctx, subject, "whole-gang capacity", "Nodes"),
    queuedBy(object, ctx),
  );
  return mergeInto(findings, capacity);
}
