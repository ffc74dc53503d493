// payload-size as a Pepr capability: oversize objects and runaway env, volume and annotation
// counts, naming the biggest parts. The rules are in rules.ts and policy.ts.
import { CONFIG_MAP, SECRET, policyOf } from "../../lib/engine/policy";
import { capabilityOf } from "../../lib/pepr/adapter";
import { payloadSizeRules } from "./policy";

export const payloadSizePolicy = policyOf(payloadSizeRules, {
  // Nothing to fix. Pods and workloads too big or with runaway counts; and the objects that feed
  // pods: a ConfigMap or Secret too big for etcd fails its pods later.
  check: {
    pods: ["CREATE", "UPDATE"],
    templates: ["CREATE", "UPDATE"],
    kinds: { refs: [CONFIG_MAP, SECRET], operations: ["CREATE", "UPDATE"] },
  },
});

export const PayloadSize = capabilityOf(payloadSizePolicy);
