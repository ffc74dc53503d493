// Kubernetes RBAC evaluated from plain objects: the answer a SubjectAccessReview would give, for
// `check --cluster` and the e2e stand-in API. Pure.
// Why: docs/adr/0021-rbac-evaluated-from-plain-objects.md
import type { KubeObject } from "../objects/pod";
import { isRecord } from "../objects/record";

/** Result of asking whether a ServiceAccount may `get` some secrets. */
export interface SecretAccess {
  /** secret name → allowed. */
  allowed: Map<string, boolean>;
}

/**
 * Evaluates whether a subject may get secrets from RBAC objects (evaluateSecretAccess, or a
 * test's). The objects are a snapshot's: never changed once given.
 */
export type RbacEvaluator = (
  objects: readonly KubeObject[],
  namespace: string,
  serviceAccount: string,
  secrets: string[],
) => SecretAccess | undefined;

/** What a SubjectAccessReview asks: `spec.user`, `spec.groups`, `spec.resourceAttributes`. */
export interface AccessRequest {
  user: string;
  groups: string[];
  namespace: string;
  verb: string;
  /** API group, "" for the core group. */
  group: string;
  resource: string;
  subresource?: string;
  /** "" when the request is not for one named object (list, create). */
  name?: string;
}

export interface AccessDecision {
  allowed: boolean;
  /** Which binding and role granted it, as the API server's reason says. */
  reason?: string;
}

export const RBAC_KINDS = ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"] as const;

interface PolicyRule {
  verbs: string[];
  apiGroups: string[];
  resources: string[];
  resourceNames: string[];
}

interface Subject {
  kind: string;
  name: string;
  namespace?: string;
}

export const strings = (x: unknown): string[] =>
  Array.isArray(x) ? x.filter((s): s is string => typeof s === "string") : [];

function rulesOf(role: KubeObject | undefined): PolicyRule[] {
  if (!role || !Array.isArray(role.rules)) return [];
  return role.rules.filter(isRecord).map(r => ({
    verbs: strings(r.verbs),
    apiGroups: strings(r.apiGroups),
    resources: strings(r.resources),
    resourceNames: strings(r.resourceNames),
  }));
}

function subjectsOf(binding: KubeObject): Subject[] {
  if (!Array.isArray(binding.subjects)) return [];
  return binding.subjects
    .filter(isRecord)
    .filter(s => typeof s.kind === "string" && typeof s.name === "string")
    .map(s => ({
      kind: s.kind as string,
      name: s.name as string,
      namespace: typeof s.namespace === "string" ? s.namespace : undefined,
    }));
}

/** `system:serviceaccount:NS:NAME` and the groups every ServiceAccount is in. */
export function serviceAccountUser(
  namespace: string,
  name: string,
): { user: string; groups: string[] } {
  return {
    user: `system:serviceaccount:${namespace}:${name}`,
    groups: [
      "system:serviceaccounts",
      `system:serviceaccounts:${namespace}`,
      "system:authenticated",
    ],
  };
}

/** Does the subject of a binding (in bindingNamespace, "" for a ClusterRoleBinding) name this requester? */
function appliesTo(subject: Subject, req: AccessRequest, bindingNamespace: string): boolean {
  switch (subject.kind) {
    case "User":
      return subject.name === req.user;
    case "Group":
      return req.groups.includes(subject.name);
    case "ServiceAccount": {
      const ns = subject.namespace || bindingNamespace;
      return ns !== "" && `system:serviceaccount:${ns}:${subject.name}` === req.user;
    }
    default:
      return false;
  }
}

function resourceMatches(ruleResources: string[], req: AccessRequest): boolean {
  const combined = req.subresource ? `${req.resource}/${req.subresource}` : req.resource;
  return ruleResources.some(
    r =>
      r === "*" ||
      r === combined ||
      (!!req.subresource && r.startsWith("*/") && r.slice(2) === req.subresource),
  );
}

