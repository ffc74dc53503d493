// The one UPDATE gate, as Pod Security Admission has one (isSignificantPodUpdate): whether an
// object is judged at all, and, on an UPDATE, the stored version every rule compares with. No rule
// reads the request's operation or old object; they read ctx.stored, made here once per request.
import { kindsInForce } from "../workload-kinds/in-force";
import { workloadTargets } from "./targets";
import type { WorkloadKindSpec } from "../workload-kinds/kind-spec";
import type { RuntimeSource } from "../workload-kinds/serving-runtimes";
import {
  containersChanged,
  contentChanged,
  isBeingDeleted,
  isPod,
  workloadSpecChanged,
  type KubeObject,
} from "../objects/pod";
import { isWorkload, podTemplateOf } from "../workload-kinds/built-in";
import type { Operation, PodTarget, RuleContext, StoredVersion } from "./policy";
import { isRecord } from "../objects/record";
import type { Settings } from "../settings";

/**
 * The stored version on an UPDATE whose old object is of the same kind; undefined on CREATE (and
 * for an UPDATE without one: judged as a CREATE). Its parts are worked out when first read.
 */
export function storedVersionOf(
  obj: KubeObject,
  operation: Operation,
  oldObject: KubeObject | undefined,
  settings: Settings,
  /** For a kind whose pods are built from the cluster view (an InferenceService's runtimes). */
  cluster?: RuntimeSource,
  namespace?: string,
): StoredVersion | undefined {
  if (operation !== "UPDATE" || !isRecord(oldObject) || !isRecord(obj)) return undefined;
  if (oldObject.kind !== obj.kind) return undefined;
  let targets: PodTarget[] | undefined;
  const stored: StoredVersion = {
    object: oldObject,
    get targets() {
      if (!targets) {
        // A copy: finding a template fills in a missing metadata, which the request's must not get.
        const object = structuredClone(oldObject);
        const template = isPod(object) ? podTemplateOf(object) : undefined;
        targets = template
          ? [{ object, template, isTemplate: false }]
          : workloadTargets(object, kindsInForce(settings.workloads), {}, cluster, namespace);
      }
      return targets;
    },
    templateAt: path => stored.targets.find(t => t.template.path === path)?.template,
    get addsEphemeralContainers() {
      const count = (o: KubeObject) =>
        isRecord(o.spec) && Array.isArray(o.spec.ephemeralContainers)
          ? o.spec.ephemeralContainers.length
          : 0;
      return isPod(obj) && count(obj) > count(oldObject);
    },
  };
  return stored;
}

/**
 * Kubernetes' own controllers (kube-controller-manager, as itself or as one of its kube-system
 * ServiceAccounts), and the users of settings workloads.controllerUsers ("x:*" is a prefix).
 */
export function isControllerUser(user: string, extra: readonly string[] = []): boolean {
  return (
    user === "system:kube-controller-manager" ||
    user.startsWith(KUBE_SYSTEM_SERVICE_ACCOUNT) ||
    extra.some(u => (u.endsWith("*") ? user.startsWith(u.slice(0, -1)) : user === u))
  );
}
const KUBE_SYSTEM_SERVICE_ACCOUNT = "system:serviceaccount:kube-system:";

/**
 * Whether a workload is a controller's copy of a template judged elsewhere (a Deployment's
 * ReplicaSet, a CronJob's Job). Whoever creates an object writes its ownerReferences, so
 * `controller: true` alone proves nothing (a pod author writes one to skip the checks): in a
 * request, the user must be one of Kubernetes' controllers; with no request user (`check`, the
 * reports' scan), the controller must be of a kind the module judges itself, whose template was
 * judged when it was applied.
 */
export function madeByController(
  obj: KubeObject,
  kinds: readonly WorkloadKindSpec[],
  user?: string,
  controllerUsers?: readonly string[],
): boolean {
  const owners = Array.isArray(obj.metadata?.ownerReferences) ? obj.metadata.ownerReferences : [];
  const owner = owners.find(o => o?.controller === true);
  if (!owner) return false;
  if (user !== undefined) return isControllerUser(user, controllerUsers);
  return isWorkload({ apiVersion: owner.apiVersion, kind: owner.kind }, kinds);
}

/**
 * Whether an object is judged at all, before any policy runs: the one gate for what makes no new
 * pod.
 * - A workload a controller made (madeByController: a Deployment's ReplicaSet, a CronJob's Job) is
 *   its owner's template: judged when the owner was applied, and its pods are judged one by one as
 *   they are created. Judging it again would stall a rollout in a namespace whose quota is full
 *   (the new ReplicaSet counted whole, where the rollout adds only its surge) or after a rule
 *   changed.
 * - A workload UPDATE that leaves its spec alone (labels, annotations, finalizers, status) makes
 *   no pod; a Pod UPDATE that leaves its containers alone changes nothing a rule judges. So an
 *   object being deleted has its finalizers removed unjudged, but a spec it changes meanwhile is
 *   judged as any other's: a deletionTimestamp is no pass (a finalizer holds the object).
 * - Any other object being deleted is judged only when more than its metadata changes.
 */
export function needsJudging(
  obj: KubeObject,
  ctx: Pick<RuleContext, "stored" | "user"> & { settings?: RuleContext["settings"] },
): boolean {
  const kinds = ctx.settings ? kindsInForce(ctx.settings.workloads) : [];
  const controllerUsers = ctx.settings?.workloads.controllerUsers;
  if (isWorkload(obj, kinds) && madeByController(obj, kinds, ctx.user, controllerUsers))
    return false;
  const old = ctx.stored?.object;
  if (!old) return true;
  if (isPod(obj)) return containersChanged(obj, old);
  if (isWorkload(obj, kinds)) return workloadSpecChanged(obj, old);
  if (isBeingDeleted(obj)) return contentChanged(obj, old);
  return true;
}
