// shared-memory as a Pepr capability: a memory-backed /dev/shm for the pods of data loaders. The
// rules are in rules.ts and policy.ts.
import { policyOf } from "../../lib/engine/policy";
import { capabilityOf } from "../../lib/pepr/adapter";
import { sharedMemoryRules } from "./policy";

export const sharedMemoryPolicy = policyOf(sharedMemoryRules, {
  // A new pod that asks for a GPU gets /dev/shm on a memory-backed emptyDir.
  fix: { pods: ["CREATE"], templates: ["CREATE", "UPDATE"] },
  // The /dev/shm it has fits within the pod's memory limit.
  check: { pods: ["CREATE", "UPDATE"], templates: ["CREATE", "UPDATE"] },
});

export const SharedMemory = capabilityOf(sharedMemoryPolicy);