export function ruleAllows(rule: PolicyRule, req: AccessRequest): boolean {
  const has = (list: string[], value: string) => list.includes("*") || list.includes(value);
  if (!has(rule.verbs, req.verb)) return false;
  if (!has(rule.apiGroups, req.group)) return false;
  if (!resourceMatches(rule.resources, req)) return false;
  if (rule.resourceNames.length === 0) return true;
  // Compared as strings, as the API server does: resourceNames [""] matches a request without a
  // name (Pepr's store Role is written like that).
  return rule.resourceNames.includes(req.name ?? "");
}

/** RBAC objects of a snapshot, indexed once. */
export class RbacIndex {
  private readonly roles = new Map<string, KubeObject>();
  private readonly clusterRoles = new Map<string, KubeObject>();
  private readonly roleBindings: KubeObject[] = [];
  private readonly clusterRoleBindings: KubeObject[] = [];
  /** Whether the objects hold any RBAC object at all: without any, access cannot be known. */
  readonly hasData: boolean;

  constructor(objects: readonly unknown[]) {
    let any = false;
    for (const obj of objects) {
      if (!isRecord(obj) || typeof obj.kind !== "string") continue;
      const o = obj as KubeObject;
      const name = o.metadata?.name ?? "";
      switch (o.kind) {
        case "Role":
          this.roles.set(`${o.metadata?.namespace ?? ""}/${name}`, o);
          break;
        case "ClusterRole":
          this.clusterRoles.set(name, o);
          break;
        case "RoleBinding":
          this.roleBindings.push(o);
          break;
        case "ClusterRoleBinding":
          this.clusterRoleBindings.push(o);
          break;
        default:
          continue;
      }
      any = true;
    }
    this.hasData = any;
  }

  /** The SubjectAccessReview answer for one request. */
  decide(req: AccessRequest): AccessDecision {
    for (const crb of this.clusterRoleBindings) {
      const granted = this.grants(crb, "", req);
      if (granted) return granted;
    }
    if (req.namespace) {
      for (const rb of this.roleBindings) {
        if ((rb.metadata?.namespace ?? "") !== req.namespace) continue;
        const granted = this.grants(rb, req.namespace, req);
        if (granted) return granted;
      }
    }
    return { allowed: false };
  }

  private grants(
    binding: KubeObject,
    bindingNamespace: string,
    req: AccessRequest,
  ): AccessDecision | undefined {
    const ref = isRecord(binding.roleRef) ? binding.roleRef : {};
    const refKind = ref.kind;
    const refName = typeof ref.name === "string" ? ref.name : "";
    if (!subjectsOf(binding).some(s => appliesTo(s, req, bindingNamespace))) return undefined;
    let role: KubeObject | undefined;
    if (refKind === "ClusterRole") role = this.clusterRoles.get(refName);
    // A ClusterRoleBinding cannot refer to a Role; a RoleBinding's Role is in its own namespace.
    else if (refKind === "Role" && bindingNamespace)
      role = this.roles.get(`${bindingNamespace}/${refName}`);
    if (!rulesOf(role).some(rule => ruleAllows(rule, req))) return undefined;
    const where = bindingNamespace
      ? `RoleBinding "${binding.metadata?.name}" of ${refKind} "${refName}" to ${req.user} in namespace "${bindingNamespace}"`
      : `ClusterRoleBinding "${binding.metadata?.name}" of ClusterRole "${refName}" to ${req.user}`;
    return { allowed: true, reason: `RBAC: allowed by ${where}` };
  }
}

// A snapshot's objects do not change: their index is built once, not on every request.
const indexes = new WeakMap<readonly KubeObject[], RbacIndex>();

/** Whether a ServiceAccount may `get` each secret; undefined when the objects hold no RBAC data. */
export const evaluateSecretAccess: RbacEvaluator = (
  objects,
  namespace,
  serviceAccount,
  secrets,
): SecretAccess | undefined => {
  let index = indexes.get(objects);
  if (!index) indexes.set(objects, (index = new RbacIndex(objects)));
  if (!index.hasData) return undefined;
  const who = serviceAccountUser(namespace, serviceAccount);
  const allowed = new Map<string, boolean>();
  for (const name of secrets) {
    const req: AccessRequest = {
      user: who.user,
      groups: who.groups,
      namespace,
      verb: "get",
      group: "",
      resource: "secrets",
      name,
    };
    allowed.set(name, index.decide(req).allowed);
  }
  return { allowed };
};
