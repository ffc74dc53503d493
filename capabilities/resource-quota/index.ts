// resource-quota as a Pepr capability: a pod over the namespace's ResourceQuota, or larger than
// every node it could run on, refused with the numbers and both fixes; a gang of ML workloads
// judged whole. The rules are in quota.ts, node-fit.ts, resources.ts and gang-capacity.ts.
import { policyOf } from "../../lib/engine/policy";
import { capabilityOf } from "../../lib/pepr/adapter";
import { resourceQuotaRules } from "./policy";

export const resourceQuotaPolicy = policyOf(resourceQuotaRules, {
  // Nothing to fix. Pods, and every pod a workload makes (a gang judged whole), against the quota
  // and the nodes.
  check: { pods: ["CREATE", "UPDATE"], templates: ["CREATE", "UPDATE"] },
});

export const ResourceQuota = capabilityOf(resourceQuotaPolicy);
