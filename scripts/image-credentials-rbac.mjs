// After `pepr build`: when the build names docker config Secrets for reading private registries
// (ADMISSION_GUARD_IMAGES_CREDENTIALS_SECRETS in package.json pepr.env, or in the build's
// environment), the module's ServiceAccount may `get`
// exactly those Secrets in its own namespace: a Role with resourceNames and its RoleBinding, added
// to dist/pepr-module-<uuid>.yaml and to the Helm chart. Nothing else may read Secrets; with the
// setting empty, nothing is added (and a stale chart template is removed).
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { parseAllDocuments, parse as parseYaml, stringify } from "yaml";
import { dist, manifest, pepr } from "./build-output.mjs";

const chartTemplate = new URL(`${pepr.uuid}-chart/templates/image-credentials-role.yaml`, dist);
const NAMESPACE = "pepr-system";
const NAME = `pepr-${pepr.uuid}-image-credentials`;
/** images.workloadPullSecrets (opt-in): `get secrets` in every namespace, for pods' own pull secrets. */
const WORKLOAD_NAME = `pepr-${pepr.uuid}-workload-pull-secrets`;

function fail(message) {
  console.error(`image-credentials-rbac: ${message}`);
  process.exit(1);
}

/**
 * The setting as the controller reads it (a YAML list, or comma-separated names): from the build's
 * environment (a variant build), else package.json pepr.env (what the deployed controller gets).
 */
function secretNames() {
  const raw =
    process.env.ADMISSION_GUARD_IMAGES_CREDENTIALS_SECRETS ??
    pepr.env?.ADMISSION_GUARD_IMAGES_CREDENTIALS_SECRETS ??
    "";
  if (!raw.trim()) return [];
  const parsed = raw.trim().startsWith("[") ? parseYaml(raw) : raw.split(",");
  return parsed.map(s => String(s).trim()).filter(Boolean);
}

const names = secretNames();
const workloadPullSecrets =
  String(
    process.env.ADMISSION_GUARD_IMAGES_WORKLOAD_PULL_SECRETS ??
      pepr.env?.ADMISSION_GUARD_IMAGES_WORKLOAD_PULL_SECRETS ??
      "false",
  ).trim() === "true";
if (!existsSync(manifest)) fail(`${manifest.pathname} is missing: run pepr build first`);
const docs = parseAllDocuments(readFileSync(manifest, "utf8")).filter(
  d => ![NAME, WORKLOAD_NAME].includes(d.get("metadata")?.get("name")),
);
const deployment = docs.find(
  d =>
    d.get("kind") === "Deployment" && !String(d.get("metadata").get("name")).endsWith("-watcher"),
);
const serviceAccount = deployment?.getIn(["spec", "template", "spec", "serviceAccountName"]);
if (!serviceAccount)
  fail(`${manifest.pathname}: no admission Deployment with a serviceAccountName`);

const objects = names.length
  ? [
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "Role",
        metadata: { name: NAME, namespace: NAMESPACE },
        rules: [{ apiGroups: [""], resources: ["secrets"], resourceNames: names, verbs: ["get"] }],
      },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name: NAME, namespace: NAMESPACE },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: NAME },
        subjects: [{ kind: "ServiceAccount", name: serviceAccount, namespace: NAMESPACE }],
      },
    ]
  : [];
if (workloadPullSecrets)
  objects.push(
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: WORKLOAD_NAME },
      rules: [{ apiGroups: [""], resources: ["secrets"], verbs: ["get"] }],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: WORKLOAD_NAME },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: WORKLOAD_NAME },
      subjects: [{ kind: "ServiceAccount", name: serviceAccount, namespace: NAMESPACE }],
    },
  );
const text = objects.map(o => `---\n${stringify(o)}`).join("");
writeFileSync(manifest, docs.map(d => d.toString()).join("") + text);
if (objects.length) writeFileSync(chartTemplate, text);
else rmSync(chartTemplate, { force: true });
console.log(
  (names.length
    ? `image credentials: get on Secrets ${names.join(", ")} in ${NAMESPACE}`
    : "image credentials: none named (images.credentialsSecrets)") +
    (workloadPullSecrets
      ? "; get on Secrets in every namespace (images.workloadPullSecrets)"
      : "; pods' own pull secrets not read") +
    (objects.length ? ", in the manifest and the Helm chart" : ": no Secret access granted"),
);
