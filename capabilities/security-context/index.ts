// security-context as a Pepr capability: Pod Security Standards "restricted". The fixes are in
// fix.ts, one file per Pod Security check in checks/, the policy `check` runs in policy.ts.
import { Capability } from "pepr";
import { bindPolicy } from "../../lib/pepr/adapter";
import { securityContextPolicy } from "./policy";

export const SecurityContext = new Capability({
  name: securityContextPolicy.name,
  description: securityContextPolicy.description,
});
// Its bindings, as the module's one declaration of what runs where says (lib/engine/routes.ts).
// A new pod gets every securityContext field its level asks for that it left unset (a Mutate on
// Pod CREATE); its checks run in the shared validation (capabilities/pods, capabilities/workloads).
bindPolicy(SecurityContext, securityContextPolicy);
