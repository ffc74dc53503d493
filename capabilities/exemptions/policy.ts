// The exemptions validator (pure; index.ts is its Pepr capability): judges Exemption objects as they
// are written, in every namespace and whatever its mode label, so a mistake is refused with its
// reason instead of an Exemption that silently never counts. What an Exemption is, and how it
// waives, is lib/exemptions/index.ts.
import {
  EXEMPTION_GVK,
  EXEMPTIONS_CAPABILITY,
  isExemptionObject,
  notOwnedFix,
  notOwnedReason,
  readExemption,
  UNWAIVABLE_RULES,
} from "../../lib/exemptions";
import type { RuleViolation, Validator } from "../../lib/engine/policy";

export const CAPABILITY = EXEMPTIONS_CAPABILITY;
const DAY_MS = 24 * 60 * 60 * 1000;

export const exemptionsValidator: Validator = {
  name: CAPABILITY,
  description:
    "Refuses Exemptions where they would not count (outside the exemptions namespace, or in one the install does not own), without a reason, or expiring too late",
  rules: [
    "exemption-namespace",
    "namespace-not-owned",
    "invalid-exemption",
    "unknown-rule",
    "not-waivable",
    "expiry",
  ],
  kinds: [EXEMPTION_GVK],

  validate(object, ctx) {
    const violations: RuleViolation[] = [];
    // Another group's Exemption (UDS Core has one) is none of ours.
    if (!isExemptionObject(object) || ctx.operation === "DELETE") return violations;
    const settings = ctx.settings.exemptions;
    const name = object.metadata?.name ?? "";
    const where = `Exemption ${ctx.namespaceName}/${name}`;
    const v = (rule: string, message: string, fix: string): RuleViolation => ({
      rule,
      message,
      fix,
    });

    if (ctx.namespaceName !== settings.namespace)
      violations.push(
        v(
          "exemption-namespace",
          `${where} is not in namespace ${settings.namespace}, the only one whose Exemptions count: whoever may write there grants exemptions, never a workload's author`,
          `ask a platform admin to create it in ${settings.namespace} (kubectl -n ${settings.namespace} apply -f <file>)`,
        ),
      );
    else {
      // The right namespace, but one a tenant (or kubectl create namespace) made: accepted, it
      // would silently waive nothing. A namespace not known yet is not judged (the live view's
      // cache settles it first; a `check` snapshot may lack it).
      // Why: docs/adr/0028-exemptions-refused-where-they-do-not-count.md
      const owner = ctx.cluster.exemptionsOwner;
      const reason = owner ? notOwnedReason(ctx.namespace, owner) : undefined;
      if (owner && reason)
        violations.push(
          v(
            "namespace-not-owned",
            `${where} would waive nothing: ${reason}`,
            notOwnedFix(ctx.namespaceName, owner),
          ),
        );
    }

    const read = readExemption(object);
    for (const problem of read.problems)
      violations.push(
        v("invalid-exemption", `${where}: ${problem}`, "correct the field named and apply again"),
      );
    if (!read.exemption) return violations;

    const byName = new Map(ctx.policies.map(p => [p.name, p]));
    for (const [i, waiver] of read.exemption.waive.entries()) {
      const policy = byName.get(waiver.capability);
      if (!policy || policy.name === CAPABILITY) {
        const known = ctx.policies.map(p => p.name).filter(n => n !== CAPABILITY);
        violations.push(
          v(
            "unknown-rule",
            `${where}: spec.waive[${i}].capability "${waiver.capability}" is no capability of this module`,
            `use one of ${known.join(", ")}`,
          ),
        );
        continue;
      }
      const rules = policy.rules.filter(r => !UNWAIVABLE_RULES.includes(r));
      const unknown = (waiver.rules ?? []).filter(r => !rules.includes(r));
      const notWaivable = (waiver.rules ?? []).filter(r => policy.notWaivable?.[r]);
      for (const rule of notWaivable)
        violations.push(
          v(
            "not-waivable",
            `${where}: spec.waive[${i}] names ${policy.name}/${rule}, which no Exemption waives: ${policy.notWaivable![rule]}`,
            rule.startsWith("quota")
              ? "leave it out; to admit the workload, an admin raises the quota (the denial prints the kubectl patch)"
              : "leave it out, and fix the workload as the denial says",
          ),
        );
      if (unknown.length)
        violations.push(
          v(
            "unknown-rule",
            `${where}: spec.waive[${i}].rules names ${unknown.map(r => `"${r}"`).join(", ")}, not ${rules.length === 1 ? "the rule" : "rules"} of ${policy.name}`,
            `use ${rules.join(", ")} (the rule a denial names after admission-guard/${policy.name}), or leave rules out to waive them all`,
          ),
        );
    }

    // An UPDATE is judged against the time it is written, as a CREATE is: renewing moves the limit.
    const now = Date.now();
    const latest = new Date(now + settings.maxLifetimeDays * DAY_MS);
    const { expires, expiresAt } = read.exemption;
    if (expiresAt <= now)
      violations.push(
        v(
          "expiry",
          `${where}: spec.expires ${expires} is in the past`,
          `set spec.expires to a time before ${latest.toISOString()}`,
        ),
      );
    else if (expiresAt > latest.getTime())
      violations.push(
        v(
          "expiry",
          `${where}: spec.expires ${expires} is more than exemptions.maxLifetimeDays (${settings.maxLifetimeDays}) days away`,
          `set spec.expires to ${latest.toISOString()} or earlier; renew it then if it is still needed`,
        ),
      );
    return violations;
  },
};
