// Which objects are gangs, and what each demands: its roles (alike ones merged), the pods of each
// that must run at once, and why. What the policy hands to checkGangCapacity (gang-capacity.ts).
// Pure. Why: docs/adr/0008-gang-capacity-never-a-false-denial.md
import type { V1PodSpec } from "@kubernetes/client-node";
import { isPod, type KubeObject, type PodTemplateRef } from "../../lib/objects/pod";
import type { PodTarget } from "../../lib/engine/policy";
import { isRecord } from "../../lib/objects/record";
import { groupOf } from "../../lib/workload-kinds/kind-spec";
import { podResources, type LimitRangeDefaults, type PodResources } from "./resources";

/** One role's share of the gang as the user wrote it: what a message names and a fix lowers. */
export interface GangPart {
  name: string;
  /** Pods of it the gang holds at most at once. */
  pods: number;
  /** Pods of it the gang needs at least (Volcano's task minAvailable); `pods` for a full gang. */
  min: number;
  /** The field that sets `pods` ("spec.pytorchReplicaSpecs.Worker.replicas"); "" when none. */
  field: string;
  /** The field's value is pods + offset (a LeaderWorkerSet's size counts its leader too). */
  offset?: number;
  /** The template's path: what an UPDATE compares with. */
  path: string;
}

/** Roles alike (the same template) are one role with several parts. */
export interface CapacityRole {
  spec: V1PodSpec;
  pod: PodResources;
  parts: GangPart[];
}

export interface CapacityDemand {
  /** "PyTorchJob ml/llama". */
  subject: string;
  roles: CapacityRole[];
  /** Pods that must run at once: all of them for a full gang, Volcano's spec.minAvailable. */
  needs: number;
  /** The field that sets `needs` when it is not the roles' sum ("spec.minAvailable"). */
  needsField?: string;
  /** Why these pods run at once, for the message ("its pods start together"). */
  why: string;
  /** Set when the finding is a warning only, and why. */
  warnOnly?: string;
}

export const sum = (xs: number[]) => xs.reduce((s, x) => s + x, 0);

