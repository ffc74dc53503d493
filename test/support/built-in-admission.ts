// The kube-apiserver's own admission plugins that act on a Pod CREATE around a mutating webhook
// and touch the fields the module's fixes touch, as pure functions over a pod and the cluster
// objects they read. Test machinery (the e2e `admit` and the stand-in's POST of a Pod use it); the
// module never needs it. Modelled on kube-apiserver 1.32 (facts from its sources and docs):
//
// In the API server's order (mutating half; validating half):
// - LimitRanger: a LimitRange's Container `default`/`defaultRequest` into the requests and limits a
//   container leaves unset, noted in the annotation kubernetes.io/limit-ranger; refuses requests
//   and limits outside the item's min/max.
// - ServiceAccount: serviceAccountName "default" when empty; the kube-api-access-xxxxx token volume
//   and its mount in every container (unless automount is off on the pod, else on the account);
//   the account's imagePullSecrets when the pod has none; refuses a missing account (in both).
// - Priority: priority and preemptionPolicy from priorityClassName, else from the globalDefault
//   class (the lowest value), else 0; refuses an unknown class and a priority or preemptionPolicy
//   that disagrees with the class.
// - DefaultTolerationSeconds: the not-ready/unreachable NoExecute tolerations, 300 s, unless
//   tolerated already.
//
// Around the webhooks: every mutating plugin runs before the mutating webhooks; when a webhook's
// patch changes the object, the API server runs them all AGAIN ("built-in mutating admission
// plugins are re-run if a mutating webhook modifies an object"; our webhook itself has
// reinvocationPolicy Never, so it is not called again). Then the validating plugins run, before
// the validating webhooks (PodSecurity among them, not modelled here; ResourceQuota after them).
// The first refusal ends the request.
//
// Only Pod CREATE: LimitRanger leaves pod updates alone; a pod template (Deployment, Job, ...) gets
// none of this: the plugins act on the pods its controller creates, not on the template.
// Not modelled: LimitRange `Pod`/`PersistentVolumeClaim` items and maxLimitRequestRatio, the
// system-class namespace rules, mirror pods, ServiceAccount mountable-secrets enforcement.
import { randomBytes } from "node:crypto";
import type { V1LimitRange } from "@kubernetes/client-node";
import { limitRangeDefaults, parseList } from "../../capabilities/resource-quota/resources";
import type { KubeObject } from "../../lib/objects/pod";
import { compareQuantities, formatQuantity } from "../../lib/objects/quantity";
import { isRecord } from "../../lib/objects/record";

type Json = Record<string, unknown>;
const asList = (x: unknown): Json[] => (Array.isArray(x) ? (x as Json[]) : []);
const specOf = (pod: KubeObject): Json => (pod.spec ??= {}) as Json;
/** Regular and init containers: what LimitRanger and the token mount act on. */
const containersOf = (pod: KubeObject): [string, Json][] => [
  ...asList(specOf(pod).initContainers).map(c => ["init container", c] as [string, Json]),
  ...asList(specOf(pod).containers).map(c => ["container", c] as [string, Json]),
];

/** What the plugins read from the cluster. */
export interface BuiltInCluster {
  /** The ServiceAccount, or undefined when the API server holds none. */
  serviceAccount(namespace: string, name: string): KubeObject | undefined;
  priorityClasses(): KubeObject[];
  limitRanges(namespace: string): KubeObject[];
}

export interface BuiltInContext {
  namespace: string;
  cluster: BuiltInCluster;
  /** The token volume's name when the pod has none (default kube-api-access-<5 random>). */
  tokenVolumeName?: () => string;
}

/** The PriorityClasses every API server creates at start (scheduling's bootstrap classes). */
export const SYSTEM_PRIORITY_CLASSES: KubeObject[] = [
  ["system-node-critical", 2_000_001_000],
  ["system-cluster-critical", 2_000_000_000],
].map(([name, value]) => ({
  apiVersion: "scheduling.k8s.io/v1",
  kind: "PriorityClass",
  metadata: { name: name as string },
  value,
  preemptionPolicy: "PreemptLowerPriority",
}));

/**
 * A cluster read through `get`/`list` (the stand-in, or `objectsCluster`). The `default` account
 * exists in every namespace (the controller manager makes it; the stand-in has no controller
 * manager), so only other missing accounts are refused.
 */
export function builtInCluster(source: {
  get(kind: string, name: string, namespace?: string): KubeObject | undefined;
  list(kind: string, namespace?: string): KubeObject[];
}): BuiltInCluster {
  return {
    serviceAccount: (namespace, name) =>
      source.get("ServiceAccount", name, namespace) ??
      (name === "default"
        ? { apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace } }
        : undefined),
    priorityClasses: () => [...SYSTEM_PRIORITY_CLASSES, ...source.list("PriorityClass")],
    limitRanges: namespace => source.list("LimitRange", namespace),
  };
}

