// A gang (a distributed training job, a Ray cluster) against the namespace's ResourceQuotas: every
// role × its pods at once. The quota plugin judges each pod as the operator creates it, so a gang
// that does not fit gets some of its pods and waits forever for the rest, holding GPUs; judged
// whole, it is refused at apply with the per-role totals. Pure.
import type { V1PodSpec, V1ResourceQuota } from "@kubernetes/client-node";
import { formatQuantity, type Quantity } from "../../lib/objects/quantity";
import type { RuleViolation } from "../../lib/engine/policy";
import { formatNote } from "../../lib/objects/verdict";
import { fieldOf, show } from "./explain";
import {
  byName,
  CAPABILITY,
  mustSpecify,
  mustSpecifyViolation,
  quotaMatches,
  quotaName,
  quotaReading,
  type Findings,
} from "./quota";
import { quotaUsage, type PodResources } from "./resources";

/** One role of the gang, as the quota sees it. */
export interface GangRole {
  name: string;
  spec: V1PodSpec;
  pod: PodResources;
  bestEffort: boolean;
  /** Pods at once. */
  pods: number;
  /** The field(s) that set it ("spec.pytorchReplicaSpecs.Worker.replicas"). */
  field: string;
  /** The most it may grow to (an autoscaled group). */
  atMost?: number;
}

export interface GangDemand {
  /** "PyTorchJob ml/llama". */
  subject: string;
  namespace: string;
  roles: GangRole[];
  /** On UPDATE: the stored object's roles; only what the update adds is checked. */
  old?: GangRole[];
  /**
   * Queued by Kueue (its queue-name label, or suspended): Kueue admits it when its ClusterQueue has
   * room, so a quota it does not fit is a warning, not a denial.
   */
  queued?: string;
  /**
   * false for roles created together but scaled apart (an InferenceService's components): the
   * quota is still asked for all of them at apply, but they are no gang to queue whole.
   */
  startsTogether?: boolean;
}

// What one pod of a role counts against quotas, computed once per role (read per quota and resource).
const usage = new WeakMap<GangRole, ReturnType<typeof quotaUsage>>();
function usageOf(role: GangRole) {
  let u = usage.get(role);
  if (!u) usage.set(role, (u = quotaUsage(role.pod.requests, role.pod.limits)));
  return u;
}

/** What the roles that a quota matches ask of one resource together. */
function total(
  roles: GangRole[],
  quota: V1ResourceQuota,
  resource: string,
  count = (r: GangRole) => r.pods,
) {
  let milli = 0n;
  let format: Quantity["format"] = "DecimalSI";
  const parts: { role: GangRole; perPod: Quantity }[] = [];
  for (const role of roles) {
    if (!quotaMatches(quota, role.spec, role.bestEffort)) continue;
    const perPod = usageOf(role).get(resource);
    if (!perPod || perPod.milli === 0n) continue; // a role that asks none is not in the breakdown
    format = perPod.format;
    milli += perPod.milli * BigInt(count(role));
    parts.push({ role, perPod });
  }
  return { milli, format, parts };
}

