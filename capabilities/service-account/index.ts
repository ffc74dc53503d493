// service-account as a Pepr capability: pods moved off `default` to a dedicated ServiceAccount,
// and the secrets they read checked against what that account may read. The rules are in
// rules.ts and secret-access.ts, the policy `check` runs in policy.ts.
import { Capability } from "pepr";
import { bindPolicy } from "../../lib/pepr/adapter";
import { serviceAccountPolicy } from "./policy";

export const ServiceAccount = new Capability({
  name: serviceAccountPolicy.name,
  description: serviceAccountPolicy.description,
});
// Its bindings, as the module's one declaration of what runs where says (lib/engine/routes.ts).
// A new pod on `default` moves to the dedicated account, created first when missing (a Mutate on
// Pod CREATE); its checks run in the shared validation (capabilities/pods, capabilities/workloads).
bindPolicy(ServiceAccount, serviceAccountPolicy);