/** A cluster of the given objects. */
export function objectsCluster(objects: KubeObject[]): BuiltInCluster {
  const matches = (o: KubeObject, kind: string, namespace?: string) =>
    o.kind === kind && (namespace === undefined || o.metadata?.namespace === namespace);
  return builtInCluster({
    get: (kind, name, namespace) =>
      objects.find(o => matches(o, kind, namespace) && o.metadata?.name === name),
    list: (kind, namespace) => objects.filter(o => matches(o, kind, namespace)),
  });
}

/**
 * No cluster known: every account exists (with no opinion on automount, no pull secrets), no
 * PriorityClass but the system ones, no LimitRange. What `admit` assumes without a stand-in.
 */
export const OPEN_CLUSTER: BuiltInCluster = {
  serviceAccount: (namespace, name) => ({
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: { name, namespace },
  }),
  priorityClasses: () => SYSTEM_PRIORITY_CLASSES,
  limitRanges: () => [],
};

/** The API server's Forbidden message for a pod: `pods "<name>" is forbidden: <reason>`. */
export const forbidden = (pod: KubeObject, reason: string) =>
  `pods "${pod.metadata?.name ?? ""}" is forbidden: ${reason}`;

// ---- LimitRanger ----------------------------------------------------------------------------

export const LIMIT_RANGER_ANNOTATION = "kubernetes.io/limit-ranger";

/** LimitRanger's mutating half: the namespace's Container defaults into what a container leaves unset. */
export function limitRangerAdmit(pod: KubeObject, ctx: BuiltInContext): string | undefined {
  const ranges = ctx.cluster.limitRanges(ctx.namespace);
  if (!ranges.length) return undefined;
  // The module's own reading of LimitRanges (item defaulting, first range to default wins).
  const defaults = limitRangeDefaults(ranges as V1LimitRange[]);
  const notes: string[] = [];
  // Containers first, then init containers: the order of the annotation's notes.
  const [init, regular] = [asList(specOf(pod).initContainers), asList(specOf(pod).containers)];
  const containers = [
    ...regular.map(c => ["container", c] as const),
    ...init.map(c => ["init container", c] as const),
  ];
  for (const [what, c] of containers) {
    const resources = (c.resources ??= {}) as { limits?: Json; requests?: Json };
    for (const [field, from] of [
      ["request", defaults.requests],
      ["limit", defaults.limits],
    ] as const) {
      const list = field === "request" ? (resources.requests ??= {}) : (resources.limits ??= {});
      const set = [...from].filter(([k]) => list[k] === undefined).map(([k]) => k);
      for (const k of set) list[k] = formatQuantity(from.get(k)!);
      if (set.length) notes.push(`${set.sort().join(", ")} ${field} for ${what} ${c.name}`);
    }
  }
  if (notes.length)
    (pod.metadata ??= {}).annotations = {
      ...(pod.metadata.annotations ?? {}),
      [LIMIT_RANGER_ANNOTATION]: `LimitRanger plugin set: ${notes.join("; ")}`,
    };
  return undefined;
}

/** LimitRanger's validating half: each container's requests and limits within a Container item's min and max. */
export function limitRangerValidate(pod: KubeObject, ctx: BuiltInContext): string | undefined {
  const errors: string[] = [];
  for (const range of ctx.cluster.limitRanges(ctx.namespace)) {
    const items = asList((range.spec as Json | undefined)?.limits);
    for (const item of items.filter(i => i.type === "Container")) {
      const min = parseList(item.min);
      const max = parseList(item.max);
      for (const [, c] of containersOf(pod)) {
        const resources = (c.resources ?? {}) as { limits?: Json; requests?: Json };
        const requests = parseList(resources.requests);
        const limits = parseList(resources.limits);
        for (const [name, bound] of [...min].sort(([a], [b]) => a.localeCompare(b))) {
          const [req, lim, b] = [requests.get(name), limits.get(name), formatQuantity(bound)];
          if (!req)
            errors.push(`minimum ${name} usage per Container is ${b}.  No request is specified`);
          else if (compareQuantities(req, bound) < 0)
            errors.push(
              `minimum ${name} usage per Container is ${b}, but request is ${formatQuantity(req)}`,
            );
          else if (lim && compareQuantities(lim, bound) < 0)
            errors.push(
              `minimum ${name} usage per Container is ${b}, but limit is ${formatQuantity(lim)}`,
            );
        }
        for (const [name, bound] of [...max].sort(([a], [b]) => a.localeCompare(b))) {
          const [req, lim, b] = [requests.get(name), limits.get(name), formatQuantity(bound)];
          if (!lim)
            errors.push(`maximum ${name} usage per Container is ${b}.  No limit is specified`);
          else if (compareQuantities(lim, bound) > 0)
            errors.push(
              `maximum ${name} usage per Container is ${b}, but limit is ${formatQuantity(lim)}`,
            );
          else if (req && compareQuantities(req, bound) > 0)
            errors.push(
              `maximum ${name} usage per Container is ${b}, but request is ${formatQuantity(req)}`,
            );
        }
      }
    }
  }
  // Kubernetes' error aggregate: one error as itself, several as "[a, b]".
  if (!errors.length) return undefined;
  return forbidden(pod, errors.length === 1 ? errors[0] : `[${errors.join(", ")}]`);
}

