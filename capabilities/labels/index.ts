// labels as a Pepr capability: the app label carried to app.kubernetes.io/component, and the
// component a namespace requires. The rules are in rules.ts, the policy `check` runs in policy.ts.
import { Capability } from "pepr";
import { bindPolicy } from "../../lib/pepr/adapter";
import { labelsPolicy } from "./policy";

export const Labels = new Capability({
  name: labelsPolicy.name,
  description: labelsPolicy.description,
});
// Its bindings, as the module's one declaration of what runs where says (lib/engine/routes.ts).
// A new pod gets app.kubernetes.io/component (and /name) from its app label, app kept (a Mutate on
// Pod CREATE); its checks run in the shared validation (capabilities/pods, capabilities/workloads).
bindPolicy(Labels, labelsPolicy);
