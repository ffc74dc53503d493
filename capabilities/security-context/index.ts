// The security-context capability: Pod Security Standards "restricted", fix first.
//   fix:   fills the unset fields restricted needs (fix.ts)
//   check: PSA's restricted checks at version latest, one file each (checks/)
import type { Policy } from "../../lib/policy";
import { emptyFindings, type Violation } from "../../lib/verdict";
import { evaluatePod, type CheckOutcome } from "./checks";
import { CAPABILITY, fixPodSecurity } from "./fix";

export function toViolation(outcome: CheckOutcome): Violation {
  const detail = outcome.forbiddenDetail ? `: ${outcome.forbiddenDetail}` : "";
  return {
    capability: CAPABILITY,
    rule: outcome.id,
    message: `${outcome.forbiddenReason ?? "forbidden"}${detail} (Pod Security Standards restricted)`,
    fix: outcome.fix ?? "see the Pod Security Standards restricted profile",
  };
}

export const securityContextPolicy: Policy = {
  name: CAPABILITY,
  description:
    "Pod Security Standards restricted: fills unset securityContext fields, denies what cannot be fixed",

  fix({ template }, ctx) {
    const settings = ctx.settings.securityContext;
    if (!settings.enabled || !settings.mutate) return [];
    return fixPodSecurity(template, settings);
  },

  check(object, target, ctx) {
    const findings = emptyFindings();
    if (!ctx.settings.securityContext.enabled || !target) return findings;
    // A Pod UPDATE that leaves the spec as it was (labels, annotations) is not re-judged; PSA goes
    // further and also lets image-only changes through.
    if (!target.isTemplate && ctx.operation === "UPDATE" && ctx.oldObject) {
      if (JSON.stringify(ctx.oldObject.spec) === JSON.stringify(object.spec)) return findings;
    }
    findings.violations = evaluatePod(target.template, "restricted")
      .filter(outcome => !outcome.allowed)
      .map(toViolation);
    return findings;
  },
};
