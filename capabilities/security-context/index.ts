// security-context as a Pepr capability: Pod Security Standards, to the level the namespace
// enforces (restricted by default). The fixes are in fix.ts, one file per Pod Security check in
// checks/, the policy in policy.ts.
import { policyOf } from "../../lib/engine/policy";
import { capabilityOf } from "../../lib/pepr/adapter";
import { securityContextRules } from "./policy";

export const securityContextPolicy = policyOf(securityContextRules, {
  // A new pod gets every securityContext field its namespace's level asks for that it left unset,
  // with the user its image was built for.
  fix: { pods: ["CREATE"], templates: ["CREATE", "UPDATE"] },
  // Pods as they will be stored (an UPDATE that adds ephemeral containers too), and workloads'
  // pods as they will be, against that level.
  check: { pods: ["CREATE", "UPDATE"], templates: ["CREATE", "UPDATE"] },
});

export const SecurityContext = capabilityOf(securityContextPolicy);
