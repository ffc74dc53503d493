// The capabilities of the module, in the order they run: their fixes in this order on Pod CREATE
// (mirrors first, so every later capability sees the image the kubelet will pull), then their
// checks, in this order too, in the shared validation of Pods and workloads. pepr.ts registers this
// list with Pepr, and `check` runs the policies of the same list: add your capability with one line
// here (see hello-pepr.ts) and it acts in both.
import { HelloPepr } from "../hello-pepr";
import { policiesOf, validatorsOf } from "../lib/pepr/adapter";
import type { Policy, Validator } from "../lib/engine/policy";
import { Exemptions } from "./exemptions";
import { ImageRegistry } from "./image-registry";
import { Labels } from "./labels";
import { PayloadSize } from "./payload-size";
import { Pods } from "./pods";
import { Reports } from "./reports";
import { ResourceQuota } from "./resource-quota";
import { SecurityContext } from "./security-context";
import { SharedMemory } from "./shared-memory";
import { ServiceAccount } from "./service-account";
import { Workloads } from "./workloads";

export const capabilities = [
  ImageRegistry,
  // Before security-context: the emptyDir it adds is a writable volume, which gets fsGroup in the
  // same pass (after it, a reinvocation would add fsGroup then: fixing twice would differ).
  SharedMemory,
  SecurityContext,
  Labels,
  ServiceAccount,
  ResourceQuota,
  PayloadSize,
  HelloPepr,
  // Judges Exemptions as they are written; the engine applies them to every capability above.
  Exemptions,
  // Last: Pods and workload templates, judged with the policies of every capability above.
  Pods,
  Workloads,
  // Pepr's watcher, not the admission path: PolicyReports of what runs, Events on pods fixed.
  Reports,
];

/** The pure policies of these capabilities, in order: what `check` and the engine run. */
export const policies: Policy[] = policiesOf(capabilities);

/** The validators of the module's own objects (the Exemptions'): what `check` runs on them. */
export const validators: Validator[] = validatorsOf(capabilities);
