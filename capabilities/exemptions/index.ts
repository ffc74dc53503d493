// exemptions as a Pepr capability: the module's own webhook judges every Exemption written, so an
// Exemption outside the exemptions namespace, without a reason, naming a rule that does not exist,
// or expiring beyond the maximum is refused at once, with why. The rules are in policy.ts; how
// Exemptions waive violations is lib/exemptions/index.ts (the engine applies them to every capability).
import { Capability } from "pepr";
import { bindValidator } from "../../lib/pepr/adapter";
import { exemptionsValidator } from "./policy";

export const Exemptions = new Capability({
  name: exemptionsValidator.name,
  description: exemptionsValidator.description,
});
// A Validate of every Exemption written (When(Exemption).IsCreatedOrUpdated(): bindValidator),
// answered by the validator alone: in every namespace whatever its mode label; no Exemption
// waives it.
bindValidator(Exemptions, exemptionsValidator);
