// exemptions as a Pepr capability: the module's own webhook judges every Exemption written, so an
// Exemption outside the exemptions namespace, without a reason, naming a rule that does not exist,
// or expiring beyond the maximum is refused at once, with why. The rules are in policy.ts; how
// Exemptions waive violations is lib/exemptions/index.ts (the engine applies them to every capability).
import { Capability } from "pepr";
import { bindPolicy } from "../../lib/pepr/adapter";
import { exemptionsPolicy } from "./policy";

export const Exemptions = new Capability({
  name: exemptionsPolicy.name,
  description: exemptionsPolicy.description,
});
// Its bindings, as the module's one declaration of what runs where says (lib/engine/routes.ts).
// Every Exemption written (its extra kind: a Validate binding).
bindPolicy(Exemptions, exemptionsPolicy);
