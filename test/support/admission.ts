// AdmissionReview v1 requests shaped as the kube-apiserver sends them, and the client side of
// admission: apply the returned JSON patch, then validate the patched object.
//
// The API server defaults an object before any webhook sees it: a Pod CREATE arrives with
// serviceAccountName "default", the projected kube-api-access-xxxxx volume mounted in every
// container, not-ready/unreachable tolerations, dnsPolicy, restartPolicy, imagePullPolicy,
// requests copied from limits... (see defaultPod). Tests send that, not the manifest a user wrote.
// The API server's own admission plugins around the webhooks (LimitRanger, ServiceAccount,
// Priority, DefaultTolerationSeconds) are ./built-in-admission.ts; `admit` runs them where the API
// server does.
import { randomUUID } from "node:crypto";
import { applyPatch as applyJsonPatch, deepClone, type Operation } from "fast-json-patch";
import type { KubeObject } from "../../lib/objects/pod";
import { WORKLOAD_KINDS } from "../../lib/workload-kinds/built-in";
import {
  admitPodBuiltIns,
  builtInCluster,
  BuiltInRefusal,
  defaultTolerationSecondsAdmit,
  OPEN_CLUSTER,
  validatePodBuiltIns,
  type BuiltInCluster,
} from "./built-in-admission";
import type { Controller } from "./controller";
import { RESOURCE_TYPES, type StandInApi } from "./stand-in-api";

export interface UserInfo {
  username: string;
  uid?: string;
  groups?: string[];
}

export interface AdmissionRequest {
  uid: string;
  kind: { group: string; version: string; kind: string };
  resource: { group: string; version: string; resource: string };
  requestKind: { group: string; version: string; kind: string };
  requestResource: { group: string; version: string; resource: string };
  /** e.g. "ephemeralcontainers" for `kubectl debug`'s UPDATE of pods/ephemeralcontainers. */
  subResource?: string;
  requestSubResource?: string;
  name?: string;
  namespace?: string;
  operation: "CREATE" | "UPDATE" | "DELETE" | "CONNECT";
  userInfo: UserInfo;
  object?: KubeObject | null;
  oldObject?: KubeObject | null;
  dryRun: boolean;
  options?: KubeObject;
}

export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  patch?: string;
  patchType?: string;
  warnings?: string[];
  status?: { code?: number; message?: string };
}

export interface AdmissionReview {
  apiVersion: "admission.k8s.io/v1";
  kind: "AdmissionReview";
  request?: AdmissionRequest;
  response?: AdmissionResponse;
}

export interface ReviewOptions {
  /** The request's namespace; default the object's, else "default". */
  namespace?: string;
  userInfo?: UserInfo;
  dryRun?: boolean;
  /** false: send the object as given, without the API server's defaults. */
  defaulted?: boolean;
  /** The subresource the request is for (requestSubResource too), e.g. "ephemeralcontainers". */
  subResource?: string;
  /**
   * The stand-in whose ServiceAccounts, PriorityClasses and LimitRanges the API server's built-in
   * admission reads (./built-in-admission.ts). Without it: every account exists, no LimitRange,
   * no PriorityClass but the system ones, so nothing is refused.
   */
  api?: StandInApi;
}

/** What the built-in admission plugins read for these options. */
const clusterFor = (opts: ReviewOptions): BuiltInCluster =>
  opts.api ? builtInCluster(opts.api) : OPEN_CLUSTER;

export const ADMIN: UserInfo = {
  username: "kubernetes-admin",
  groups: ["system:masters", "system:authenticated"],
};
export const REPLICASET_CONTROLLER: UserInfo = {
  username: "system:serviceaccount:kube-system:replicaset-controller",
  uid: "6b1e8b0e-3f0a-4c53-9d56-0a1f6f7bb001",
  groups: ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
};

function gvkOf(obj: KubeObject) {
  const [group, version] = String(obj?.apiVersion ?? "v1").includes("/")
    ? String(obj.apiVersion).split("/")
    : ["", String(obj?.apiVersion ?? "v1")];
  const kind = String(obj?.kind ?? "");
  const known = RESOURCE_TYPES.find(t => t.kind === kind && t.group === group);
  const resource = known?.plural ?? `${kind.toLowerCase()}s`;
  return { kind: { group, version, kind }, resource: { group, version, resource } };
}

