// labels as a Pepr capability: the app label carried to app.kubernetes.io/component, and the
// component a namespace requires. The rules are in rules.ts and policy.ts.
import { policyOf } from "../../lib/engine/policy";
import { capabilityOf } from "../../lib/pepr/adapter";
import { labelsRules } from "./policy";

export const labelsPolicy = policyOf(labelsRules, {
  // A new pod gets app.kubernetes.io/component (and /name) from its app label, app kept.
  fix: { pods: ["CREATE"], templates: ["CREATE", "UPDATE"] },
  // The component a namespace requires, on pods and on workloads' pods as they will be.
  check: { pods: ["CREATE", "UPDATE"], templates: ["CREATE", "UPDATE"] },
});

export const Labels = capabilityOf(labelsPolicy);
