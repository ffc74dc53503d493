// How `check` prints its results: a compact text report for people, or one JSON object per line
// for machines. Both come from the engine's Review, so they say what the webhook would say.
import { stringify } from "yaml";
import { formatViolation, type Change, type Violation } from "../lib/objects/verdict";
import { fixedNotesOf, pendingWarnings, type ContextInput, type Review } from "../lib/engine";
import { isPod, type KubeObject } from "../lib/objects/pod";
import type { Policy } from "../lib/engine/policy";
import { buildReport, objectResults, type ObjectResults } from "../lib/reports/policy-report";
import { WGPOLICYK8S, type ReportApi } from "../lib/reports/report-apis";
import { describeSource, type Source } from "./manifests";
import { POLICY_TEST_KIND } from "./policy-test-format";

export interface Checked {
  source: Source;
  /** The object as read from the manifest. */
  input: KubeObject;
  review: Review;
}

/** The JSON line for one object (the fields documented in docs/check.md). */
export interface JsonResult {
  source: Source;
  kind: string;
  namespace: string;
  name: string;
  /** false when admission-guard does not act on this object (kind, namespace or mode off). */
  handled: boolean;
  mode: string;
  allowed: boolean;
  changes: Pick<Change, "capability" | "rule" | "message">[];
  violations: (Pick<Violation, "capability" | "rule" | "message" | "fix"> & {
    severity: "deny" | "warn";
  })[];
  warnings: string[];
  object: KubeObject;
}

export function toJson({ source, review: r }: Checked): JsonResult {
  return {
    source,
    kind: r.kind,
    namespace: r.namespace,
    name: r.name,
    handled: r.handled,
    mode: r.mode,
    allowed: r.allowed,
    changes: r.changes.map(({ capability, rule, message }) => ({ capability, rule, message })),
    violations: r.violations.map(({ capability, rule, message, fix, severity }) => ({
      capability,
      rule,
      message,
      fix,
      severity: severity ?? "deny",
    })),
    warnings: r.warnings,
    object: r.object,
  };
}

/** Whether this violation denies the object (enforce mode, deny severity). */
export const denies = (r: Review, v: Violation) => r.mode === "enforce" && v.severity !== "warn";

interface Style {
  red(s: string): string;
  green(s: string): string;
  yellow(s: string): string;
  dim(s: string): string;
}

const plain: Style = { red: s => s, green: s => s, yellow: s => s, dim: s => s };
const ansi = (code: number) => (s: string) => `\u001b[${code}m${s}\u001b[0m`;
const colored: Style = { red: ansi(31), green: ansi(32), yellow: ansi(33), dim: ansi(2) };

export const styleFor = (color: boolean): Style => (color ? colored : plain);

const INDENT = "  ";
const LABEL_WIDTH = 10;

/** One object's block of the text report. */
export function textBlock({ source, review: r }: Checked, style: Style): string {
  const what = `${r.kind} ${r.namespace ? `${r.namespace}/` : ""}${r.name || "(unnamed)"}`;
  const verdict = r.allowed ? style.green("allowed") : style.red("DENIED");
  const modeNote = r.mode === "enforce" ? "" : style.dim(` (namespace mode ${r.mode})`);
  const lines = [`${verdict}  ${what}${modeNote}  ${style.dim(`[${describeSource(source)}]`)}`];

  // Every line: a label padded to one width, then the message; a violation's fix under it.
  const line = (label: string, color: (s: string) => string, text: string) =>
    lines.push(`${INDENT}${color(label.padEnd(LABEL_WIDTH))}${text}`);
  const workload = !isPod(r.object);
  for (const c of r.changes) {
    line(workload ? "pods get" : "fixed", style.green, `${c.capability}/${c.rule}: ${c.message}`);
  }
  for (const v of r.violations) {
    const deny = denies(r, v);
    const what = `${v.capability}/${v.rule}: ${v.message.replace(/\.\s*$/, "")}`;
    line(deny ? "denied" : "warning", deny ? style.red : style.yellow, what);
    line("", style.dim, `Fix: ${v.fix}`);
  }
  // Warnings that are not already printed above as a change or a violation.
  const shown = new Set([
    ...r.violations.map(formatViolation),
    ...(workload ? pendingWarnings(r.changes, r.kind) : fixedNotesOf(r.changes)),
  ]);
  for (const w of r.warnings.filter(w => !shown.has(w))) line("note", style.yellow, w);
  // The rest of a denial: that an Exemption is a way out, and who grants one.
  for (const d of r.denials.filter(d => !shown.has(d))) line("note", style.dim, d);
  return lines.join("\n");
}

/** The closing line: counts, and which kinds were not checked at all. */
export function textSummary(results: Checked[], style: Style): string {
  const handled = results.filter(c => c.review.handled);
  const denied = handled.filter(c => !c.review.allowed).length;
  const fixed = handled.filter(c => c.review.changes.length).length;
  const skipped = new Map<string, number>();
  // The module's own test files, met when `check` walks a folder that holds them (examples/).
  const unhandled = results.filter(c => !c.review.handled);
  const policyTests = unhandled.filter(c => c.review.kind === POLICY_TEST_KIND).length;
  const notHandled = unhandled.filter(c => c.review.kind !== POLICY_TEST_KIND);
  for (const c of notHandled) {
    const kind = c.review.kind || "(no kind)";
    skipped.set(kind, (skipped.get(kind) ?? 0) + 1);
  }
  const parts = [
    `${handled.length} checked`,
    denied ? style.red(`${denied} denied`) : style.green("0 denied"),
    `${fixed} with fixes`,
  ];
  if (skipped.size) {
    const kinds = [...skipped].map(([k, n]) => (n > 1 ? `${k} x${n}` : k)).join(", ");
    parts.push(`${notHandled.length} not handled by admission-guard (${kinds})`);
  }
  if (policyTests)
    parts.push(
      `${policyTests} policy test file${policyTests === 1 ? "" : "s"} (run by admission-guard test)`,
    );
  return `${results.length} object${results.length === 1 ? "" : "s"}: ${parts.join(", ")}`;
}

/**
 * `--output policyreport` (and `openreports`): the report of each namespace, as YAML documents —
 * the same results the watcher writes in the cluster for the manifests given, converted as the
 * watcher converts them for that API (lib/reports/report-apis.ts).
 */
export function policyReportsYaml(
  results: Checked[],
  input: ContextInput & { policies: readonly Policy[] },
  api: ReportApi = WGPOLICYK8S,
): string {
  const byNamespace = new Map<string, ObjectResults[]>();
  for (const { input: object, review: r } of results) {
    if (!r.handled) continue;
    const list = byNamespace.get(r.namespace) ?? [];
    list.push(objectResults(object, r.namespace, r));
    byNamespace.set(r.namespace, list);
  }
  const seconds = Math.floor(Date.now() / 1000);
  return [...byNamespace]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([ns, list]) =>
      stringify(api.convert(buildReport(ns, list, input.settings.reports.maxResults, seconds))),
    )
    .join("---\n");
}