type Json = Record<string, unknown>;
const asList = (x: unknown): Json[] => (Array.isArray(x) ? (x as Json[]) : []);

/** Container defaults the API server fills in (every container kind). */
function defaultContainer(c: Json): void {
  const image = String(c.image ?? "");
  const tag = image.includes("@") ? "digest" : (image.split("/").pop() ?? "").split(":")[1];
  c.imagePullPolicy ??= !tag || tag === "latest" ? "Always" : "IfNotPresent";
  c.terminationMessagePath ??= "/dev/termination-log";
  c.terminationMessagePolicy ??= "File";
  const resources = (c.resources ??= {}) as { limits?: Json; requests?: Json };
  // Requests default to limits when only limits are given.
  if (resources.limits) resources.requests = { ...resources.limits, ...(resources.requests ?? {}) };
  for (const p of asList(c.ports)) p.protocol ??= "TCP";
}

/** Pod spec defaults of the API's own defaulting (pods and pod templates alike). */
function defaultPodSpec(spec: Json): void {
  spec.restartPolicy ??= "Always";
  spec.terminationGracePeriodSeconds ??= 30;
  spec.dnsPolicy ??= "ClusterFirst";
  spec.securityContext ??= {};
  spec.schedulerName ??= "default-scheduler";
  for (const key of ["initContainers", "containers"])
    for (const c of asList(spec[key])) defaultContainer(c);
}

/**
 * A Pod as the API server hands it to the mutating webhooks on CREATE: defaulted, then through
 * the built-in mutating admission plugins (./built-in-admission.ts) over `cluster` (default: every
 * account exists, no LimitRange, no PriorityClass of its own). Throws BuiltInRefusal when those
 * plugins refuse it: no webhook would ever see it.
 */
export function defaultPod(
  manifest: KubeObject,
  namespace: string,
  cluster: BuiltInCluster = OPEN_CLUSTER,
): KubeObject {
  const pod = deepClone(manifest) as KubeObject;
  pod.apiVersion ??= "v1";
  pod.metadata = { ...(pod.metadata ?? {}), namespace };
  if (pod.spec && typeof pod.spec === "object") {
    defaultPodSpec(pod.spec as Json);
    // Defaulted on Pods only (SetDefaults_Pod), so that templates do not change.
    (pod.spec as Json).enableServiceLinks ??= true;
    const refusal = admitPodBuiltIns(pod, { namespace, cluster });
    if (refusal) throw new BuiltInRefusal(refusal);
  }
  pod.status = { phase: "Pending", qosClass: qosClassOf(pod) };
  return pod;
}

function qosClassOf(pod: KubeObject): string {
  const containers = asList((pod.spec as Json | undefined)?.containers);
  const resources = containers.map(c => (c.resources ?? {}) as { limits?: Json; requests?: Json });
  if (
    resources.every(
      r => !Object.keys(r.limits ?? {}).length && !Object.keys(r.requests ?? {}).length,
    )
  )
    return "BestEffort";
  const guaranteed = resources.every(r =>
    ["cpu", "memory"].every(k => r.limits?.[k] !== undefined && r.limits?.[k] === r.requests?.[k]),
  );
  return guaranteed ? "Guaranteed" : "Burstable";
}

/** A workload as the API server hands it to admission: template defaults, no ServiceAccount volume. */
export function defaultWorkload(manifest: KubeObject, namespace: string): KubeObject {
  const obj = deepClone(manifest) as KubeObject;
  obj.metadata = { ...(obj.metadata ?? {}), namespace };
  const spec = obj.spec as Json | undefined;
  if (!spec || typeof spec !== "object") return obj;
  if (["Deployment", "StatefulSet", "ReplicaSet"].includes(String(obj.kind))) spec.replicas ??= 1;
  if (obj.kind === "Deployment") {
    spec.strategy ??= {
      type: "RollingUpdate",
      rollingUpdate: { maxUnavailable: "25%", maxSurge: "25%" },
    };
    spec.revisionHistoryLimit ??= 10;
    spec.progressDeadlineSeconds ??= 600;
  }
  const holder = (obj.kind === "CronJob" ? (spec.jobTemplate as Json | undefined)?.spec : spec) as
    | Json
    | undefined;
  const template = holder?.template as Json | undefined;
  if (template?.spec && typeof template.spec === "object") defaultPodSpec(template.spec as Json);
  return obj;
}

