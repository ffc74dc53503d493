// service-account as a Pepr capability: pods moved off `default` to a dedicated ServiceAccount,
// and the secrets they read checked against what that account may read. The rules are in
// rules.ts and secret-access.ts, the policy `check` runs in policy.ts.
import { Capability, a } from "pepr";
import { policyActions } from "../../lib/pepr-adapter";
import { serviceAccountPolicy } from "./policy";

export const ServiceAccount = new Capability({
  name: serviceAccountPolicy.name,
  description: serviceAccountPolicy.description,
});
const { When } = ServiceAccount;
const { mutatePod } = policyActions(ServiceAccount, serviceAccountPolicy);

// A new pod on `default` moves to the dedicated account, which is created first when missing.
When(a.Pod).IsCreated().Mutate(mutatePod);
// Its checks on Pods run with every area's in the shared Pod validation (capabilities/pods).