const KUEUE_POD_GROUP = "kueue.x-k8s.io/pod-group-name";
const KUEUE_POD_GROUP_TOTAL = "kueue.x-k8s.io/pod-group-total-count";
/** Kinds whose pods need not start together: the ones Ray's operator runs (a head, and workers that join as placed). */
const NOT_ALL_AT_ONCE: Record<string, string> = {
  "RayCluster.ray.io": "a Ray cluster's workers join it as they are placed",
  "RayJob.ray.io": "a Ray cluster's workers join it as they are placed",
  "RayService.ray.io": "a Ray cluster's workers join it as they are placed",
};
/** Kinds that are no gang at all: a single pod, or serving replicas scaled one by one. */
const NO_GANG = new Set(["Notebook.kubeflow.org", "InferenceService.serving.kserve.io"]);
/** Whether the object's pods start together (a gang), as opposed to roles scaled one by one. */
export const isGangKind = (object: KubeObject): boolean => !NO_GANG.has(kindKey(object));
const KUBEFLOW_TRAINING = new Set(["PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "MPIJob"]);

const kindKey = (o: KubeObject) =>
  `${o.kind}.${typeof o.apiVersion === "string" ? groupOf(o.apiVersion) : ""}`;
const spec = (o: KubeObject): Record<string, unknown> => (isRecord(o.spec) ? o.spec : {});
const count = (v: unknown): number | undefined =>
  typeof v === "number" && Number.isSafeInteger(v) && v >= 0 ? v : undefined;

/** The roles of a multi-role object, alike ones merged; undefined when a role's quantities do not parse. */
function rolesOf(targets: readonly PodTarget[], defaults: LimitRangeDefaults) {
  const byTarget = new Map<PodTarget, CapacityRole>();
  const roles: CapacityRole[] = [];
  for (const t of targets) {
    if (!t.role) continue;
    const part: GangPart = {
      name: t.role.name,
      pods: t.role.pods,
      min: t.role.pods,
      field: t.role.field,
      path: t.template.path,
    };
    const same = t.sameAs && byTarget.get(t.sameAs);
    if (same) {
      same.parts.push(part);
      byTarget.set(t, same);
      continue;
    }
    const pod = podResources(t.template, defaults);
    if (pod.errors.length) return undefined;
    const role = { spec: t.template.spec, pod, parts: [part] };
    byTarget.set(t, role);
    roles.push(role);
  }
  return roles;
}

/** A multi-role workload (a PyTorchJob, a JobSet, ...) as a gang; undefined when it is none. */
export function gangOfRoles(
  object: KubeObject,
  targets: readonly PodTarget[],
  defaults: LimitRangeDefaults,
): Omit<CapacityDemand, "subject"> | undefined {
  const key = kindKey(object);
  if (NO_GANG.has(key)) return undefined;
  const roles = rolesOf(targets, defaults);
  if (!roles) return undefined;
  const all = sum(roles.flatMap(r => r.parts.map(p => p.pods)));
  const s = spec(object);
  if (key === "LeaderWorkerSet.leaderworkerset.x-k8s.io") {
    // Each group (a leader and size − 1 workers) starts whole; groups are placed one by one.
    const groups = count(s.replicas) ?? 1;
    if (!groups) return undefined;
    for (const r of roles)
      for (const p of r.parts) {
        p.pods = p.min = Math.floor(p.pods / groups);
        if (p.name === "worker" || p.name === "leader and worker") {
          p.field = "spec.leaderWorkerTemplate.size";
          p.offset = p.name === "worker" ? 1 : 0;
        } else p.field = "";
      }
    return {
      roles,
      needs: sum(roles.flatMap(r => r.parts.map(p => p.pods))),
      why: "the pods of each of its groups start together",
    };
  }
  if (key === "Job.batch.volcano.sh") {
    // Volcano starts the job once minAvailable of its pods can run (default: all); a task's own
    // minAvailable, when set, of that task (read by the task's index in the template's path).
    const tasks = Array.isArray(s.tasks) ? s.tasks : [];
    const minAvailable = count(s.minAvailable);
    for (const r of roles)
      for (const p of r.parts) {
        const i = Number(/^spec\.tasks\[(\d+)\]/.exec(p.path)?.[1]);
        const own = isRecord(tasks[i]) ? count(tasks[i].minAvailable) : undefined;
        p.min = minAvailable === undefined ? p.pods : Math.min(p.pods, own ?? 0);
      }
    const needs = minAvailable === undefined ? all : Math.min(minAvailable, all);
    return {
      roles,
      needs,
      ...(minAvailable === undefined ? {} : { needsField: "spec.minAvailable" }),
      why:
        minAvailable === undefined
          ? "Volcano starts its pods together"
          : `Volcano starts it once spec.minAvailable (${minAvailable}) of its pods can run together`,
    };
  }
  const loose = NOT_ALL_AT_ONCE[key];
  const elastic =
    KUBEFLOW_TRAINING.has(object.kind ?? "") &&
    key.endsWith(".kubeflow.org") &&
    isRecord(s.elasticPolicy)
      ? "it is elastic (spec.elasticPolicy): it may start with fewer workers"
      : undefined;
  return {
    roles,
    needs: all,
    why: loose ? "its pods are asked for together" : "its pods start together",
    ...(loose || elastic ? { warnOnly: loose ?? elastic } : {}),
  };
}

/**
 * A batch Job whose completions equal its parallelism (> 1) runs all its pods at once. They must
 * be placed together only when they work together: an Indexed Job whose pods reach each other by
 * hostname (spec.template.spec.subdomain), the pattern of distributed training on plain Jobs; any
 * other runs in waves if it must, so it is a warning.
 */
export function gangOfJob(object: KubeObject, template: PodTemplateRef, pod: PodResources) {
  if (object.kind !== "Job" || object.apiVersion !== "batch/v1") return undefined;
  const s = spec(object);
  const parallelism = count(s.parallelism) ?? 1;
  if (s.suspend === true || parallelism <= 1 || count(s.completions) !== parallelism)
    return undefined;
  const together = s.completionMode === "Indexed" && !!template.spec?.subdomain;
  return {
    roles: [
      {
        spec: template.spec,
        pod,
        parts: [
          { name: "pods", pods: parallelism, min: parallelism, field: "", path: template.path },
        ],
      },
    ],
    needs: parallelism,
    why: `its ${parallelism} pods run at once (completions = parallelism)`,
    ...(together
      ? {}
      : {
          warnOnly:
            "unless they must run together (an Indexed Job whose pods reach each other by spec.template.spec.subdomain), its pods run in waves",
        }),
  } satisfies Omit<CapacityDemand, "subject">;
}

/**
 * A Pod of a Kueue pod group (its pod-group-name label and total-count annotation): the group's
 * pods are created one by one and may differ, so what this pod shows is said as a warning, for a
 * group of pods all like it.
 */
export function gangOfKueuePod(object: KubeObject, template: PodTemplateRef, pod: PodResources) {
  if (!isPod(object)) return undefined;
  const group = object.metadata?.labels?.[KUEUE_POD_GROUP];
  const total = Number(object.metadata?.annotations?.[KUEUE_POD_GROUP_TOTAL]);
  if (typeof group !== "string" || !group || !Number.isSafeInteger(total) || total <= 1)
    return undefined;
  return {
    roles: [
      {
        spec: template.spec,
        pod,
        parts: [{ name: "pods", pods: total, min: total, field: "", path: template.path }],
      },
    ],
    needs: total,
    why: `Kueue pod group ${group} starts its ${total} pods together`,
    warnOnly: "judged as if every pod of the group asks what this one asks",
  } satisfies Omit<CapacityDemand, "subject">;
}

/** Whether an UPDATE's gang needs more than the stored one: more pods of a part, or pods that ask or go elsewhere. */
export function grows(
  now: Omit<CapacityDemand, "subject">,
  before: Omit<CapacityDemand, "subject"> | undefined,
): boolean {
  if (!before) return true;
  if (now.needs > before.needs) return true;
  const old = new Map<string, { pods: number; sign: string }>();
  for (const r of before.roles)
    for (const p of r.parts) old.set(p.path, { pods: p.pods, sign: signature(r) });
  return now.roles.some(r =>
    r.parts.some(p => {
      const o = old.get(p.path);
      return !o || p.pods > o.pods || o.sign !== signature(r);
    }),
  );
}

const signature = (r: CapacityRole) =>
  JSON.stringify([
    [...r.pod.requests].map(([k, q]) => `${k}=${q.milli}`).sort(),
    r.spec.nodeSelector ?? null,
    r.spec.affinity ?? null,
    r.spec.tolerations ?? null,
    r.spec.nodeName ?? null,
  ]);
