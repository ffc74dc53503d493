// Moving pods off the `default` ServiceAccount, ensuring the account in the mutate step; pure
// except for what it asks the ClusterView.
// Why: docs/adr/0004-service-account-ensured-in-the-mutate-step.md
import type { V1PodSpec, V1Volume } from "@kubernetes/client-node";
import { containersOf, describeObject, fieldPath, type KubeObject } from "../../lib/objects/pod";
import { isIgnoredNamespace, NS_KEYS } from "../../lib/settings";
import { formatNote } from "../../lib/objects/verdict";
import {
  noFindings,
  type PodTarget,
  type RuleChange,
  type RuleContext,
  type RuleFindings,
} from "../../lib/engine/policy";
import { isRecord } from "../../lib/objects/record";
import { bounded } from "../../lib/images/limits";

export const CAPABILITY = "service-account";
export const DEFAULT_SERVICE_ACCOUNT = "default";
/** The volume the ServiceAccount admission plugin injects: `kube-api-access-` + 5 random characters. */
export const INJECTED_TOKEN_VOLUME = /^kube-api-access-[a-z0-9]{5}$/;

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

export interface DedicatedServiceAccount {
  name: string;
  /**
   * Set when the namespace annotation was present but is not used (the setting is used): the
   * value, cut to 200 bytes, and why.
   */
  invalidAnnotation?: string;
  refused?: "invalid" | "not-allowed";
}

/**
 * Whether an admin allowed the annotation to name this account: serviceAccount.name, or an entry of
 * serviceAccount.allowedNames ("team-*" is a prefix). "default" counts only as an exact entry: a
 * pattern never lets a namespace keep its pods on the account every pod gets.
 */
export function annotationAllowed(
  name: string,
  settings: { name: string; allowedNames: readonly string[] },
): boolean {
  if (name === settings.name) return true;
  return settings.allowedNames.some(entry =>
    entry.endsWith("*")
      ? name !== DEFAULT_SERVICE_ACCOUNT && name.startsWith(entry.slice(0, -1))
      : name === entry,
  );
}

/**
 * The ServiceAccount pods of a namespace are moved to: the namespace annotation when it is a valid
 * name an admin allowed, else the setting. The module creates the account it returns: a tenant's
 * annotation must not make it create, or move pods onto, another controller's account.
 * Why: docs/adr/0027-namespace-keys-are-admins-by-default.md
 */
export function dedicatedServiceAccount(
  namespaceAnnotations: Record<string, string> | undefined,
  settings: { name: string; allowedNames: readonly string[] },
): DedicatedServiceAccount {
  const annotated = namespaceAnnotations?.[NS_KEYS.serviceAccount];
  if (typeof annotated !== "string") return { name: settings.name };
  // A 256 KiB annotation is trimmed once, never echoed whole.
  const name = annotated.length <= 512 ? annotated.trim() : "";
  const refuse = (refused: "invalid" | "not-allowed") => ({
    name: settings.name,
    invalidAnnotation: bounded(annotated),
    refused,
  });
  if (!(name.length <= 253 && DNS_SUBDOMAIN.test(name))) return refuse("invalid");
  return annotationAllowed(name, settings) ? { name } : refuse("not-allowed");
}

const dedicatedFor = (ctx: RuleContext) =>
  dedicatedServiceAccount(ctx.namespace?.annotations, ctx.settings.serviceAccount);

/** The ServiceAccount a pod spec runs as: serviceAccountName, its deprecated alias, else default. */
export function serviceAccountOf(spec: V1PodSpec): string {
  const s = spec as unknown as Record<string, unknown>;
  for (const field of ["serviceAccountName", "serviceAccount"]) {
    const value = s[field];
    if (typeof value === "string" && value !== "") return value;
  }
  return DEFAULT_SERVICE_ACCOUNT;
}

/** Whether this pod should be moved: on default, in a namespace, with a dedicated name that is not default. */
function shouldMove(target: PodTarget, ctx: RuleContext): string | undefined {
  const settings = ctx.settings.serviceAccount;
  if (!settings.mutate || !ctx.namespaceName) return undefined;
  if (serviceAccountOf(target.template.spec) !== DEFAULT_SERVICE_ACCOUNT) return undefined;
  const { name } = dedicatedFor(ctx);
  return name === DEFAULT_SERVICE_ACCOUNT ? undefined : name;
}

/**
 * Sets automountServiceAccountToken=false and removes the injected token volume and its mounts,
 * unless the pod asked for a token (automountServiceAccountToken: true) or keepTokens is set.
 */
