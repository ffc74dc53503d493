// The service-account policy (pure; index.ts is its Pepr capability): wiring only, the rules are in
// rules.ts and secret-access.ts.
import { noFindings, type PolicyRules } from "../../lib/engine/policy";
import { mergeFindings } from "../../lib/objects/verdict";
import { CAPABILITY, checkServiceAccountExists, moveOffDefault } from "./rules";
import { checkSecretAccess } from "./secret-access";

export const serviceAccountRules: PolicyRules = {
  name: CAPABILITY,
  switchedBy: "serviceAccount",
  rules: ["dedicated-service-account", "secret-access"],
  description:
    "Moves pods off the default ServiceAccount to a dedicated one; checks the ServiceAccount may read the secrets the pod uses",
  fix: moveOffDefault,
  async check(object, target, ctx) {
    const findings = noFindings();
    if (!target) return findings;
    // Independent questions (one ensure, one access review): asked at the same time.
    const [exists, access] = await Promise.all([
      checkServiceAccountExists(object, target, ctx),
      checkSecretAccess(object, target, ctx),
    ]);
    return mergeFindings(mergeFindings(findings, exists), access);
  },
};
