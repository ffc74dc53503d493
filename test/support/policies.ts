// Test policies declared as the module's areas declare theirs (capabilities/<area>/index.ts): a
// fix on Pods as they are created and on workload templates, a check on Pods and templates on
// CREATE and UPDATE, and, given, other kinds checked on CREATE and UPDATE.
import {
  policyOf,
  type KindRef,
  type Operation,
  type Policy,
  type PolicyRules,
} from "../../lib/engine/policy";

const CREATE_OR_UPDATE: readonly Operation[] = ["CREATE", "UPDATE"];

export function asArea(rules: PolicyRules, kinds?: readonly KindRef[]): Policy {
  const judges = !!(rules.check || rules.checkGang);
  return policyOf(rules, {
    fix: rules.fix ? { pods: ["CREATE"], templates: CREATE_OR_UPDATE } : undefined,
    check: judges
      ? {
          pods: CREATE_OR_UPDATE,
          templates: CREATE_OR_UPDATE,
          kinds: kinds && { refs: kinds, operations: CREATE_OR_UPDATE },
        }
      : undefined,
  });
}
