// The trace the mutating webhook leaves on what it fixed (and on fixes that threw), read back by the
// validating webhook, the watcher's Events and the reports: the two webhooks share no memory.
import type { KubeObject } from "./pod";
import { NS_KEYS } from "./keys";
import { formatNote, type Change, type FixFailure } from "./verdict";

/** Adds `capability/rule` entries to the object's trace annotation; sorted and deduplicated so re-runs are stable. */
export function recordFixes(obj: KubeObject, changes: Change[]): void {
  if (!changes.length) return;
  const meta = (obj.metadata ??= {});
  const annotations = (meta.annotations ??= {});
  const entries = new Set(
    (annotations[NS_KEYS.fixed] ?? "")
      .split(",")
      .map(s => s.trim())
      .filter(Boolean),
  );
  for (const c of changes) entries.add(`${c.capability}/${c.rule}`);
  annotations[NS_KEYS.fixed] = [...entries].sort().join(",");
}

// The trace is read two or three times a request, and its values repeat from pod to pod: each is
// parsed once. Bounded: the map starts again when full, and holds no value longer than a real
// trace (a user may write anything into the annotation).
const TRACE_CAPACITY = 1024;
const TRACE_KEPT_LENGTH = 2048;
const parsedTraces = new Map<string, ReadonlyMap<string, readonly string[]>>();
const NO_FIXES: ReadonlyMap<string, readonly string[]> = new Map();

/** What admission-guard recorded as fixed on a pod, by capability. */
export function recordedFixes(obj: KubeObject): ReadonlyMap<string, readonly string[]> {
  const value = obj.metadata?.annotations?.[NS_KEYS.fixed];
  if (typeof value !== "string") return NO_FIXES;
  if (value.length > TRACE_KEPT_LENGTH) return parseTrace(value);
  let parsed = parsedTraces.get(value);
  if (!parsed) {
    if (parsedTraces.size >= TRACE_CAPACITY) parsedTraces.clear();
    parsedTraces.set(value, (parsed = parseTrace(value)));
  }
  return parsed;
}

function parseTrace(value: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const entry of value.split(",")) {
    const slash = entry.indexOf("/");
    const capability = entry.slice(0, slash).trim();
    const rule = entry.slice(slash + 1).trim();
    if (slash < 0 || !capability || !rule) continue;
    const rules = out.get(capability);
    if (rules) rules.push(rule);
    else out.set(capability, [rule]);
  }
  return out;
}

/** One capability's line of the trace: `admission-guard/<capability>: fixed rule, rule`. */
const fixedNote = (capability: string, rules: readonly string[]) =>
  formatNote(capability, `fixed ${rules.join(", ")}`);

/** The trace annotation's summary as warnings, for these policies in their order. */
export function fixedNotes(
  fixed: ReadonlyMap<string, readonly string[]>,
  policies: readonly { name: string }[],
): string[] {
  return policies.flatMap(p => {
    const rules = fixed.get(p.name);
    return rules?.length ? [fixedNote(p.name, rules)] : [];
  });
}

/** The changes' summary as answer() words it, through the same trace annotation (for reports). */
export function fixedNotesOf(changes: Change[]): string[] {
  const traced: KubeObject = {};
  recordFixes(traced, changes);
  return [...recordedFixes(traced)].map(([capability, rules]) => fixedNote(capability, rules));
}

/** Fixes that threw, by capability, in an annotation: the mutating webhook cannot deny with a message. */
export function recordFixFailures(obj: KubeObject, failures: FixFailure[]): void {
  if (!failures.length) return;
  const annotations = ((obj.metadata ??= {}).annotations ??= {});
  const failed = recordedFixFailures(obj);
  for (const f of failures) failed.set(f.capability, f.reason);
  annotations[NS_KEYS.fixFailed] = JSON.stringify(Object.fromEntries([...failed].sort()));
}

export function recordedFixFailures(obj: KubeObject): Map<string, string> {
  const value = obj.metadata?.annotations?.[NS_KEYS.fixFailed];
  if (typeof value !== "string") return new Map();
  try {
    const parsed: unknown = JSON.parse(value);
    if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) return new Map();
    return new Map(Object.entries(parsed).map(([k, v]) => [k, String(v).slice(0, 500)]));
  } catch {
    return new Map();
  }
}
