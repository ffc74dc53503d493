// After `pepr build`: what the install owns among namespaces, in dist/pepr-module-<uuid>.yaml and in
// the Helm chart. Run with tsx (`node --import tsx`): the settings are read as the controller reads
// them (lib/settings, from package.json pepr.env and the build's environment), not parsed again.
// - The Exemptions namespace (settings exemptions.namespace) is created by the install, labelled
//   admission-guard.dev/owned-by=<module uuid>: Exemptions count only in a namespace with that
//   label (lib/exemptions.ts), so one a tenant created first grants nothing. Helm refuses to adopt a
//   namespace it did not create; `kubectl apply` says `configured` instead of `created` then.
// - settings ignoredNamespaces join the system namespaces in the webhooks' namespaceSelector: the
//   API server never sends their objects, so a CNI, CSI, GPU-operator or cert-manager namespace
//   keeps working while the controller is down (and is never judged).
// - An opt-in ValidatingAdmissionPolicy (dist/admission-guard-namespace-keys-vap.yaml; the chart's
//   namespaceKeysPolicy.enabled): only admins (groups, users) may set, change or remove
//   admission-guard.dev/* labels and annotations of namespaces, the module's per-namespace choices
//   and its ownership label.
// Idempotent; anything it cannot find to change is an error.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { parseAllDocuments, parseDocument, stringify } from "yaml";
import settingsModule from "../lib/settings/index.ts";
import { addChartValues, chart, dist, manifest, pepr } from "./build-output.mjs";

const { moduleEnvironment, settingsFromEnv, SYSTEM_NAMESPACES, OWNED_BY_LABEL, NS_KEY_PREFIX } =
  settingsModule;

function fail(message) {
  console.error(`namespace-guards: ${message}`);
  process.exit(1);
}

let settings;
try {
  settings = settingsFromEnv(
    moduleEnvironment(pepr.env ?? {}, { ...process.env, PEPR_MODE: "build" }),
  );
} catch (e) {
  fail(e.message);
}

const NAME = `pepr-${pepr.uuid}`;
const POLICY = `${NAME}-namespace-keys`;
/** Who may set the module's namespace keys unless the chart's values say otherwise. */
const ADMIN_GROUPS = ["system:masters"];

// The Exemptions namespace, owned by this install.
const exemptionsNamespace = settings.exemptions.enabled
  ? {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: {
        name: settings.exemptions.namespace,
        labels: {
          "app.kubernetes.io/managed-by": "admission-guard",
          [OWNED_BY_LABEL]: pepr.uuid,
        },
      },
    }
  : undefined;

// The namespaces never sent to the webhooks: the system ones, Pepr's, and settings ignoredNamespaces.
const alwaysIgnored = [
  ...SYSTEM_NAMESPACES,
  ...(pepr.alwaysIgnore?.namespaces ?? []),
  ...(pepr.admission?.alwaysIgnore?.namespaces ?? []),
];
const unique = list => [...new Set(list)];

/** The CEL that says a map's module keys are the same in the object and the stored one. */
function keysUnchanged(field) {
  const ours = `.filter(k, k.startsWith("${NS_KEY_PREFIX}"))`;
  const holds = (from, to) =>
    `(!has(${from}.metadata.${field}) || ${from}.metadata.${field}${ours}.all(k, has(${to}.metadata.${field}) && k in ${to}.metadata.${field} && ${to}.metadata.${field}[k] == ${from}.metadata.${field}[k]))`;
  // On CREATE there is no stored one: no module key may be set.
  return `oldObject == null ? (!has(object.metadata.${field}) || size(object.metadata.${field}${ours}) == 0) : (${holds("object", "oldObject")} && ${holds("oldObject", "object")})`;
}
/** `!(user in [...]) && !(groups ∩ [...])`, from CEL list literals (JSON). */
const notAnAdmin = (users, groups) =>
  `!(request.userInfo.username in ${users}) && !(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ${groups}))`;

const policy = matchExpression => ({
  apiVersion: "admissionregistration.k8s.io/v1",
  kind: "ValidatingAdmissionPolicy",
  metadata: { name: POLICY },
  spec: {
    failurePolicy: "Fail",
    matchConstraints: {
      resourceRules: [
        {
          apiGroups: [""],
          apiVersions: ["v1"],
          operations: ["CREATE", "UPDATE"],
          resources: ["namespaces"],
        },
      ],
    },
    matchConditions: [{ name: "not-an-admin", expression: matchExpression }],
    validations: ["labels", "annotations"].map(field => ({
      expression: keysUnchanged(field),
      message: `admission-guard/namespace-keys: only an admin may set, change or remove ${NS_KEY_PREFIX}* namespace ${field}. Fix: ask a cluster admin (kubectl label|annotate namespace <name> ${NS_KEY_PREFIX}<key>=<value>)`,
      reason: "Forbidden",
    })),
  },
});
const binding = {
  apiVersion: "admissionregistration.k8s.io/v1",
  kind: "ValidatingAdmissionPolicyBinding",
  metadata: { name: POLICY },
  spec: { policyName: POLICY, validationActions: ["Deny"] },
};

