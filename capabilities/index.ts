// The capabilities of the module. First the policy areas, in the order they run: their fixes in
// this order on Pod CREATE (mirrors first, so every later area sees the image the kubelet will
// pull), then their checks in this order too. Each declares what it acts on in its own index.ts;
// the shared `admission` capability runs them all in one Mutate and one Validate. pepr.ts
// registers this list with Pepr and `check` runs the same policies: add your capability with one
// line in `areas` (docs/add-a-capability.md).
import { HelloPepr } from "../hello-pepr";
import { Accelerators } from "./accelerators";
import { policiesOf, validatorsOf } from "../lib/pepr/adapter";
import type { Policy, Validator } from "../lib/engine/policy";
import { admissionFor } from "./admission";
import { Exemptions } from "./exemptions";
import { ImageRegistry } from "./image-registry";
import { Labels } from "./labels";
import { PayloadSize } from "./payload-size";
import { Reports } from "./reports";
import { ResourceQuota } from "./resource-quota";
import { SecurityContext } from "./security-context";
import { SharedMemory } from "./shared-memory";
import { ServiceAccount } from "./service-account";
import { TeamLabel } from "./team-label";

/**
 * The example capabilities, registered only where asked: ADMISSION_GUARD_EXAMPLES=hello-pepr (the
 * tests, `npm run dev:hello`). Read when the module loads, by the controller and by `check` alike.
 */
const EXAMPLES = new Map([["hello-pepr", HelloPepr]]);
const exampleCapabilities = (process.env.ADMISSION_GUARD_EXAMPLES ?? "")
  .split(",")
  .map(name => name.trim())
  .filter(Boolean)
  .map(name => {
    const example = EXAMPLES.get(name);
    if (!example)
      throw new Error(
        `ADMISSION_GUARD_EXAMPLES: no example capability "${name.slice(0, 64)}" (known: ${[...EXAMPLES.keys()].join(", ")})`,
      );
    return example;
  });

const areas = [
  ImageRegistry,
  // Before security-context: the emptyDir it adds is a writable volume, which gets fsGroup in the
  // same pass (after it, a reinvocation would add fsGroup then: fixing twice would differ).
  SharedMemory,
  SecurityContext,
  Labels,
  // Off unless teamLabel.enabled: the worked example of docs/add-a-capability.md.
  TeamLabel,
  ServiceAccount,
  // Before resource-quota: node fit judges the pod with the tolerations this fix adds.
  Accelerators,
  ResourceQuota,
  PayloadSize,
  ...exampleCapabilities,
];

/** The pure policies of the areas, in order: what the admission steps and `check` run. */
export const policies: Policy[] = policiesOf(areas);

/** Those of the examples registered (none in a deployed module unless asked). */
export const examples: Policy[] = policiesOf(exampleCapabilities);

/** The validators of the module's own objects (the Exemptions'): what `check` runs on them. */
export const validators: Validator[] = validatorsOf([Exemptions]);

export const capabilities = [
  ...areas,
  // Judges Exemptions as they are written; the engine applies them to every area above.
  Exemptions,
  // The one Mutate and one Validate that run every area above on what it declares.
  admissionFor(policies),
  // Pepr's watcher, not the admission path: PolicyReports of what runs, Events on pods fixed.
  Reports,
];
