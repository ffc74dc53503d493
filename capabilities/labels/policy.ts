// The labels policy (pure; index.ts is its Pepr capability): wiring only, the rules are in rules.ts.
import { noFindings, type PolicyRules } from "../../lib/engine/policy";
import { CAPABILITY, carryAppLabel, checkLabels } from "./rules";

export const labelsRules: PolicyRules = {
  name: CAPABILITY,
  switchedBy: "labels",
  rules: ["require-component"],
  description:
    "Carries the app label to app.kubernetes.io/component; a namespace may require the component label",
  fix: carryAppLabel,
  // A warning about a label left alone cannot come from fix() (it returns only Changes): check()
  // sees the pod as stored, so it reports the disagreement, in the webhook and in `check` alike.
  check: (object, target, ctx) => (target ? checkLabels(object, target, ctx) : noFindings()),
};
