// payload-size as a Pepr capability: oversize objects and runaway env, volume and annotation
// counts, naming the biggest parts. The rules are in rules.ts, the policy `check` runs in policy.ts.
import { Capability } from "pepr";
import { bindPolicy } from "../../lib/pepr/adapter";
import { payloadSizePolicy } from "./policy";

export const PayloadSize = new Capability({
  name: payloadSizePolicy.name,
  description: payloadSizePolicy.description,
});
// Its bindings, as the module's one declaration of what runs where says (lib/engine/routes.ts).
// The objects that feed pods: a ConfigMap or Secret too big for etcd fails its pods later (its
// extra kinds: a Validate binding each); its checks on Pods and workloads run in the shared
// validation (capabilities/pods, capabilities/workloads).
bindPolicy(PayloadSize, payloadSizePolicy);
