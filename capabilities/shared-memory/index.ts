// shared-memory as a Pepr capability: a memory-backed /dev/shm for the pods of data loaders. The
// rules are in rules.ts, the policy `check` runs in policy.ts.
import { Capability, a } from "pepr";
import { policyActions } from "../../lib/pepr-adapter";
import { sharedMemoryPolicy } from "./policy";

export const SharedMemory = new Capability({
  name: sharedMemoryPolicy.name,
  description: sharedMemoryPolicy.description,
});
const { When } = SharedMemory;
const { mutatePod } = policyActions(SharedMemory, sharedMemoryPolicy);

// A new pod that asks for a GPU gets /dev/shm on a memory-backed emptyDir.
When(a.Pod).IsCreated().Mutate(mutatePod);
// Its checks on Pods run with every area's in the shared Pod validation (capabilities/pods).
