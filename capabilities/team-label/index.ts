// team-label as a Pepr capability: the worked example of docs/add-a-capability.md (a fix, a check,
// a settings section). Off unless teamLabel.enabled; the rules are in rules.ts.
import { policyOf } from "../../lib/engine/policy";
import { capabilityOf } from "../../lib/pepr/adapter";
import { teamLabelRules } from "./rules";

export const teamLabelPolicy = policyOf(teamLabelRules, {
  // A new pod, and a workload's own template (workloads.mutate), get the namespace's team label.
  fix: { pods: ["CREATE"], templates: ["CREATE", "UPDATE"] },
  // A pod as it will be stored, and the pods a workload will make.
  check: { pods: ["CREATE", "UPDATE"], templates: ["CREATE", "UPDATE"] },
});

export const TeamLabel = capabilityOf(teamLabelPolicy);