function review(
  object: KubeObject | null,
  operation: AdmissionRequest["operation"],
  oldObject: KubeObject | null,
  opts: ReviewOptions,
  namespace: string | undefined,
): AdmissionReview {
  const { kind, resource } = gvkOf(object ?? oldObject ?? {});
  const meta = (object ?? oldObject)?.metadata;
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: randomUUID(),
      kind,
      resource,
      requestKind: kind,
      requestResource: resource,
      ...(opts.subResource && {
        subResource: opts.subResource,
        requestSubResource: opts.subResource,
      }),
      name: meta?.name ?? "",
      namespace,
      operation,
      userInfo: opts.userInfo ?? (meta?.ownerReferences?.length ? REPLICASET_CONTROLLER : ADMIN),
      object,
      oldObject,
      dryRun: opts.dryRun ?? false,
      options: {
        apiVersion: "meta.k8s.io/v1",
        kind: operation === "UPDATE" ? "UpdateOptions" : "CreateOptions",
      },
    },
  };
}

const namespaceFor = (manifest: KubeObject, opts: ReviewOptions) =>
  opts.namespace ?? manifest?.metadata?.namespace ?? "default";

/**
 * A Pod CREATE review; the pod defaulted and through the built-in mutating admission as the API
 * server does unless `defaulted: false` (throws BuiltInRefusal when those refuse it).
 */
export function podCreateReview(manifest: KubeObject, opts: ReviewOptions = {}): AdmissionReview {
  const namespace = namespaceFor(manifest, opts);
  const pod =
    opts.defaulted === false ? manifest : defaultPod(manifest, namespace, clusterFor(opts));
  return review(pod, "CREATE", null, opts, namespace);
}

/** A review of any other object (workloads defaulted, other kinds as given). */
export function workloadReview(
  manifest: KubeObject,
  operation: AdmissionRequest["operation"] = "CREATE",
  old?: KubeObject,
  opts: ReviewOptions = {},
): AdmissionReview {
  const namespace = namespaceFor(manifest, opts);
  const isTemplated = manifest?.spec && typeof manifest.spec === "object";
  const fill = (o: KubeObject) =>
    opts.defaulted === false || !isTemplated ? o : defaultWorkload(o, namespace);
  const object = operation === "DELETE" ? null : fill(manifest);
  return review(object, operation, old ? fill(old) : null, opts, namespace);
}

/** The response's JSON patch operations (none without a patch). */
function patchOf(response: AdmissionResponse): Operation[] {
  if (!response.patch) return [];
  if (response.patchType !== "JSONPatch")
    throw new Error(`unexpected patchType ${response.patchType}`);
  return JSON.parse(Buffer.from(response.patch, "base64").toString("utf8")) as Operation[];
}

/** The object after the response's JSON patch (base64 JSONPatch); the input is not changed. */
export function applyPatch(object: KubeObject, response: AdmissionResponse): KubeObject {
  const copy = deepClone(object) as KubeObject;
  const ops = patchOf(response);
  if (!ops.length) return copy;
  return applyJsonPatch(copy, ops, true).newDocument as KubeObject;
}

export interface AdmitResult {
  /** The request sent to /mutate (its object is the defaulted object). */
  request: AdmissionRequest;
  mutateResponse?: AdmissionResponse;
  /** The object after the mutating webhook (unchanged when it was not called). */
  patched: KubeObject;
  validateResponse: AdmissionResponse;
  allowed: boolean;
  /** The denial message ("" when allowed). */
  message: string;
  /** Warnings of both webhooks. */
  warnings: string[];
}

