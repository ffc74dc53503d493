// The security-context policy (pure; index.ts is its Pepr capability): Pod Security Standards
// "restricted", fix first.
//   fix:   fills the unset fields restricted needs (fix.ts)
//   check: PSA's restricted checks at version latest, one file each (checks/)
import type { V1PodSpec } from "@kubernetes/client-node";
import { isPod, podTemplateOf } from "../../lib/pod";
import { noFindings, type Policy, type RuleViolation } from "../../lib/policy";
import { evaluatePod, RESTRICTED_CHECK_IDS, type CheckOutcome } from "./checks";
import { CAPABILITY, fixPodSecurity } from "./fix";

/** What a `kubectl debug` user changes: its profiles set the securityContext of the container it adds. */
export const DEBUG_PROFILE_FIX =
  "with kubectl debug, use --profile=restricted (it sets what Pod Security restricted asks of the debug container)";

export function toViolation(outcome: CheckOutcome): RuleViolation {
  const detail = outcome.forbiddenDetail ? `: ${outcome.forbiddenDetail}` : "";
  return {
    rule: outcome.id,
    message: `${outcome.forbiddenReason ?? "forbidden"}${detail} (Pod Security Standards restricted)`,
    fix: outcome.fix ?? "see the Pod Security Standards restricted profile",
  };
}

export const securityContextPolicy: Policy = {
  name: CAPABILITY,
  rules: RESTRICTED_CHECK_IDS,
  description:
    "Pod Security Standards restricted: fills unset securityContext fields, denies what cannot be fixed",

  fix({ template }, ctx) {
    const settings = ctx.settings.securityContext;
    if (!settings.enabled || !settings.mutate) return [];
    return fixPodSecurity(template, settings);
  },

  check(object, target, ctx) {
    const findings = noFindings();
    if (!ctx.settings.securityContext.enabled || !target) return findings;
    let template = target.template;
    let debugging = false;
    // A Pod UPDATE can add ephemeral containers (`kubectl debug`) and change images; the security
    // context of the other containers cannot change, and was judged when the pod was created (PSA
    // too lets image changes through). So only the ephemeral containers are judged, with the
    // pod-level fields they inherit; the engine drops what the stored pod already had.
    if (!target.isTemplate && ctx.operation === "UPDATE" && isPod(object) && ctx.oldObject) {
      const ephemeral = (spec?: V1PodSpec) => spec?.ephemeralContainers?.length ?? 0;
      template = { ...template, spec: { ...template.spec, containers: [], initContainers: [] } };
      debugging = ephemeral(template.spec) > ephemeral(podTemplateOf(ctx.oldObject)?.spec);
    }
    findings.violations = evaluatePod(template, "restricted")
      .filter(outcome => !outcome.allowed)
      .map(toViolation)
      .map(v => (debugging ? { ...v, fix: `${v.fix}; ${DEBUG_PROFILE_FIX}` } : v));
    return findings;
  },
};
