// The accelerators policy (pure; index.ts is its Pepr capability): wiring only, the rules are in
// rules.ts.
import { noFindings, type PolicyRules } from "../../lib/engine/policy";
import { CAPABILITY, checkAccelerators, fixAccelerators, RULES } from "./rules";

export const acceleratorsRules: PolicyRules = {
  name: CAPABILITY,
  switchedBy: "accelerators",
  rules: RULES,
  description:
    "GPU pods reach their nodes (the tolerations the GPU nodes' taints ask for, runtimeClassName) and keep them (memory request = limit, a CPU request, a controller, at most N per pod); pods that take GPU nodes without a GPU are named",
  fix: fixAccelerators,
  check: (object, target, ctx) => (target ? checkAccelerators(object, target, ctx) : noFindings()),
};