// ---- ServiceAccount -------------------------------------------------------------------------

export const SERVICE_ACCOUNT_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount";
export const TOKEN_VOLUME_PREFIX = "kube-api-access-";

/** The ServiceAccount plugin's refusal of a pod whose account the API server does not hold. */
export const serviceAccountNotFound = (pod: string, namespace: string, account: string) =>
  `pods "${pod}" is forbidden: error looking up service account ${namespace}/${account}: serviceaccount "${account}" not found`;

function lookUpAccount(pod: KubeObject, ctx: BuiltInContext) {
  const name = String(specOf(pod).serviceAccountName ?? "");
  const account = ctx.cluster.serviceAccount(ctx.namespace, name);
  const refusal = account
    ? undefined
    : serviceAccountNotFound(pod.metadata?.name ?? "", ctx.namespace, name);
  return { account, refusal };
}

function tokenVolume(name: string): Json {
  return {
    name,
    projected: {
      defaultMode: 420,
      sources: [
        { serviceAccountToken: { expirationSeconds: 3607, path: "token" } },
        { configMap: { name: "kube-root-ca.crt", items: [{ key: "ca.crt", path: "ca.crt" }] } },
        {
          downwardAPI: {
            items: [
              {
                path: "namespace",
                fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" },
              },
            ],
          },
        },
      ],
    },
  };
}

/** The ServiceAccount plugin's mutating half (its refusal of a missing account included). */
export function serviceAccountAdmit(pod: KubeObject, ctx: BuiltInContext): string | undefined {
  const spec = specOf(pod);
  if (!spec.serviceAccountName) spec.serviceAccountName = spec.serviceAccount || "default";
  // v1's deprecated alias, which the API server writes back from serviceAccountName.
  spec.serviceAccount = spec.serviceAccountName;
  const { account, refusal } = lookUpAccount(pod, ctx);
  if (!account) return refusal;
  const automount =
    typeof spec.automountServiceAccountToken === "boolean"
      ? spec.automountServiceAccountToken
      : account.automountServiceAccountToken !== false;
  if (automount) {
    const volumes = asList(spec.volumes);
    // A kube-api-access- volume already there (ours from the first pass) is reused, not added again.
    const existing = volumes.find(v => String(v.name ?? "").startsWith(TOKEN_VOLUME_PREFIX));
    const name =
      (existing?.name as string | undefined) ??
      ctx.tokenVolumeName?.() ??
      `${TOKEN_VOLUME_PREFIX}${randomBytes(4).toString("hex").slice(0, 5)}`;
    let needed = false;
    for (const [, c] of containersOf(pod)) {
      const mounts = (c.volumeMounts ??= []) as Json[];
      // Anything mounted at the token's path already keeps the token out of that container.
      if (mounts.some(m => m.mountPath === SERVICE_ACCOUNT_MOUNT_PATH)) continue;
      mounts.push({ name, readOnly: true, mountPath: SERVICE_ACCOUNT_MOUNT_PATH });
      needed = true;
    }
    if (!existing && needed) spec.volumes = [...volumes, tokenVolume(name)];
  }
  const pullSecrets = asList(account.imagePullSecrets);
  if (!asList(spec.imagePullSecrets).length && pullSecrets.length)
    spec.imagePullSecrets = pullSecrets.map(s => ({ name: s.name }));
  return undefined;
}

/** The ServiceAccount plugin's validating half: the account still exists. */
export const serviceAccountValidate = (pod: KubeObject, ctx: BuiltInContext) =>
  lookUpAccount(pod, ctx).refusal;

// ---- Priority -------------------------------------------------------------------------------

