// What the stand-in API asks RBAC for each request when it enforces RBAC: the authorization
// attributes the kube-apiserver derives from the HTTP request (k8s.io/apiserver
// pkg/endpoints/request/requestinfo.go), and the 403 Status it answers (pkg/endpoints/handlers/
// responsewriters/errors.go). Pure: no I/O.
//
// Verb: POST create, PUT update, PATCH patch, DELETE delete (deletecollection without a name),
// GET/HEAD get with a name, else list, or watch with ?watch=true (or the legacy /watch/ prefix). A
// list or watch whose fieldSelector requires metadata.name=X is authorized for the name X. A
// server-side apply (PATCH application/apply-patch+yaml) is authorized as patch; when the object
// does not exist yet, the API server also checks create for that name before it creates it
// (handlers/patch.go createAuthorizerAttributes) — both verbs are needed to create by apply.
import type { KubeObject } from "../../lib/objects/pod";
import { isRecord } from "../../lib/objects/record";
import { RbacIndex, strings, type AccessRequest } from "../../lib/cluster/rbac";

/** The resource attributes of one request; undefined for a non-resource request (/healthz, /api). */
export type RequestAttributes = Omit<AccessRequest, "user" | "groups">;

/** Who the stand-in's kubeconfig token authenticates as (e.g. serviceAccountUser(...)). */
export interface Identity {
  user: string;
  groups: string[];
}

/** Requests without a token are anonymous, as on a cluster with anonymous auth enabled. */
export const ANONYMOUS: Identity = { user: "system:anonymous", groups: ["system:unauthenticated"] };

/** Go's strconv.ParseBool true values: how the API server reads ?watch=. */
const TRUE_VALUES = new Set(["1", "t", "T", "TRUE", "true", "True"]);

/** The name a field selector requires exactly (`metadata.name=x` or `==x`, among ANDed terms). */
function requiredName(fieldSelector: string | null): string {
  for (const term of (fieldSelector ?? "").split(",")) {
    const m = /^\s*metadata\.name\s*==?\s*([^=!\s]+)\s*$/.exec(term);
    if (m && m[1] !== "." && m[1] !== ".." && !/[/%]/.test(m[1])) return m[1];
  }
  return "";
}

/** The attributes the API server authorizes a request with (the first check; see applyCreate). */
export function requestAttributes(method: string, url: URL): RequestAttributes | undefined {
  let parts = url.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  // /api/v1/<...> and /apis/<group>/<version>/<...>; anything shorter is a non-resource request.
  if (parts.length < 3 || (parts[0] !== "api" && parts[0] !== "apis")) return undefined;
  let group = "";
  if (parts[0] === "apis") {
    if (parts.length < 4) return undefined;
    group = parts[1];
    parts = parts.slice(3);
  } else {
    parts = parts.slice(2);
  }
  let verb: string;
  if (parts[0] === "watch" && parts.length > 1) {
    verb = "watch";
    parts = parts.slice(1);
  } else {
    const byMethod: Record<string, string> = {
      POST: "create",
      GET: "get",
      HEAD: "get",
      PUT: "update",
      PATCH: "patch",
      DELETE: "delete",
    };
    verb = byMethod[method] ?? "";
  }
  let namespace = "";
  if (parts[0] === "namespaces" && parts.length > 1) {
    namespace = parts[1];
    // namespaces/<ns>/status and /finalize are subresources of the namespace itself.
    if (parts.length > 2 && parts[2] !== "status" && parts[2] !== "finalize")
      parts = parts.slice(2);
  }
  const [resource = "", name = "", subresource] = parts;
  const attrs: RequestAttributes = { verb, group, resource, namespace, name };
  if (subresource) attrs.subresource = subresource;
  if (!name && verb === "get") {
    attrs.verb = TRUE_VALUES.has(url.searchParams.get("watch") ?? "") ? "watch" : "list";
    attrs.name = requiredName(url.searchParams.get("fieldSelector"));
  }
  if (!name && verb === "delete") attrs.verb = "deletecollection";
  return attrs;
}

/** The second check of a server-side apply that creates the object: create, for that name. */
export const applyCreate = (attrs: RequestAttributes): RequestAttributes => ({
  ...attrs,
  verb: "create",
});

/** `create serviceaccounts "workload" in namespace "ml"`: a missing permission, in a sentence. */
export function describeAttributes(a: RequestAttributes): string {
  const resource = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  const group = a.group ? `.${a.group}` : "";
  const name = a.name ? ` "${a.name}"` : "";
  const where = a.namespace ? ` in namespace "${a.namespace}"` : " at the cluster scope";
  return `${a.verb} ${resource}${group}${name}${where}`;
}

/** The 403 Status the API server answers, with its message (forbiddenMessage in errors.go). */
export function forbiddenStatus(who: Identity, a: RequestAttributes) {
  const resource = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  const qualified = a.group ? `${a.resource}.${a.group}` : a.resource;
  const scope = a.namespace ? `in the namespace "${a.namespace}"` : "at the cluster scope";
  const reason = `User "${who.user}" cannot ${a.verb} resource "${resource}" in API group "${a.group}" ${scope}`;
  return {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message: `${qualified}${a.name ? ` "${a.name}"` : ""} is forbidden: ${reason}`,
    reason: "Forbidden",
    details: { ...(a.name ? { name: a.name } : {}), group: a.group, kind: a.resource },
    code: 403,
  };
}

/**
 * Answers an authorization.k8s.io/v1 SubjectAccessReview (the object a client POSTs) from RBAC
 * objects: the request object with `status` filled, as the API server returns it. For the stand-in API
 * (test/support/stand-in-api.ts), which answers reviews as the API server's RBAC would. Non-resource requests and malformed reviews are answered "not allowed".
 */
export function answerSubjectAccessReview(
  objects: readonly unknown[],
  review: unknown,
): KubeObject & { status: { allowed: boolean; reason?: string } } {
  const body: KubeObject = isRecord(review) ? (review as KubeObject) : {};
  const spec = isRecord(body.spec) ? body.spec : {};
  const attrs = isRecord(spec.resourceAttributes) ? spec.resourceAttributes : undefined;
  const out = {
    ...body,
    apiVersion: "authorization.k8s.io/v1",
    kind: "SubjectAccessReview",
    status: { allowed: false } as { allowed: boolean; reason?: string },
  };
  if (!attrs || typeof spec.user !== "string") return out;
  const str = (x: unknown) => (typeof x === "string" ? x : "");
  out.status = new RbacIndex(objects).decide({
    user: spec.user,
    groups: strings(spec.groups),
    namespace: str(attrs.namespace),
    verb: str(attrs.verb),
    group: str(attrs.group),
    resource: str(attrs.resource),
    subresource: str(attrs.subresource) || undefined,
    name: str(attrs.name),
  });
  return out;
}
