// security-context as a Pepr capability: Pod Security Standards "restricted". The fixes are in
// fix.ts, one file per Pod Security check in checks/, the policy `check` runs in policy.ts.
import { Capability, a } from "pepr";
import { policyActions } from "../../lib/pepr-adapter";
import { securityContextPolicy } from "./policy";

export const SecurityContext = new Capability({
  name: securityContextPolicy.name,
  description: securityContextPolicy.description,
});
const { When } = SecurityContext;
const { mutatePod } = policyActions(SecurityContext, securityContextPolicy);

// A new pod gets every securityContext field "restricted" asks for that it left unset.
When(a.Pod).IsCreated().Mutate(mutatePod);
// Its checks on Pods run with every area's in the shared Pod validation (capabilities/pods).