/** Checks every quota against the gang's totals: violations (one per quota) and notes. */
export function checkGangQuotas(quotas: V1ResourceQuota[], demand: GangDemand): Findings {
  const violations: RuleViolation[] = [];
  const warnings: string[] = [];
  for (const quota of byName(quotas)) {
    const name = quotaName(quota);
    const { hard, used, tracked } = quotaReading(quota);
    if (!tracked.length) continue;
    // Each role's containers must specify what the quota tracks, as for any pod.
    for (const role of demand.roles) {
      if (!role.pods || !quotaMatches(quota, role.spec, role.bestEffort)) continue;
      const roleDemand = {
        subject: `${demand.subject} (role ${role.name})`,
        namespace: demand.namespace,
        isPod: false,
        spec: role.spec,
        pod: role.pod,
        bestEffort: role.bestEffort,
        count: { pods: role.pods, field: role.field, noun: "replicas" },
      };
      const missing = mustSpecify(roleDemand, tracked);
      if (missing) violations.push(mustSpecifyViolation(roleDemand, name, tracked, missing));
    }
    const lines: string[] = [];
    const growth: string[] = [];
    const raised: Record<string, string> = {};
    const fixes: string[] = [];
    const biggest = [...demand.roles].sort((a, b) => b.pods - a.pods)[0];
    // The fewest pods of the largest role that fit every resource short; none when lowering it
    // frees nothing of one of them.
    let fewest: bigint | undefined;
    let shrinking = true;
    for (const resource of tracked) {
      const now = total(demand.roles, quota, resource);
      const before = demand.old ? total(demand.old, quota, resource).milli : 0n;
      const need = now.milli - before;
      const limit = hard.get(resource)!;
      const usedNow = used?.get(resource)?.milli ?? 0n;
      const room = limit.milli - usedNow;
      const breakdown = now.parts
        .map(p => `${p.role.name}: ${p.role.pods} × ${show(p.perPod)}`)
        .join(", ");
      const atMost = total(demand.roles, quota, resource, r => r.atMost ?? r.pods);
      if (atMost.milli - before > room && atMost.milli > now.milli)
        growth.push(
          `${resource} up to ${formatQuantity(atMost.milli, atMost.format)} at maxReplicas, ${formatQuantity(room > 0n ? room : 0n, limit.format)} left`,
        );
      if (need <= 0n || need <= room) continue;
      const asks = demand.old
        ? `the update adds ${formatQuantity(need, now.format)} (now ${breakdown})`
        : `its pods ask ${formatQuantity(now.milli, now.format)} at once (${breakdown})`;
      lines.push(
        `${resource}: ${asks}, quota ${name} has ${formatQuantity(room > 0n ? room : 0n, limit.format)} of ${show(limit)} left (${formatQuantity(usedNow, limit.format)} used)`,
      );
      raised[resource] = formatQuantity(usedNow + need, limit.format);
      // The role with the most pods, shrunk until the gang fits (the others as they are).
      const part = now.parts.find(p => p.role === biggest);
      if (!part || part.perPod.milli <= 0n) {
        shrinking = false;
        continue;
      }
      const others = now.milli - part.perPod.milli * BigInt(biggest!.pods);
      const fits = (room + before - others) / part.perPod.milli;
      fewest = fewest === undefined || fits < fewest ? fits : fewest;
    }
    if (
      shrinking &&
      biggest &&
      fewest !== undefined &&
      fewest >= 0n &&
      fewest < BigInt(biggest.pods)
    )
      fixes.push(
        `lower ${biggest.field || `the ${biggest.name} role's pods`} from ${biggest.pods} to at most ${fewest}`,
      );
    if (growth.length)
      warnings.push(
        formatNote(
          CAPABILITY,
          `${demand.subject} can outgrow quota ${name} when it scales: ${growth.join("; ")}`,
        ),
      );
    if (!lines.length) continue;
    const asked = Object.keys(raised).filter(r => r !== "pods" && r !== "count/pods");
    if (asked.length)
      fixes.push(
        `lower each role's ${asked.map(r => `${fieldOf(r).side}.${fieldOf(r).resource}`).join(", ")}`,
      );
    fixes.push(
      `have an admin raise the quota: kubectl patch resourcequota ${name} -n ${demand.namespace} --type merge -p '${JSON.stringify({ spec: { hard: raised } })}'`,
    );
    const together = demand.startsTogether !== false;
    if (!demand.queued && together)
      fixes.push(
        "queue it with Kueue (label kueue.x-k8s.io/queue-name), which starts the whole job once there is room",
      );
    violations.push({
      rule: "quota-exceeded",
      message: `${demand.subject} exceeds the namespace quota as a whole (${together ? "its pods start together" : "its components' pods are created when it is applied"}): ${lines.join("; ")}${demand.queued ? `; ${demand.queued}: Kueue starts it when its ClusterQueue has room` : ""}`,
      fix: fixes.join("; or "),
      ...(demand.queued ? { severity: "warn" as const } : {}),
    });
  }
  return { violations, warnings };
}
