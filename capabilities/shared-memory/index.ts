// shared-memory as a Pepr capability: a memory-backed /dev/shm for the pods of data loaders. The
// rules are in rules.ts, the policy `check` runs in policy.ts.
import { Capability } from "pepr";
import { bindPolicy } from "../../lib/pepr/adapter";
import { sharedMemoryPolicy } from "./policy";

export const SharedMemory = new Capability({
  name: sharedMemoryPolicy.name,
  description: sharedMemoryPolicy.description,
});
// Its bindings, as the module's one declaration of what runs where says (lib/engine/routes.ts).
// A new pod that asks for a GPU gets /dev/shm on a memory-backed emptyDir (a Mutate on Pod CREATE);
// its checks run in the shared validation (capabilities/pods, capabilities/workloads).
bindPolicy(SharedMemory, sharedMemoryPolicy);
