// The team-label rules, pure: every pod carries the label that says whose it is (cost, quota and
// on-call dashboards group by it). A pod without it gets its namespace's value; one left without
// is named, and refused where the setting says so. The worked example of
// docs/add-a-capability.md: a fix, a check with a setting, nothing else.
import { noFindings, type PolicyRules, type RuleContext } from "../../lib/engine/policy";
import { describeObject, fieldPath, type PodTemplateRef } from "../../lib/objects/pod";
import { isRecord } from "../../lib/objects/record";
import { formatNote } from "../../lib/objects/verdict";

export const CAPABILITY = "team-label";
/** The fix's rule: the label copied from the namespace. */
export const FROM_NAMESPACE = "from-namespace";
/** The check's rule: the pod carries the label (what an Exemption may waive). */
export const REQUIRED = "required";

/** The pod's value of the label; undefined when absent, empty or the labels are malformed. */
function valueOf(template: PodTemplateRef, key: string): string | undefined {
  const labels: unknown = template.metadata.labels;
  const value = isRecord(labels) ? labels[key] : undefined;
  return typeof value === "string" && value !== "" ? value : undefined;
}

/** The namespace's value of the label, when it has one and the module knows it. */
const namespaceValue = (ctx: RuleContext, key: string): string | undefined =>
  ctx.namespace?.labels[key] || undefined;

export const teamLabelRules: PolicyRules = {
  name: CAPABILITY,
  // settings.teamLabel.enabled switches the whole capability (off by default).
  switchedBy: "teamLabel",
  rules: [REQUIRED],
  description: "Gives every pod its namespace's team label; names (or refuses) a pod left without",

  // Idempotent (a pod that has the label is left alone, whatever its value: the user's choice),
  // and never throws on malformed labels (they are left for the API server to refuse).
  fix({ template }, ctx) {
    const { key } = ctx.settings.teamLabel;
    const value = namespaceValue(ctx, key);
    const labels: unknown = (template.metadata.labels ??= {});
    if (!value || !isRecord(labels) || labels[key] !== undefined) return [];
    labels[key] = value;
    return [
      {
        rule: FROM_NAMESPACE,
        message: `${fieldPath(template, `metadata.labels["${key}"]`)}="${value}" (from namespace ${ctx.namespaceName})`,
      },
    ];
  },

  // Runs on the pod as it will be stored, after every fix (and on a workload's template with the
  // fixes simulated): what is still missing is what the fix could not give.
  check(object, target, ctx) {
    const { key, missing } = ctx.settings.teamLabel;
    if (!target || missing === "off" || valueOf(target.template, key)) return noFindings();
    const pods = target.isTemplate
      ? `the pods of ${describeObject(object)}`
      : describeObject(object);
    const message = `${pods} would have no label ${key}, and namespace ${ctx.namespaceName} has none to give`;
    const fix = `set ${fieldPath(target.template, `metadata.labels["${key}"]`)}, or label the namespace: kubectl label namespace ${ctx.namespaceName} ${key}=<team>`;
    const findings = noFindings();
    if (missing === "deny") findings.violations.push({ rule: REQUIRED, message, fix });
    else findings.warnings.push(formatNote(CAPABILITY, `${message}. Fix: ${fix}`));
    return findings;
  },
};