function dropInjectedToken(target: PodTarget, ctx: RuleContext): RuleChange[] {
  const spec = target.template.spec as V1PodSpec & Record<string, unknown>;
  if (spec.automountServiceAccountToken === true || ctx.settings.serviceAccount.keepTokens)
    return [];
  const changes: RuleChange[] = [];
  if (spec.automountServiceAccountToken !== false) {
    spec.automountServiceAccountToken = false;
    changes.push({
      rule: "no-token",
      message: `${fieldPath(target.template, "spec.automountServiceAccountToken")}=false (the pod did not ask for an API token)`,
    });
  }
  const volumes: unknown[] = Array.isArray(spec.volumes) ? spec.volumes : [];
  const injected = new Set(
    volumes
      .filter(isRecord)
      .filter(
        v =>
          typeof v.name === "string" &&
          INJECTED_TOKEN_VOLUME.test(v.name) &&
          isRecord(v.projected) &&
          Array.isArray(v.projected.sources) &&
          v.projected.sources.some(s => isRecord(s) && "serviceAccountToken" in s),
      )
      .map(v => v.name as string),
  );
  if (!injected.size) return changes;
  spec.volumes = volumes.filter(
    v => !(isRecord(v) && injected.has(v.name as string)),
  ) as V1Volume[];
  let mounts = 0;
  for (const ref of containersOf(target.template)) {
    const list: unknown = ref.container.volumeMounts;
    if (!Array.isArray(list)) continue;
    const kept = list.filter(m => !(isRecord(m) && injected.has(m.name as string)));
    mounts += list.length - kept.length;
    ref.container.volumeMounts = kept;
  }
  changes.push({
    rule: "no-token",
    message: `removed the injected token volume ${[...injected].join(", ")} from ${fieldPath(target.template, "spec.volumes")} and its ${mounts} mount(s)`,
  });
  return changes;
}

/** The mutation: a pod on `default` runs as the dedicated ServiceAccount, which is made to exist first. */
export async function moveOffDefault(target: PodTarget, ctx: RuleContext): Promise<RuleChange[]> {
  const name = shouldMove(target, ctx);
  if (!name) return [];
  // A workload's own template (workloads.mutate) keeps its account: its pods are moved when they
  // are created, after the account is made sure to exist. A template that named it instead would
  // lock the workload out the day the account is deleted: the API server looks up the account a
  // pod names before any webhook runs, and refuses the pod when it is missing.
  if (target.applied) return [];
  let created = "";
  // Only a real Pod creates it: a workload's template is a simulation on a copy.
  if (!target.isTemplate) {
    if (ctx.settings.serviceAccount.ensure) {
      const result = await ctx.cluster.ensureServiceAccount(ctx.namespaceName, name, ctx.dryRun);
      if (result.state === "failed") return []; // check() denies with the reason
      if (result.state === "would-create" && ctx.dryRun) return []; // check() warns
      if (result.state === "created")
        created = `; created ServiceAccount ${ctx.namespaceName}/${name}`;
    } else if (!ctx.cluster.serviceAccount(ctx.namespaceName, name)) {
      return []; // not known to exist, and we may not create it: check() warns
    }
  }
  const spec = target.template.spec as V1PodSpec & Record<string, unknown>;
  spec.serviceAccountName = name;
  // The deprecated alias must not contradict the field it aliases.
  if (spec.serviceAccount !== undefined) spec.serviceAccount = name;
  return [
    {
      rule: "dedicated-service-account",
      message: `${fieldPath(target.template, "spec.serviceAccountName")}="${name}" (was default${created})`,
    },
    ...dropInjectedToken(target, ctx),
  ];
}

