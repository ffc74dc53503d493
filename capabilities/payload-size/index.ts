// payload-size as a Pepr capability: oversize objects and runaway env, volume and annotation
// counts, naming the biggest parts. The rules are in rules.ts, the policy `check` runs in policy.ts.
import { Capability, a } from "pepr";
import { policyActions } from "../../lib/pepr-adapter";
import { payloadSizePolicy } from "./policy";

export const PayloadSize = new Capability({
  name: payloadSizePolicy.name,
  description: payloadSizePolicy.description,
});
const { When } = PayloadSize;
const { validate } = policyActions(PayloadSize, payloadSizePolicy);

// The objects that feed pods: a ConfigMap or Secret too big for etcd fails its pods later.
When(a.ConfigMap).IsCreatedOrUpdated().Validate(validate);
When(a.Secret).IsCreatedOrUpdated().Validate(validate);
// Its checks on Pods and workload templates run with every area's in the shared validation
// (capabilities/pods, capabilities/workloads).