export interface AdmitOptions extends ReviewOptions {
  operation?: AdmissionRequest["operation"];
  oldObject?: KubeObject;
  /**
   * The module was built with workloads.mutate: its mutating webhook also receives workloads on
   * CREATE and UPDATE (by default it receives only Pod CREATE).
   */
  workloadsMutated?: boolean;
}

export { serviceAccountNotFound } from "./built-in-admission";

/** The tolerations the DefaultTolerationSeconds plugin gives a pod that has none (before any webhook). */
export function defaultTolerations(): Json[] {
  const pod: KubeObject = { apiVersion: "v1", kind: "Pod", spec: {} };
  defaultTolerationSecondsAdmit(pod);
  return asList((pod.spec as Json).tolerations);
}

/**
 * What the API server does with one object. A Pod CREATE (unless `defaulted: false`): defaulting
 * and the built-in mutating plugins, the mutating webhook, its JSON patch applied, the built-in
 * mutating plugins again when the patch changed anything (the API server's reinvocation), the
 * built-in validating plugins, then the validating webhook on the result; a refusal by a built-in
 * ends it with the API server's message (./built-in-admission.ts; with `api`, over the
 * stand-in's ServiceAccounts, PriorityClasses and LimitRanges). Workloads with `workloadsMutated`
 * get the mutating webhook too; other requests only the validating webhook.
 */
export async function admit(
  controller: Controller,
  manifest: KubeObject,
  opts: AdmitOptions = {},
): Promise<AdmitResult> {
  const operation = opts.operation ?? "CREATE";
  const podCreate = manifest?.kind === "Pod" && operation === "CREATE";
  const builtIns = podCreate && opts.defaulted !== false;
  let first: AdmissionReview;
  try {
    first = podCreate
      ? podCreateReview(manifest, opts)
      : workloadReview(manifest, operation, opts.oldObject, opts);
  } catch (e) {
    if (!(e instanceof BuiltInRefusal)) throw e;
    // Refused before any webhook: what the client gets is the API server's own answer.
    const namespace = namespaceFor(manifest, opts);
    const refusal: AdmissionResponse = {
      uid: "",
      allowed: false,
      status: { code: 403, message: e.message },
    };
    return {
      request: review(manifest, operation, null, opts, namespace).request!,
      patched: manifest,
      validateResponse: refusal,
      allowed: false,
      message: e.message,
      warnings: [],
    };
  }
  const request = first.request!;
  let patched = request.object as KubeObject;
  let mutateResponse: AdmissionResponse | undefined;
  const mutated =
    podCreate ||
    (opts.workloadsMutated &&
      (WORKLOAD_KINDS as readonly string[]).includes(String(manifest?.kind)) &&
      (operation === "CREATE" || operation === "UPDATE"));
  if (mutated) {
    const mutated = (await controller.mutate(first)).response!;
    mutateResponse = mutated;
    // Refused before the validating webhook: by our mutating webhook or by the API server.
    const refused = (message: string): AdmitResult => ({
      request,
      mutateResponse: mutated,
      patched,
      validateResponse: mutated,
      allowed: false,
      message,
      warnings: mutated.warnings ?? [],
    });
    if (!mutated.allowed) return refused(mutated.status?.message ?? "");
    patched = applyPatch(patched, mutated);
    if (builtIns) {
      const ctx = { namespace: request.namespace ?? "", cluster: clusterFor(opts) };
      // A patch that changed the object makes the API server run its mutating plugins again.
      const changed = patchOf(mutated).length > 0;
      const refusal =
        (changed ? admitPodBuiltIns(patched, ctx) : undefined) ?? validatePodBuiltIns(patched, ctx);
      if (refusal) return refused(refusal);
    }
  }
  const second: AdmissionReview = {
    ...first,
    request: { ...request, uid: randomUUID(), object: patched },
  };
  const validateResponse = (await controller.validate(second)).response!;
  return {
    request,
    mutateResponse,
    patched,
    validateResponse,
    allowed: validateResponse.allowed,
    message: validateResponse.allowed ? "" : (validateResponse.status?.message ?? ""),
    warnings: [...(mutateResponse?.warnings ?? []), ...(validateResponse.warnings ?? [])],
  };
}
