// The shape every policy area (capability) has. Rules are plain functions over plain objects:
// no Pepr, no network — what they need from the cluster comes through ctx.cluster.
import type { ClusterView } from "../cluster/view";
import type { NamespaceInfo } from "../objects/keys";
import type { KubeObject, PodTemplateRef } from "../objects/pod";
import type { Settings } from "../settings";
import type { Change, Skip, Violation } from "../objects/verdict";
import type { PodRole } from "../workload-kinds/roles";
import { groupOf } from "../workload-kinds/kind-spec";

/** A change as a rule returns it: the engine stamps the capability (the policy's name) on it. */
export type RuleChange = Omit<Change, "capability">;
/** A violation as a rule returns it: the engine stamps the capability on it. */
export type RuleViolation = Omit<Violation, "capability">;
/** A rule a check did not evaluate, and why: the engine stamps the capability on it. */
export type RuleSkip = Omit<Skip, "capability">;
/** What a policy's check returns; warnings are formatted notes (`formatNote`). */
export interface RuleFindings {
  changes: RuleChange[];
  violations: RuleViolation[];
  warnings: string[];
  /** Rules it did not evaluate on this object (a report says `skip` for them, not `pass`). */
  skipped?: RuleSkip[];
}

/** The settings sections that turn a capability on and off (`<section>.enabled`). */
export type SwitchableSection = {
  [K in keyof Settings]: Settings[K] extends { enabled: boolean } ? K : never;
}[keyof Settings];

export const noFindings = (): RuleFindings => ({ changes: [], violations: [], warnings: [] });

export type Operation = "CREATE" | "UPDATE" | "DELETE" | "CONNECT";

export interface RuleContext {
  settings: Settings;
  /** The object's namespace name ("" for cluster-scoped objects). */
  namespaceName: string;
  /** Its labels and annotations; undefined when not known (cache not synced, not in the snapshot). */
  namespace?: NamespaceInfo;
  cluster: ClusterView;
  operation: Operation;
  /**
   * On an UPDATE, the stored version to compare with (lib/engine/update-gate.ts): the one way a
   * rule tells an update from a creation.
   */
  stored?: StoredVersion;
  /** A dry-run request: no side effects (e.g. no ServiceAccount is created). */
  dryRun: boolean;
  /**
   * Judging an object already stored, for the reports (lib/reports): nothing is created, and what
   * the object already counts against (its quota) is not counted again.
   */
  scan: boolean;
  /** Every policy of the module (the Exemptions' validation names their capabilities and rules). */
  policies: readonly Policy[];
  /**
   * When the request's waiting ends (epoch ms): its arrival plus images.budgetMs, one for every
   * role, fix and check of the request (image lookups, and the API calls made for it).
   */
  deadline?: number;
  /**
   * Who sent the request (its userInfo.username); unset for `check` and the reports' scan. Only a
   * Kubernetes controller's word that it made an object counts (lib/engine/update-gate.ts).
   */
  user?: string;
}

/** A pod spec to fix or check, and the object it belongs to. */
export interface PodTarget {
  /** The Pod or the workload. */
  object: KubeObject;
  /** The pod spec and the metadata its pods carry (the Pod's own, or the template's). */
  template: PodTemplateRef;
  /** true for a workload's template: the fix is simulated on a copy to predict its pods. */
  isTemplate: boolean;
  /**
   * A workload's own template, fixed as the workload is applied (setting workloads.mutate), not a
   * copy predicting its pods: a fix that must happen on the pods themselves stays out of it.
   */
  applied?: boolean;
  /**
   * On a workload's simulated copy: the fixes made to it, as `capability/rule` (a Pod says the same
   * in its trace annotation, which a copy never gets).
   */
  fixed?: ReadonlySet<string>;
  /**
   * One role of a workload with several pod templates (a PyTorchJob's Worker, a RayCluster's
   * head): its name and how many pods it makes. What concerns the whole gang (quota) is judged
   * once, by checkGang; check judges each role's template on its own.
   */
  role?: PodRole;
  /**
   * Roles whose template is the same as this one's (a RayCluster's 64 worker groups alike): fixed
   * and judged once, through this target; what is found is said once, naming them.
   */
  alike?: PodTarget[];
  /** On one of those: the target it was judged through. */
  sameAs?: PodTarget;
}

/**
 * What a capability acts on, and when: its one declaration, written in its
 * capabilities/<area>/index.ts (policyOf). The module's one Mutate and one Validate step run each
 * policy only on what it declares (lib/engine/plan.ts), its webhook rules and Pepr's bindings are
 * made from the declarations of every capability (lib/engine/routes.ts), `check` replays them, and
 * docs/policies.md's table of what runs where is generated from them.
 */
export interface Acts {
  /** Where its `fix` runs (the mutating step): Pods, and workload templates with workloads.mutate. */
  fix?: Omit<Targets, "kinds">;
  /** Where its `check` runs (the validating step). */
  check?: Targets;
}

/** The objects a step of a capability receives, each on the operations listed. */
export interface Targets {
  /** Pods. */
  pods?: readonly Operation[];
  /**
   * The pod templates of every workload kind in force (the built-in ones, the ML kinds, the
   * platform's own: lib/workload-kinds/table.ts): checked as their pods will be, every capability's
   * fixes applied; fixed in place only when the module is built with workloads.mutate.
   */
  templates?: readonly Operation[];
  /** Other kinds (payload-size's ConfigMaps and Secrets), on these operations. */
  kinds?: { refs: readonly KindRef[]; operations: readonly Operation[] };
}

/** A policy's rules: its name, its pure fix and check. policyOf adds what it acts on. */
export type PolicyRules = Omit<Policy, "acts">;

