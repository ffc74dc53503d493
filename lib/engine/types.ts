// The engine's inputs and outputs: one admission request, and what the webhook's two steps answer.
import type { ClusterView } from "../cluster/view";
import type { KubeObject } from "../objects/pod";
import type { Operation, Policy } from "./policy";
import type { Mode, Settings } from "../settings";
import type { Change, Skip, Violation } from "../objects/verdict";

/** One admission request, as the webhook receives it and `check` simulates it. */
export interface AdmissionInput {
  object: KubeObject;
  operation: Operation;
  /** The stored object on UPDATE. */
  oldObject?: KubeObject;
  dryRun: boolean;
  /** The request's namespace, used when the object has none. */
  namespace?: string;
  /** A stored object judged for the reports, not a request (RuleContext.scan). */
  scan?: boolean;
  /** When the request's waiting ends (epoch ms; RuleContext.deadline); unset: from now. */
  deadline?: number;
  /** The request's userInfo.username (RuleContext.user); unset for `check` and scans. */
  user?: string;
}

/** What every request is answered with: the settings, the cluster, every policy of the module in order. */
export interface EngineDeps {
  settings: Settings;
  cluster: ClusterView;
  policies: Policy[];
}

/** A decision to count on /metrics (lib/metrics/index.ts). */
export interface DecisionEvent {
  capability: string;
  /** fixed | allowed | denied | allowed-warn | allowed-audit | exempted */
  outcome: string;
  rule?: string;
  /** The Exemption (namespace/name) that waived the rule. */
  exemption?: string;
}

export interface MutateResult {
  changes: Change[];
  /** Fixes that threw: recorded on the object, said by answer() as internal errors. */
  errors: Violation[];
  events: DecisionEvent[];
}

export interface Answer {
  /** Whether an acting policy acts on this object at all (kind, namespace, mode off, switched off). */
  handled: boolean;
  /** The acting policies that judged it (every rule of theirs gets a result in a report). */
  judgedBy: Policy[];
  /** Rules not evaluated, with why: a capability switched off, a rule a check left out. */
  skipped: Skip[];
  mode: Mode;
  allowed: boolean;
  /** Formatted violations that deny (enforce mode). */
  denials: string[];
  /** The admission warnings. */
  warnings: string[];
  /** The violations that stand (an Exemption waived none of them). */
  violations: Violation[];
  /** The violations an Exemption in force waived, with its namespace/name. */
  waived: { violation: Violation; exemption: string }[];
  /** A workload: the fixes its pods will get when they are created. */
  pending: Change[];
  /** A workload: a copy with its pod template fixed by every policy, as its pods will be. */
  predicted?: KubeObject;
  events: DecisionEvent[];
}

export interface ContextInput {
  settings: Settings;
  cluster: ClusterView;
  operation?: Operation;
  /** The request's namespace, used when the object has none. */
  namespace?: string;
  oldObject?: KubeObject;
  dryRun?: boolean;
  scan?: boolean;
  policies?: readonly Policy[];
  deadline?: number;
  user?: string;
}
