// labels as a Pepr capability: the app label carried to app.kubernetes.io/component, and the
// component a namespace requires. The rules are in rules.ts, the policy `check` runs in policy.ts.
import { Capability, a } from "pepr";
import { policyActions } from "../../lib/pepr-adapter";
import { labelsPolicy } from "./policy";

export const Labels = new Capability({
  name: labelsPolicy.name,
  description: labelsPolicy.description,
});
const { When } = Labels;
const { mutatePod } = policyActions(Labels, labelsPolicy);

// A new pod gets app.kubernetes.io/component (and /name) from its app label; app is kept.
When(a.Pod).IsCreated().Mutate(mutatePod);
// Its checks on Pods run with every area's in the shared Pod validation (capabilities/pods).