/**
 * A policy: its rules and what it acts on (capabilities/<area>/index.ts). Refuses, at load, a
 * declaration that does not match the rules (a fix declared nowhere, a check on nothing).
 */
export function policyOf(rules: PolicyRules, acts: Acts): Policy {
  const where = `admission-guard: capability ${rules.name}`;
  if (!!rules.fix !== !!acts.fix)
    throw new Error(
      `${where}: ${rules.fix ? "has a fix but declares no acts.fix" : "declares acts.fix but has no fix"}`,
    );
  if (!!(rules.check || rules.checkGang) !== !!acts.check)
    throw new Error(
      `${where}: ${acts.check ? "declares acts.check but has no check" : "has a check but declares no acts.check"}`,
    );
  if (rules.checkGang && !acts.check?.templates?.length)
    throw new Error(
      `${where}: has a checkGang (a workload judged whole) but no acts.check.templates`,
    );
  return { ...rules, acts };
}

/** Whether a policy's declaration has it act in a step on this object and operation. */
export function declares(
  policy: Policy,
  step: "fix" | "check",
  target: "pods" | "templates" | "kinds",
  operation: Operation,
  obj?: KubeObject,
): boolean {
  const targets: Targets | undefined = policy.acts[step];
  if (target === "kinds") {
    const kinds = targets?.kinds;
    return (
      !!kinds?.operations.includes(operation) && !!obj && kinds.refs.some(ref => isKind(obj, ref))
    );
  }
  return !!targets?.[target]?.includes(operation);
}

export interface Policy {
  /** What it acts on, and when (policyOf, in its capability's index.ts). */
  acts: Acts;
  /** The capability name used in every message: "security-context", "labels", ... */
  name: string;
  description: string;
  /** Only act in these namespaces (empty or absent: every namespace not ignored). */
  namespaces?: string[];
  /**
   * Fix a pod spec in place and say what was changed. Called on Pod CREATE (on the request's own
   * copy) and on a copy of a workload's template. Must be idempotent and must not change what the
   * user set explicitly. Must not throw on malformed input.
   */
  fix?(target: PodTarget, ctx: RuleContext): RuleChange[] | Promise<RuleChange[]>;
  /**
   * Check an object as it will be stored: a Pod (after all fixes), or a workload whose template
   * copy has had all fixes applied (`target` set), or an object of a kind its declaration names (`acts.check.kinds`; `target` undefined).
   */
  check?(
    object: KubeObject,
    target: PodTarget | undefined,
    ctx: RuleContext,
  ): RuleFindings | Promise<RuleFindings>;
  /**
   * Check a workload with several pod templates as a whole (every role, each fixed as its pods
   * will be): what a gang asks at once, such as quota. Called once per object, after check has
   * judged each role.
   */
  checkGang?(
    object: KubeObject,
    roles: PodTarget[],
    ctx: RuleContext,
  ): RuleFindings | Promise<RuleFindings>;
  /**
   * The settings section whose `enabled` turns the capability on: off, it is not applied at all
   * (no fix, no check, not counted as handled), and a report lists its rules as `skip`.
   */
  switchedBy?: SwitchableSection;
  /**
   * Every rule its check may report a violation under: what an Exemption may waive (an unknown
   * name is refused) and what a PolicyReport lists for each object.
   */
  rules: readonly string[];
  /**
   * Rules no Exemption may waive, with why: what the API server enforces itself anyway (a waiver
   * would only move the refusal to its less helpful message).
   */
  notWaivable?: Readonly<Record<string, string>>;
}

/**
 * The stored version of an object being updated, as the rules compare with it:
 * - payload-size: a measure that did not grow only warns (an object already too big stays editable);
 * - resource-quota: only the pods an update adds, and what they ask on top, count against the quota;
 * - security-context: on a Pod, only the ephemeral containers an update adds are new.
 * What every rule found in the stored version already is dropped by the engine (lib/engine/checks.ts).
 */
export interface StoredVersion {
  /** The stored object, as the request carries it: read it, never change it. */
  readonly object: KubeObject;
  /** The stored pod template at this path (a target's `template.path`: "" for the Pod's own). */
  templateAt(path: string): PodTemplateRef | undefined;
  /** The stored object's pod templates, role by role: what a gang asked before. */
  readonly targets: readonly PodTarget[];
  /** A Pod UPDATE that adds ephemeral containers (`kubectl debug`). */
  readonly addsEphemeralContainers: boolean;
}

/** A kind as Pepr binds it and a webhook rule names it: version "" is any version of the group. */
export interface KindRef {
  group: string;
  version: string;
  kind: string;
  /** The resource in webhook rules; default: the kind in lower case + "s". */
  plural?: string;
}

/** Whether an object is of a kind (its API group and kind; any version). */
export const isKind = (obj: KubeObject, ref: KindRef): boolean =>
  obj?.kind === ref.kind && groupOf(String(obj?.apiVersion ?? "")) === ref.group;

export const POD: KindRef = { group: "", version: "v1", kind: "Pod" };
export const CONFIG_MAP: KindRef = { group: "", version: "v1", kind: "ConfigMap" };
export const SECRET: KindRef = { group: "", version: "v1", kind: "Secret" };

/**
 * A judge of the module's own objects (an Exemption as it is written): a Validate binding of its
 * own, outside the policies' engine. It answers in every namespace not ignored, whatever its mode
 * label (a namespace's mode is for its workloads), and no Exemption waives it. Pure, like a rule.
 */
export interface Validator {
  /** The capability name in its messages. */
  name: string;
  description: string;
  /** Every rule it may refuse under. */
  rules: readonly string[];
  /** The kinds it judges, on CREATE and UPDATE. */
  kinds: readonly KindRef[];
  validate(object: KubeObject, ctx: RuleContext): RuleViolation[];
}
