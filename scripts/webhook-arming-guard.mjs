// After `pepr build`: the module's controller arms its own webhooks (lib/webhooks: failurePolicy
// Ignore → Fail once a replica answers), for which its ClusterRole may `patch` its two webhook
// configurations. A patch could change anything in them, e.g. add Secrets to their rules and so
// receive every Secret written: more than arming needs. This ValidatingAdmissionPolicy (CEL, in the
// API server) lets the module's ServiceAccount change nothing in them but the failure policy.
// Added to dist/pepr-module-<uuid>.yaml and to the Helm chart; idempotent. `npx pepr deploy` writes
// its objects itself, without it (README, "Installing without a lock-out").
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { parseAllDocuments, stringify } from "yaml";
import { chart, manifest, pepr } from "./build-output.mjs";

const NAME = `pepr-${pepr.uuid}`;
const POLICY = `${NAME}-arming-only`;

function fail(message) {
  console.error(`webhook-arming-guard: ${message}`);
  process.exit(1);
}

// A field the API server may leave unset, the same before and after (unset in both, or equal).
const same = field =>
  `(has(o.${field}) ? has(w.${field}) && o.${field} == w.${field} : !has(w.${field}))`;
const unchangedButFailurePolicy = [
  "size(object.webhooks) == size(oldObject.webhooks)",
  `object.webhooks.all(w, oldObject.webhooks.exists(o, ${[
    "o.name == w.name",
    "o.clientConfig == w.clientConfig",
    "o.sideEffects == w.sideEffects",
    "o.admissionReviewVersions == w.admissionReviewVersions",
    ...[
      "rules",
      "namespaceSelector",
      "objectSelector",
      "timeoutSeconds",
      "matchPolicy",
      "matchConditions",
    ].map(same),
  ].join(" && ")}))`,
].join(" && ");

const policy = {
  apiVersion: "admissionregistration.k8s.io/v1",
  kind: "ValidatingAdmissionPolicy",
  metadata: { name: POLICY },
  spec: {
    failurePolicy: "Fail",
    matchConstraints: {
      resourceRules: [
        {
          apiGroups: ["admissionregistration.k8s.io"],
          apiVersions: ["v1"],
          operations: ["UPDATE"],
          resources: ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
          resourceNames: [NAME],
        },
      ],
    },
    matchConditions: [
      {
        name: "the-module-itself",
        expression: `request.userInfo.username == "system:serviceaccount:pepr-system:${NAME}"`,
      },
    ],
    validations: [
      {
        expression: unchangedButFailurePolicy,
        message: `admission-guard's controller (ServiceAccount pepr-system/${NAME}) may change only its webhooks' failurePolicy (arming); anything else is for an admin`,
        reason: "Forbidden",
      },
    ],
  },
};
const binding = {
  apiVersion: "admissionregistration.k8s.io/v1",
  kind: "ValidatingAdmissionPolicyBinding",
  metadata: { name: POLICY },
  spec: { policyName: POLICY, validationActions: ["Deny"] },
};

if (!existsSync(manifest)) fail(`${manifest.pathname} is missing: run pepr build first`);
const ours = d =>
  /^ValidatingAdmissionPolicy(Binding)?$/.test(d.get("kind")) &&
  d.getIn(["metadata", "name"]) === POLICY;
const docs = parseAllDocuments(readFileSync(manifest, "utf8")).filter(d => !ours(d));
if (!docs.some(d => /WebhookConfiguration$/.test(d.get("kind"))))
  fail(`${manifest.pathname}: no webhook configuration to guard`);
writeFileSync(
  manifest,
  docs.map(d => d.toString()).join("") + `---\n${stringify(policy)}---\n${stringify(binding)}`,
);
if (!existsSync(new URL("templates/", chart))) fail(`${chart.pathname}: no Helm chart there`);
writeFileSync(
  new URL("templates/arming-guard.yaml", chart),
  `{{- if .Values.admission.enabled }}\n${stringify(policy)}---\n${stringify(binding)}{{- end }}\n`,
);
console.log(
  `webhook arming guard: ValidatingAdmissionPolicy ${POLICY} (the module may change only its webhooks' failurePolicy), in the manifest and the Helm chart`,
);
