// AdmissionReview v1 requests shaped as the kube-apiserver sends them, and the client side of
// admission: apply the returned JSON patch, then validate the patched object.
//
// The API server defaults an object before any webhook sees it: a Pod CREATE arrives with
// serviceAccountName "default", the projected kube-api-access-xxxxx volume mounted in every
// container, not-ready/unreachable tolerations, dnsPolicy, restartPolicy, imagePullPolicy,
// requests copied from limits... (see defaultPod). Tests send that, not the manifest a user wrote.
import { randomUUID } from "node:crypto";
import { applyPatch as applyJsonPatch, deepClone, type Operation } from "fast-json-patch";
import type { KubeObject } from "../../lib/objects/pod";
import { WORKLOAD_KINDS } from "../../lib/workload-kinds/built-in";
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
}

export const ADMIN: UserInfo = {
  username: "kubernetes-admin",
  groups: ["system:masters", "system:authenticated"],
};
export const REPLICASET_CONTROLLER: UserInfo = {
  username: "system:serviceaccount:kube-system:replicaset-controller",
  uid: "6b1e8b0e-3f0a-4c53-9d56-0a1f6f7bb001",
  groups: ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
};

const SA_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount";

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
function defaultContainer(c: Json, saVolume?: string): void {
  const image = String(c.image ?? "");
  const tag = image.includes("@") ? "digest" : (image.split("/").pop() ?? "").split(":")[1];
  c.imagePullPolicy ??= !tag || tag === "latest" ? "Always" : "IfNotPresent";
  c.terminationMessagePath ??= "/dev/termination-log";
  c.terminationMessagePolicy ??= "File";
  const resources = (c.resources ??= {}) as { limits?: Json; requests?: Json };
  // Requests default to limits when only limits are given.
  if (resources.limits) resources.requests = { ...resources.limits, ...(resources.requests ?? {}) };
  for (const p of asList(c.ports)) p.protocol ??= "TCP";
  if (saVolume) {
    const mounts = (c.volumeMounts ??= []) as Json[];
    if (!mounts.some(m => m.mountPath === SA_MOUNT_PATH))
      mounts.push({ name: saVolume, readOnly: true, mountPath: SA_MOUNT_PATH });
  }
}

/** The tolerations the DefaultTolerationSeconds admission plugin adds to a Pod (before any webhook). */
export const defaultTolerations = (): Json[] =>
  ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"].map(key => ({
    key,
    operator: "Exists",
    effect: "NoExecute",
    tolerationSeconds: 300,
  }));

/** Pod spec defaults; with `admission`, also what the ServiceAccount and toleration plugins add to a Pod. */
function defaultPodSpec(spec: Json, admission: boolean): void {
  spec.restartPolicy ??= "Always";
  spec.terminationGracePeriodSeconds ??= 30;
  spec.dnsPolicy ??= "ClusterFirst";
  spec.securityContext ??= {};
  spec.schedulerName ??= "default-scheduler";
  let saVolume: string | undefined;
  if (admission) {
    spec.serviceAccountName ??= (spec.serviceAccount as string | undefined) ?? "default";
    spec.serviceAccount = spec.serviceAccountName;
    spec.enableServiceLinks ??= true;
    spec.priority ??= 0;
    spec.preemptionPolicy ??= "PreemptLowerPriority";
    const tolerations = (spec.tolerations ??= []) as Json[];
    for (const toleration of defaultTolerations())
      if (!tolerations.some(t => t.key === toleration.key)) tolerations.push(toleration);
    if (spec.automountServiceAccountToken !== false) {
      saVolume = `kube-api-access-${randomUUID().replace(/-/g, "").slice(0, 5)}`;
      ((spec.volumes ??= []) as Json[]).push({
        name: saVolume,
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
      });
    }
  }
  for (const key of ["initContainers", "containers"])
    for (const c of asList(spec[key])) defaultContainer(c, saVolume);
}

/** A Pod as the API server hands it to admission webhooks on CREATE. */
export function defaultPod(manifest: KubeObject, namespace: string): KubeObject {
  const pod = deepClone(manifest) as KubeObject;
  pod.apiVersion ??= "v1";
  pod.metadata = { ...(pod.metadata ?? {}), namespace };
  if (pod.spec && typeof pod.spec === "object") defaultPodSpec(pod.spec as Json, true);
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
  if (template?.spec && typeof template.spec === "object")
    defaultPodSpec(template.spec as Json, false);
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

/** A Pod CREATE review; the pod defaulted as the API server does unless `defaulted: false`. */
export function podCreateReview(manifest: KubeObject, opts: ReviewOptions = {}): AdmissionReview {
  const namespace = namespaceFor(manifest, opts);
  const pod = opts.defaulted === false ? manifest : defaultPod(manifest, namespace);
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

/** The object after the response's JSON patch (base64 JSONPatch); the input is not changed. */
export function applyPatch(object: KubeObject, response: AdmissionResponse): KubeObject {
  const copy = deepClone(object) as KubeObject;
  if (!response.patch) return copy;
  if (response.patchType !== "JSONPatch")
    throw new Error(`unexpected patchType ${response.patchType}`);
  const ops = JSON.parse(Buffer.from(response.patch, "base64").toString("utf8")) as Operation[];
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
   * The stand-in whose ServiceAccounts the API server's ServiceAccount admission checks, as it
   * does between the mutating and the validating webhooks: a Pod CREATE whose account the stand-in
   * does not hold is refused with the API server's own message. Without it, no such check.
   */
  api?: StandInApi;
  /**
   * The module was built with workloads.mutate: its mutating webhook also receives workloads on
   * CREATE and UPDATE (by default it receives only Pod CREATE).
   */
  workloadsMutated?: boolean;
}

/** The refusal of the ServiceAccount admission plugin (kube-apiserver 1.32) for a missing account. */
export const serviceAccountNotFound = (pod: string, namespace: string, account: string) =>
  `pods "${pod}" is forbidden: error looking up service account ${namespace}/${account}: serviceaccount "${account}" not found`;

/**
 * What the API server does with one object: the mutating webhook (for Pod CREATE, what our
 * MutatingWebhookConfiguration matches, and workloads with `workloadsMutated`), the patch applied, with `api` the
 * ServiceAccount admission's check that the pod's account exists, then the validating webhook on
 * the patched object.
 */
export async function admit(
  controller: Controller,
  manifest: KubeObject,
  opts: AdmitOptions = {},
): Promise<AdmitResult> {
  const operation = opts.operation ?? "CREATE";
  const first =
    manifest?.kind === "Pod" && operation === "CREATE"
      ? podCreateReview(manifest, opts)
      : workloadReview(manifest, operation, opts.oldObject, opts);
  const request = first.request!;
  let patched = request.object as KubeObject;
  let mutateResponse: AdmissionResponse | undefined;
  const mutated =
    (manifest?.kind === "Pod" && operation === "CREATE") ||
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
    const account = (patched.spec as { serviceAccountName?: string } | undefined)
      ?.serviceAccountName;
    const ns = request.namespace ?? "";
    if (opts.api && account && !opts.api.get("ServiceAccount", account, ns))
      return refused(serviceAccountNotFound(patched.metadata?.name ?? "", ns, account));
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