/** What check() says about the pod's ServiceAccount existing: ensure results become findings. */
export async function checkServiceAccountExists(
  object: KubeObject,
  target: PodTarget,
  ctx: RuleContext,
): Promise<RuleFindings> {
  const findings = noFindings();
  const settings = ctx.settings.serviceAccount;
  if (!ctx.namespaceName) return findings;
  const dedicated = dedicatedFor(ctx);
  if (dedicated.invalidAnnotation !== undefined) {
    findings.warnings.push(
      formatNote(
        CAPABILITY,
        dedicated.refused === "invalid"
          ? `namespace ${ctx.namespaceName} has ${NS_KEYS.serviceAccount}="${dedicated.invalidAnnotation}", which is not a valid ServiceAccount name; using "${dedicated.name}". Fix: kubectl annotate namespace ${ctx.namespaceName} ${NS_KEYS.serviceAccount}=<name> --overwrite`
          : `namespace ${ctx.namespaceName} has ${NS_KEYS.serviceAccount}="${dedicated.invalidAnnotation}", a ServiceAccount an admin did not allow (serviceAccount.allowedNames); using "${dedicated.name}". Fix: an admin adds the name to serviceAccount.allowedNames, or removes the annotation: kubectl annotate namespace ${ctx.namespaceName} ${NS_KEYS.serviceAccount}-`,
      ),
    );
  }
  const current = serviceAccountOf(target.template.spec);
  const ns = ctx.namespaceName;
  const what = describeObject(object);
  const createFix = `kubectl create serviceaccount ${dedicated.name} -n ${ns}`;

  if (target.isTemplate) {
    // No side effect when a workload is applied: its first pod creates the ServiceAccount.
    if (current === dedicated.name && ctx.cluster.serviceAccount(ns, current) === null) {
      findings.warnings.push(
        formatNote(
          CAPABILITY,
          `ServiceAccount ${ns}/${current} does not exist yet; ${settings.ensure ? "it will be created with the first pod of" : "serviceAccount.ensure is off, so create it before applying"} ${what}`,
        ),
      );
    }
    return findings;
  }
  if (ctx.operation !== "CREATE") return findings;

  // The pod should have been moved but is still on default: see moveOffDefault for why.
  const pendingMove = shouldMove(target, ctx);
  if (pendingMove) {
    const account = `ServiceAccount ${ns}/${pendingMove}`;
    const create = `kubectl create serviceaccount ${pendingMove} -n ${ns}`;
    if (!settings.ensure) {
      findings.warnings.push(
        formatNote(
          CAPABILITY,
          `${what} stays on ServiceAccount "default": ${account} does not exist and serviceAccount.ensure is off. Fix: ${create}`,
        ),
      );
      return findings;
    }
    const result = await ctx.cluster.ensureServiceAccount(ns, pendingMove, ctx.dryRun);
    if (result.state === "failed") {
      findings.violations.push({
        rule: "dedicated-service-account",
        message: `${what} runs as ServiceAccount "default", and the dedicated ${account} could not be created (${result.reason})`,
        fix: `${create} (or give the module's ServiceAccount create/patch on serviceaccounts), then create the pod again`,
      });
    } else if (result.state === "would-create" && ctx.dryRun) {
      findings.warnings.push(
        formatNote(
          CAPABILITY,
          `dry run: ${what} would be moved off ServiceAccount "default" to ${account}, which does not exist yet and would be created by the real request`,
        ),
      );
    } else {
      findings.warnings.push(
        formatNote(
          CAPABILITY,
          `${what} stays on ServiceAccount "default": ${account} was not available when the pod was mutated; create the pod again to use it`,
        ),
      );
    }
    return findings;
  }
  // "default" as the dedicated name moves nothing; the ServiceAccount controller makes it anyway.
  if (current !== dedicated.name || current === DEFAULT_SERVICE_ACCOUNT) return findings;
  if (settings.ensure) {
    const result = await ctx.cluster.ensureServiceAccount(ns, current, ctx.dryRun);
    if (result.state === "would-create") {
      findings.warnings.push(
        formatNote(CAPABILITY, `ServiceAccount ${ns}/${current} will be created for ${what}`),
      );
    } else if (result.state === "failed") {
      findings.violations.push({
        rule: "dedicated-service-account",
        message: `ServiceAccount ${ns}/${current} of ${what} does not exist and could not be created (${result.reason})`,
        fix: `${createFix} (or give the module's ServiceAccount create/patch on serviceaccounts)`,
      });
    }
  } else if (ctx.cluster.serviceAccount(ns, current) === null) {
    findings.violations.push({
      rule: "dedicated-service-account",
      message: `ServiceAccount ${ns}/${current} of ${what} does not exist (serviceAccount.ensure is off)`,
      fix: createFix,
    });
  }
  return findings;
}

/**
 * The ServiceAccount the controller creates when a namespace appears (lib/cluster/live.ts), or
 * undefined when pods of that namespace would not be moved (system or ignored namespace, mode off,
 * capability or its mutation or ensure off).
 */
export function serviceAccountForNewNamespace(
  ns: { name: string; labels: Record<string, string>; annotations: Record<string, string> },
  settings: RuleContext["settings"],
): string | undefined {
  const s = settings.serviceAccount;
  if (!s.enabled || !s.mutate || !s.ensure || isIgnoredNamespace(ns.name, settings))
    return undefined;
  if ((ns.labels[NS_KEYS.mode] ?? settings.mode) === "off") return undefined;
  const { name } = dedicatedServiceAccount(ns.annotations, s);
  return name === DEFAULT_SERVICE_ACCOUNT ? undefined : name;
}
