// accelerators as a Pepr capability: GPU pods that schedule and keep their nodes. The rules are in
// rules.ts and policy.ts.
import { policyOf } from "../../lib/engine/policy";
import { capabilityOf } from "../../lib/pepr/adapter";
import { acceleratorsRules } from "./policy";

export const acceleratorsPolicy = policyOf(acceleratorsRules, {
  // A new pod that asks for a GPU gets the tolerations its nodes ask for (and runtimeClassName).
  fix: { pods: ["CREATE"], templates: ["CREATE", "UPDATE"] },
  // Its memory and CPU requests, its owner, how many it asks; pods on GPU nodes without one.
  check: { pods: ["CREATE", "UPDATE"], templates: ["CREATE", "UPDATE"] },
});

export const Accelerators = capabilityOf(acceleratorsPolicy);
