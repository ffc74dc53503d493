// What a rule says about an object: the changes it made (mutation) and the violations it found
// (validation), and the one message format every front door prints.

/** A mutation a rule applied (to a Pod) or would apply (to the pods of a workload template). */
export interface Change {
  capability: string;
  rule: string;
  /** What was set, with the field path and the value: `spec.containers[0].securityContext.runAsNonRoot=true`. */
  message: string;
}

/** Something a rule cannot fix. `message` says what is wrong with names and numbers; `fix` says how to fix it. */
export interface Violation {
  capability: string;
  rule: string;
  message: string;
  fix: string;
  /**
   * "deny" (default): denied in enforce mode. "warn": never denies, always reported as a warning
   * (a rule whose default severity is a warning, e.g. secret access unless a setting enforces it).
   */
  severity?: "deny" | "warn";
}

/** A rule not evaluated on an object, and why (a capability off, a quota a stored pod is in already). */
export interface Skip {
  capability: string;
  rule: string;
  reason: string;
}

/** What one capability found on one object. */
export interface Findings {
  changes: Change[];
  violations: Violation[];
  /** Notes that are neither changes nor violations ("quota not checked: no quota data yet"). */
  warnings: string[];
  /** Rules not evaluated: reported `skip`, never `pass`. */
  skipped: Skip[];
}

export const emptyFindings = (): Findings => ({
  changes: [],
  violations: [],
  warnings: [],
  skipped: [],
});

/** Adds `from` to `into` (a rule's findings or the engine's, the same shape). */
export function mergeFindings<
  F extends { changes: unknown[]; violations: unknown[]; warnings: string[]; skipped?: unknown[] },
>(into: F, from: F): F {
  into.changes.push(...from.changes);
  into.violations.push(...from.violations);
  into.warnings.push(...from.warnings);
  if (from.skipped?.length) (into.skipped ??= []).push(...from.skipped);
  return into;
}

/** `admission-guard/<capability>: <what is wrong>. Fix: <how>` — the one denial format. */
export function formatViolation(v: Violation): string {
  const what = v.message.replace(/\.\s*$/, "");
  return `admission-guard/${v.capability}: ${what}. Fix: ${v.fix}`;
}

/** A note (an admission warning that is neither a violation nor a change) in the same format. */
export function formatNote(capability: string, text: string): string {
  return `admission-guard/${capability}: ${text}`;
}

/** A change as a warning line: what will be or was fixed. */
export function formatChange(c: Change): string {
  return formatNote(c.capability, `fixed ${c.message}`);
}

/** A workload's template change as a warning: its pods will be fixed at creation. */
export function formatPendingChange(c: Change): string {
  return formatNote(c.capability, `its pods will get ${c.message}`);
}

/** A fix that threw: the capability and what it said. */
export interface FixFailure {
  capability: string;
  reason: string;
}
