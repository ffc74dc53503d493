// The shared-memory policy (pure; index.ts is its Pepr capability): wiring only, the rules are in
// rules.ts.
import { noFindings, type PolicyRules } from "../../lib/engine/policy";
import { CAPABILITY, checkSharedMemory, mountSharedMemory, RULE } from "./rules";

export const sharedMemoryRules: PolicyRules = {
  name: CAPABILITY,
  switchedBy: "sharedMemory",
  rules: [RULE],
  description:
    "Mounts a memory-backed emptyDir at /dev/shm in pods that ask for a GPU (the runtime's own is 64 MiB; PyTorch DataLoader workers share batches there)",
  fix: mountSharedMemory,
  check: (object, target, ctx) => (target ? checkSharedMemory(object, target, ctx) : noFindings()),
};