/** The Priority plugin (on CREATE): priority and preemptionPolicy resolved from the class. */
export function priorityAdmit(pod: KubeObject, ctx: BuiltInContext): string | undefined {
  const spec = specOf(pod);
  const classes = ctx.cluster.priorityClasses();
  let value = 0;
  // A class's preemptionPolicy defaults to PreemptLowerPriority when it is stored.
  let preemption = "PreemptLowerPriority";
  if (!spec.priorityClassName) {
    // The globalDefault class with the lowest value, if any.
    const [global] = classes
      .filter(c => c.globalDefault === true)
      .sort((a, b) => Number(a.value) - Number(b.value));
    if (global) {
      spec.priorityClassName = global.metadata?.name;
      value = Number(global.value ?? 0);
      preemption = String(global.preemptionPolicy ?? preemption);
    }
  } else {
    const found = classes.find(c => c.metadata?.name === spec.priorityClassName);
    if (!found)
      return forbidden(pod, `no PriorityClass with name ${spec.priorityClassName} was found`);
    value = Number(found.value ?? 0);
    preemption = String(found.preemptionPolicy ?? preemption);
  }
  if (spec.priority !== undefined && spec.priority !== null && spec.priority !== value)
    return forbidden(
      pod,
      `the integer value of priority (${spec.priority}) must not be provided in pod spec; priority admission controller computed ${value} from the given PriorityClass name`,
    );
  spec.priority = value;
  if (spec.preemptionPolicy !== undefined && spec.preemptionPolicy !== preemption)
    return forbidden(
      pod,
      `the string value of PreemptionPolicy (${spec.preemptionPolicy}) must not be provided in pod spec; priority admission controller computed ${preemption} from the given PriorityClass name`,
    );
  spec.preemptionPolicy = preemption;
  return undefined;
}

// ---- DefaultTolerationSeconds ---------------------------------------------------------------

export const DEFAULT_TOLERATION_SECONDS = 300;
const NOT_READY = "node.kubernetes.io/not-ready";
const UNREACHABLE = "node.kubernetes.io/unreachable";

/** DefaultTolerationSeconds: 300 s of the not-ready and unreachable NoExecute taints, unless tolerated. */
export function defaultTolerationSecondsAdmit(pod: KubeObject): string | undefined {
  const spec = specOf(pod);
  const tolerations = asList(spec.tolerations);
  // An empty key tolerates every taint, an empty effect every effect.
  const tolerates = (key: string) =>
    tolerations.some(t => (!t.key || t.key === key) && (!t.effect || t.effect === "NoExecute"));
  const added = [NOT_READY, UNREACHABLE]
    .filter(key => !tolerates(key))
    .map(key => ({
      key,
      operator: "Exists",
      effect: "NoExecute",
      tolerationSeconds: DEFAULT_TOLERATION_SECONDS,
    }));
  if (added.length) spec.tolerations = [...tolerations, ...added];
  return undefined;
}

// ---- The chain ------------------------------------------------------------------------------

type Plugin = (pod: KubeObject, ctx: BuiltInContext) => string | undefined;

/** The mutating plugins, in the API server's order. */
export const MUTATING_PLUGINS: [string, Plugin][] = [
  ["LimitRanger", limitRangerAdmit],
  ["ServiceAccount", serviceAccountAdmit],
  ["Priority", priorityAdmit],
  ["DefaultTolerationSeconds", defaultTolerationSecondsAdmit],
];

/** The validating plugins, in the API server's order (before the validating webhooks). */
export const VALIDATING_PLUGINS: [string, Plugin][] = [
  ["LimitRanger", limitRangerValidate],
  ["ServiceAccount", serviceAccountValidate],
];

/** Plugins in order on a Pod; the first refusal, else undefined. */
function runPlugins(plugins: [string, Plugin][], pod: KubeObject, ctx: BuiltInContext) {
  // A pod without a spec is the API server's validation's to refuse; the tests send it on as is.
  if (!isRecord(pod.spec)) return undefined;
  for (const [, plugin] of plugins) {
    const refusal = plugin(pod, ctx);
    if (refusal) return refusal;
  }
  return undefined;
}

/** The mutating plugins on a Pod CREATE, in place; the first refusal (the API server's message), else undefined. */
export const admitPodBuiltIns = (pod: KubeObject, ctx: BuiltInContext): string | undefined =>
  runPlugins(MUTATING_PLUGINS, pod, ctx);

/** The validating plugins on a Pod CREATE; the first refusal, else undefined. */
export const validatePodBuiltIns = (pod: KubeObject, ctx: BuiltInContext): string | undefined =>
  runPlugins(VALIDATING_PLUGINS, pod, ctx);

/** Thrown where a pod cannot be handed to a webhook: the API server refused it before. */
export class BuiltInRefusal extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BuiltInRefusal";
  }
}
