// admission: the module's one Mutate and one Validate. Every policy area declares what it acts on
// in its own index.ts (policyOf: its fix on Pods as they are created, its check on Pods,
// workload templates and other kinds); this capability carries those declarations out with one
// When(...) per kind (or per API group: lib/engine/routes.ts bindingsOf), so one request is one
// Mutate and one Validate whatever the number of areas. Each step builds its plan, context and
// Exemptions once and runs every area that declares it, in the order of capabilities/index.ts;
// each finding still names its area (admission-guard/<capability>/<rule>: ...). Why not a binding
// per area: docs/adr/0030. docs/policies.md's table "What runs where" is made from the same routes.
import { Capability } from "pepr";
import type { Policy } from "../../lib/engine/policy";
import { bindAdmission } from "../../lib/pepr/adapter";
import { ADMISSION } from "../../lib/engine/routes";
import { workloadSettingsAtBuild } from "../../lib/settings";
import { pepr } from "../../package.json";

/** The shared capability for these policies (capabilities/index.ts makes it once). */
export function admissionFor(policies: readonly Policy[]): Capability {
  const Admission = new Capability({
    name: ADMISSION,
    description:
      "Fixes and judges Pods, workload templates and other declared kinds with every policy area, once per request",
  });
  // The workload kinds bound, and whether their templates are fixed, are the settings the module
  // is built with (package.json pepr.env): they decide the webhook's rules. A cluster without one
  // of the CRDs never sends one: nothing fails.
  bindAdmission(Admission, policies, workloadSettingsAtBuild(pepr.env));
  return Admission;
}
