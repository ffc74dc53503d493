// The RBAC that `npx pepr build` writes into dist/pepr-module-<uuid>.yaml, as the e2e tests need it:
// the controller's ServiceAccount (the one its admission Deployment runs as), the bindings that name
// it and the Roles/ClusterRoles they refer to. With `startStandIn({ objects: rbac.objects,
// enforceRbac: rbac.identity })` the controller gets exactly the permissions a cluster would give it.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import type { KubeObject } from "../../lib/objects/pod";
import { serviceAccountUser } from "../../lib/cluster/rbac";
import { describeAttributes, type Identity } from "./authorization";
import { REPO_ROOT } from "./controller";
import type { RecordedRequest } from "./stand-in-api";

const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8"));

/** The deployment manifest `npm run build` writes, named after the module uuid in package.json. */
export function moduleYamlPath(): string {
  return join(REPO_ROOT, "dist", `pepr-module-${pkg.pepr.uuid}.yaml`);
}

export interface ModuleRbac {
  /** The admission controller's ServiceAccount. */
  serviceAccount: { namespace: string; name: string };
  /** How the controller authenticates: system:serviceaccount:<ns>:<name> and its groups. */
  identity: Identity;
  /** The bindings naming the ServiceAccount and the Roles/ClusterRoles they refer to. */
  objects: KubeObject[];
  /** RBAC objects of the file that grant the ServiceAccount nothing (bound to someone else). */
  unused: KubeObject[];
}

interface Subject {
  kind?: string;
  name?: string;
  namespace?: string;
}

const namesServiceAccount = (binding: KubeObject, sa: { namespace: string; name: string }) =>
  ((binding.subjects ?? []) as Subject[]).some(
    s =>
      s.kind === "ServiceAccount" &&
      s.name === sa.name &&
      // A RoleBinding's subject without namespace is in the binding's namespace.
      (s.namespace ?? binding.metadata?.namespace) === sa.namespace,
  );

/** Reads the module manifest (run `npm run build` first) and extracts the controller's RBAC. */
export function loadModuleRbac(path = moduleYamlPath()): ModuleRbac {
  const docs = parseAllDocuments(readFileSync(path, "utf8")).map(d => d.toJS() as KubeObject);
  const admission = docs.find(
    d => d?.kind === "Deployment" && d.metadata?.name === `pepr-${pkg.pepr.uuid}`,
  );
  const podSpec = (admission?.spec as { template?: { spec?: { serviceAccountName?: string } } })
    ?.template?.spec;
  if (!admission || !podSpec?.serviceAccountName)
    throw new Error(`${path}: no admission Deployment pepr-${pkg.pepr.uuid} with a ServiceAccount`);
  const serviceAccount = {
    namespace: admission.metadata?.namespace ?? "default",
    name: podSpec.serviceAccountName,
  };
  const rbac = docs.filter(d =>
    ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"].includes(String(d?.kind)),
  );
  const bindings = rbac.filter(
    d => d.kind?.endsWith("Binding") && namesServiceAccount(d, serviceAccount),
  );
  const roles = rbac.filter(role =>
    bindings.some(b => {
      const ref = b.roleRef as { kind?: string; name?: string };
      return (
        ref.kind === role.kind &&
        ref.name === role.metadata?.name &&
        // A RoleBinding's Role is in the binding's own namespace.
        (role.kind === "ClusterRole" || role.metadata?.namespace === b.metadata?.namespace)
      );
    }),
  );
  const objects = [...roles, ...bindings];
  return {
    serviceAccount,
    identity: serviceAccountUser(serviceAccount.namespace, serviceAccount.name),
    objects,
    unused: rbac.filter(d => !objects.includes(d)),
  };
}

/** The RBAC objects with one verb taken away from every rule on group/resource. */
export function withoutVerb(
  objects: readonly KubeObject[],
  permission: { group: string; resource: string; verb: string },
): KubeObject[] {
  return objects.map(o => {
    if (!Array.isArray(o.rules)) return o;
    const rules = (o.rules as { apiGroups?: string[]; resources?: string[]; verbs?: string[] }[])
      .map(rule =>
        rule.apiGroups?.includes(permission.group) && rule.resources?.includes(permission.resource)
          ? { ...rule, verbs: (rule.verbs ?? []).filter(v => v !== permission.verb) }
          : rule,
      )
      .filter(rule => (rule.verbs ?? []).length > 0);
    return { ...o, rules };
  });
}

/** Every request the stand-in answered 403, with the permission it lacked: for failure messages. */
export function forbiddenRequests(requests: readonly RecordedRequest[]): string[] {
  return requests
    .filter(r => r.forbidden)
    .map(r => {
      const denied = r.access?.find(a => !a.allowed);
      return `${r.method} ${r.path} needs ${denied ? describeAttributes(denied) : "?"}`;
    });
}
