// resource-quota as a Pepr capability: a pod over the namespace's ResourceQuota, or larger than
// every node it could run on, refused with the numbers and both fixes. The rules are in quota.ts,
// node-fit.ts and resources.ts, the policy `check` runs in policy.ts.
import { Capability } from "pepr";
import { bindPolicy } from "../../lib/pepr/adapter";
import { resourceQuotaPolicy } from "./policy";

export const ResourceQuota = new Capability({
  name: resourceQuotaPolicy.name,
  description: resourceQuotaPolicy.description,
});
// Its bindings, as the module's one declaration of what runs where says (lib/engine/routes.ts).
// Nothing to fix, so no binding of its own: its checks run with every area's in the shared
// validation of Pods (capabilities/pods) and workload templates (capabilities/workloads).
bindPolicy(ResourceQuota, resourceQuotaPolicy);
