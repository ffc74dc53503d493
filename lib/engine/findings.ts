// Findings as the engine words them: stamped with their capability, and the violations the engine
// itself raises (a step that threw, a malformed object).
import type { KubeObject } from "../objects/pod";
import type { Policy } from "./policy";
import { NS_KEYS } from "../settings";
import type { Findings, FixFailure, Violation } from "../objects/verdict";

// The engine, not each rule, says which capability a finding is from. A rule returns new objects
// on every call, so they are stamped in place (this runs for every finding of every request).
export function stamped<T extends object>(
  policy: Policy,
  items: T[],
): (T & { capability: string })[] {
  for (const item of items) (item as T & { capability: string }).capability = policy.name;
  return items as (T & { capability: string })[];
}

export function internalError(capability: string, stage: string, reason: string): Violation {
  return {
    capability,
    rule: "internal-error",
    message: `the ${stage} step failed on this object (${reason})`,
    fix: `check the object is well-formed; if it is, report this bug and meanwhile set the namespace to warn mode: kubectl label namespace <ns> ${NS_KEYS.mode}=warn --overwrite`,
  };
}

/** What a thrown value says, for messages and logs. */
export const reasonOf = (e: unknown) => (e instanceof Error ? e.message : String(e));

export const fixFailureViolation = (f: FixFailure) => internalError(f.capability, "fix", f.reason);

export function malformed(policy: Policy, obj: KubeObject, what: string): Violation {
  return {
    capability: policy.name,
    rule: "malformed-object",
    message: `${obj.kind} ${what}`,
    fix:
      obj.kind === "Pod"
        ? "give the Pod a spec with containers"
        : "give the workload a spec.template with a pod spec",
  };
}

/** The findings of `now` that `before` did not have, word for word. */
export function newFindings(now: Findings, before: Findings): Findings {
  const key = (v: Violation) => `${v.capability}\u0000${v.rule}\u0000${v.message}`;
  const had = new Set(before.violations.map(key));
  const warned = new Set(before.warnings);
  return {
    ...now,
    violations: now.violations.filter(v => !had.has(key(v))),
    warnings: now.warnings.filter(w => !warned.has(w)),
  };
}
