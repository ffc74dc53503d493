// service-account as a Pepr capability: pods moved off `default` to a dedicated ServiceAccount,
// and the secrets they read checked against what that account may read. The rules are in
// rules.ts and secret-access.ts, the policy in policy.ts.
import { policyOf } from "../../lib/engine/policy";
import { capabilityOf } from "../../lib/pepr/adapter";
import { serviceAccountRules } from "./policy";

export const serviceAccountPolicy = policyOf(serviceAccountRules, {
  // A new pod on `default` moves to the dedicated account, created first when missing.
  fix: { pods: ["CREATE"], templates: ["CREATE", "UPDATE"] },
  // The account exists and may read the secrets the pod mounts.
  check: { pods: ["CREATE", "UPDATE"], templates: ["CREATE", "UPDATE"] },
});

export const ServiceAccount = capabilityOf(serviceAccountPolicy);