// The manifest, through the YAML model.
if (!existsSync(manifest)) fail(`${manifest.pathname} is missing: run pepr build first`);
const ownNamespace = d =>
  d.get("kind") === "Namespace" && d.getIn(["metadata", "labels", OWNED_BY_LABEL]) === pepr.uuid;
const docs = parseAllDocuments(readFileSync(manifest, "utf8")).filter(d => !ownNamespace(d));
const webhooks = docs.filter(d => /WebhookConfiguration$/.test(d.get("kind")));
if (!webhooks.length) fail(`${manifest.pathname}: no webhook configuration`);
for (const config of webhooks)
  for (const webhook of config.get("webhooks")?.items ?? []) {
    const names = webhook
      .getIn(["namespaceSelector", "matchExpressions"])
      ?.items?.find(
        e => e.get("key") === "kubernetes.io/metadata.name" && e.get("operator") === "NotIn",
      );
    if (!names) fail(`${manifest.pathname}: a webhook without a namespace name NotIn selector`);
    const values = names
      .get("values")
      .toJSON()
      .filter(n => alwaysIgnored.includes(n));
    names.set("values", config.createNode(unique([...values, ...settings.ignoredNamespaces])));
  }
writeFileSync(
  manifest,
  docs.map(d => d.toString()).join("") +
    (exemptionsNamespace ? `---\n${stringify(exemptionsNamespace)}` : ""),
);
writeFileSync(
  new URL("admission-guard-namespace-keys-vap.yaml", dist),
  `# Opt-in (kubectl apply -f): only the admins below may set admission-guard.dev/* namespace labels
# and annotations. Edit the lists to your cluster's admin groups and users before applying.
${stringify(policy(notAnAdmin("[]", JSON.stringify(ADMIN_GROUPS))))}---\n${stringify(binding)}`,
);

// The Helm chart: values, and a template for each.
const values = new URL("values.yaml", chart);
if (!existsSync(values)) fail(`${chart.pathname}: no Helm chart there`);
const valuesDoc = parseDocument(readFileSync(values, "utf8"));
if (!valuesDoc.has("additionalIgnoredNamespaces"))
  fail("values.yaml has no additionalIgnoredNamespaces");
const chartIgnored = valuesDoc.get("additionalIgnoredNamespaces").toJSON() ?? [];
valuesDoc.set(
  "additionalIgnoredNamespaces",
  unique([...chartIgnored.filter(n => alwaysIgnored.includes(n)), ...settings.ignoredNamespaces]),
);
writeFileSync(values, valuesDoc.toString());
const names = { type: "array", items: { type: "string" } };
addChartValues(
  "namespaceKeysPolicy",
  { enabled: false, adminGroups: ADMIN_GROUPS, adminUsers: [] },
  {
    type: "object",
    additionalProperties: false,
    properties: { enabled: { type: "boolean" }, adminGroups: names, adminUsers: names },
    required: ["enabled"],
  },
);
const template = name => new URL(`templates/${name}`, chart);
writeFileSync(
  template("exemptions-namespace.yaml"),
  exemptionsNamespace ? stringify(exemptionsNamespace) : "",
);
const chartCondition = `{{ printf ${JSON.stringify(notAnAdmin("%s", "%s"))} (toJson .Values.namespaceKeysPolicy.adminUsers) (toJson .Values.namespaceKeysPolicy.adminGroups) | quote }}`;
writeFileSync(
  template("namespace-keys-policy.yaml"),
  `{{- if .Values.namespaceKeysPolicy.enabled }}\n${stringify(policy("CONDITION")).replace(
    "expression: CONDITION",
    `expression: ${chartCondition}`,
  )}---\n${stringify(binding)}{{- end }}\n`,
);
console.log(
  `namespace guards: ${exemptionsNamespace ? `namespace ${exemptionsNamespace.metadata.name} owned by the install, ` : ""}ignored namespaces [${settings.ignoredNamespaces.join(", ")}] in the webhooks' namespaceSelector, opt-in policy ${POLICY} (dist/admission-guard-namespace-keys-vap.yaml, chart namespaceKeysPolicy.enabled)`,
);
