// The labels rules, pure. The legacy `app` label is carried over to the recommended
// `app.kubernetes.io/component` (and `app.kubernetes.io/name`), and a namespace may require the
// component label. `app` itself stays: ReplicaSet, StatefulSet and Service selectors use it, and a
// controller whose pods lose the label its selector needs creates new pods without end.
import type { V1ObjectMeta } from "@kubernetes/client-node";
import {
  describeObject,
  fieldPath,
  type KubeObject,
  type PodTemplateRef,
} from "../../lib/objects/pod";
import { NS_KEYS } from "../../lib/settings";
import { formatNote } from "../../lib/objects/verdict";
import {
  noFindings,
  type PodTarget,
  type RuleChange,
  type RuleContext,
  type RuleFindings,
} from "../../lib/engine/policy";

export const CAPABILITY = "labels";
export const APP_LABEL = "app";
export const COMPONENT_LABEL = "app.kubernetes.io/component";
export const NAME_LABEL = "app.kubernetes.io/name";

/** The labels of a pod or template as a mutable record, created when missing; undefined when malformed. */
function labelsOf(metadata: V1ObjectMeta): Record<string, string> | undefined {
  const raw = (metadata as { labels?: unknown }).labels;
  if (raw === undefined || raw === null) return (metadata.labels = {});
  if (typeof raw !== "object" || Array.isArray(raw)) return undefined;
  return raw as Record<string, string>;
}

function readLabel(template: PodTemplateRef, key: string): string | undefined {
  const labels = (template.metadata as { labels?: unknown }).labels;
  if (!labels || typeof labels !== "object" || Array.isArray(labels)) return undefined;
  const value = (labels as Record<string, unknown>)[key];
  return typeof value === "string" ? value : undefined;
}

const labelPath = (template: PodTemplateRef, key: string) =>
  fieldPath(template, `metadata.labels["${key}"]`);

function hasOwner(object: KubeObject): boolean {
  const owners = object.metadata?.ownerReferences;
  return Array.isArray(owners) && owners.length > 0;
}

/**
 * Copies `app` to the component and name labels where they are absent. Never overwrites a label
 * that is set (check() says so when the values differ). Removes `app` only when the setting asks,
 * and never on a pod with an owner or on a workload template (their selectors use it).
 */
export function carryAppLabel(target: PodTarget, ctx: RuleContext): RuleChange[] {
  const settings = ctx.settings.labels;
  if (!settings.mutate) return [];
  const labels = labelsOf(target.template.metadata);
  const app = labels?.[APP_LABEL];
  if (!labels || typeof app !== "string" || app === "") return [];
  const changes: RuleChange[] = [];
  for (const key of [COMPONENT_LABEL, NAME_LABEL]) {
    if (labels[key] !== undefined) continue;
    labels[key] = app;
    changes.push({
      rule: "component-from-app",
      message: `${labelPath(target.template, key)}="${app}" (from the app label)`,
    });
  }
  if (
    settings.removeLegacyAppLabel &&
    !target.isTemplate &&
    !hasOwner(target.object) &&
    labels[COMPONENT_LABEL] === app
  ) {
    delete labels[APP_LABEL];
    changes.push({
      rule: "remove-legacy-app-label",
      message: `removed ${labelPath(target.template, APP_LABEL)} (labels.removeLegacyAppLabel; kept as ${COMPONENT_LABEL})`,
    });
  }
  return changes;
}

/**
 * The namespace's component requirement: the required value, "*" for any value, undefined when the
 * namespace requires nothing (or is not known). An empty label value counts as "*".
 */
export function requiredComponent(ctx: RuleContext): string | undefined {
  const value = ctx.namespace?.labels[NS_KEYS.requireComponent];
  if (typeof value !== "string") return undefined;
  return value.trim() === "" ? "*" : value.trim();
}

/** The checks on a pod (after mutation) or a workload's template (with every fix simulated). */
export function checkLabels(object: KubeObject, target: PodTarget, ctx: RuleContext): RuleFindings {
  const findings = noFindings();
  const { template } = target;
  const app = readLabel(template, APP_LABEL);
  const component = readLabel(template, COMPONENT_LABEL);
  const what = describeObject(object);
  const pods = target.isTemplate ? `the pods of ${what}` : what;

  // The mutation never overwrites: say so when the labels disagree.
  if (app && component !== undefined && component !== app) {
    findings.warnings.push(
      formatNote(
        CAPABILITY,
        `${pods} keep ${COMPONENT_LABEL}="${component}", which differs from app="${app}"; the component label was not changed`,
      ),
    );
  }

  const required = requiredComponent(ctx);
  if (required === undefined) return findings;
  const ok = required === "*" ? !!component : component === required;
  if (ok) return findings;

  const requirement =
    required === "*"
      ? `namespace ${ctx.namespaceName} requires a ${COMPONENT_LABEL} label (${NS_KEYS.requireComponent}=*)`
      : `namespace ${ctx.namespaceName} requires ${COMPONENT_LABEL}="${required}" (${NS_KEYS.requireComponent})`;
  const has = component
    ? `${COMPONENT_LABEL}="${component}"`
    : app
      ? `no ${COMPONENT_LABEL} label`
      : `neither an ${COMPONENT_LABEL} label nor an app label`;
  const value = required === "*" ? "<component>" : required;
  const where = labelPath(template, COMPONENT_LABEL);
  const keepSelector = target.isTemplate
    ? " (the selector may keep using the app label; only the template's labels need it)"
    : "";
  const orApp =
    !component && ctx.settings.labels.mutate
      ? ` (or an app label with that value, which admission-guard copies)`
      : "";
  findings.violations.push({
    rule: "require-component",
    message: `${pods} would have ${has}, but ${requirement}`,
    fix: `set ${where}="${value}"${orApp}${keepSelector}`,
  });
  return findings;
}
