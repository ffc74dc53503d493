// PolicyReports (wgpolicyk8s.io/v1alpha2), the format Policy Reporter, Kyverno and Kubewarden users
// read with `kubectl get policyreport -A`: what the rules say of objects that already exist. Pure:
// an object's results come from the engine's answer; a namespace's report is built from its
// objects' results. The watcher (lib/reports/scanner.ts) and `check --output policyreport` use it.
import type { Answer } from "../engine";
import type { KubeObject } from "../objects/pod";
import type { Policy } from "../engine/policy";
import type { Violation } from "../objects/verdict";

export const REPORT_GVK = {
  group: "wgpolicyk8s.io",
  version: "v1alpha2",
  kind: "PolicyReport",
  plural: "policyreports",
} as const;
export const REPORT_API_VERSION = `${REPORT_GVK.group}/${REPORT_GVK.version}`;
/** Every namespace's report has this name, and this label says who writes it. */
export const REPORT_NAME = "admission-guard";
export const MANAGED_BY = { "app.kubernetes.io/managed-by": "admission-guard" };
export const SOURCE = "admission-guard";

export type ResultValue = "pass" | "fail" | "warn" | "error" | "skip";
/** Which results are kept first when a report holds more than maxResults. */
const RESULT_ORDER: ResultValue[] = ["fail", "error", "warn", "skip", "pass"];

export interface ObjectRef {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  uid?: string;
}

/** One result that is not a pass: what a rule found on an object. */
export interface Finding {
  policy: string;
  rule: string;
  result: Exclude<ResultValue, "pass">;
  message: string;
  fix?: string;
  exemption?: string;
}

/**
 * What the rules say of one object: its findings, and the policies that judged it (each of their
 * rules without a finding passed). Kept for every object the watcher sees, so it holds no more
 * than that: the passes are worked out when a report is built.
 */
export interface ObjectResults {
  ref: ObjectRef;
  findings: Finding[];
  judgedBy: readonly Policy[];
}

/** Capability → its rules that found nothing on the object. */
export function passedRules(o: ObjectResults): Map<string, readonly string[]> {
  const passed = new Map<string, readonly string[]>();
  for (const policy of o.judgedBy) {
    const found = o.findings.filter(f => f.policy === policy.name);
    const rules = found.length
      ? policy.rules.filter(r => !found.some(f => f.rule === r))
      : policy.rules;
    if (rules.length) passed.set(policy.name, rules);
  }
  return passed;
}

export interface PolicyReportResult {
  source: string;
  policy: string;
  rule?: string;
  category: string;
  result: ResultValue;
  scored: boolean;
  message: string;
  timestamp: { seconds: number; nanos: number };
  resources: ObjectRef[];
  properties?: Record<string, string>;
}

export interface Summary {
  pass: number;
  fail: number;
  warn: number;
  error: number;
  skip: number;
}

export interface PolicyReport {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace: string;
    labels: Record<string, string>;
    annotations?: Record<string, string>;
  };
  summary: Summary;
  results: PolicyReportResult[];
}

/** The module's errors: a rule that could not judge the object, not the object breaking it. */
const ERROR_RULES = ["internal-error", "malformed-object"];

function findingOf(v: Violation): Finding {
  return {
    policy: v.capability,
    rule: v.rule,
    result: ERROR_RULES.includes(v.rule) ? "error" : v.severity === "warn" ? "warn" : "fail",
    message: v.message,
    fix: v.fix,
  };
}

export function refOf(obj: KubeObject, namespace: string): ObjectRef {
  const meta = obj.metadata ?? {};
  return {
    apiVersion: String(obj.apiVersion ?? ""),
    kind: String(obj.kind ?? ""),
    namespace,
    name: meta.name ?? meta.generateName ?? "",
    ...(meta.uid ? { uid: String(meta.uid) } : {}),
  };
}

/**
 * An object's results from the engine's answer. A violation fails (or warns, for a rule that only
 * warns), whatever the namespace's mode: the report says what enforce would deny, which is what a
 * team moving from audit to enforce asks. A waived one is skipped, naming the Exemption; so is a
 * rule not evaluated (its capability switched off, a quota the stored pod is counted in already).
 * Every other rule of the policies that judged it (the answer's judgedBy) passed.
 */
export function objectResults(
  obj: KubeObject,
  namespace: string,
  answer: Pick<Answer, "violations" | "waived" | "judgedBy" | "skipped">,
): ObjectResults {
  const findings: Finding[] = answer.violations.map(findingOf);
  for (const { violation, exemption } of answer.waived)
    findings.push({
      policy: violation.capability,
      rule: violation.rule,
      result: "skip",
      message: `waived by Exemption ${exemption}: ${violation.message}`,
      fix: violation.fix,
      exemption,
    });
  for (const s of answer.skipped)
    if (!findings.some(f => f.policy === s.capability && f.rule === s.rule))
      findings.push({
        policy: s.capability,
        rule: s.rule,
        result: "skip",
        message: `not evaluated: ${s.reason}`,
      });
  return { ref: refOf(obj, namespace), findings, judgedBy: interned(answer.judgedBy) };
}

/** Whether two objects' results would write the same report lines. */
export function sameResults(a: ObjectResults | undefined, b: ObjectResults): boolean {
  return !!a && JSON.stringify(fingerprint(a)) === JSON.stringify(fingerprint(b));
}

const fingerprint = (r: ObjectResults) => [r.ref, r.findings, r.judgedBy.map(p => p.name)];

// Most objects are judged by the same few sets of policies: one array each, not one per object.
const internedLists = new Map<string, readonly Policy[]>();
function interned(policies: readonly Policy[]): readonly Policy[] {
  const key = policies.map(p => p.name).join("\u0000");
  const known = internedLists.get(key);
  if (known && known.every((p, i) => p === policies[i])) return known;
  internedLists.set(key, policies);
  return policies;
}

const byObject = (a: ObjectResults, b: ObjectResults) =>
  a.ref.kind.localeCompare(b.ref.kind) || a.ref.name.localeCompare(b.ref.name);

/**
 * A namespace's report. Results are ordered fail, error, warn, skip, pass, then by object, and cut
 * at maxResults (an annotation says how many were left out); the summary counts them all.
 * `seconds` stamps every result: the time the scan last judged the namespace.
 */
export function buildReport(
  namespace: string,
  objects: readonly ObjectResults[],
  maxResults: number,
  seconds: number,
): PolicyReport {
  const summary: Summary = { pass: 0, fail: 0, warn: 0, error: 0, skip: 0 };
  const sorted = [...objects].sort(byObject);
  const results: PolicyReportResult[] = [];
  // Written out whole, not `{ ...common, rule, ... }`: a spread followed by new keys costs
  // microseconds in this V8, and a report of 10,000 pods holds ~100,000 results.
  const resultOf = (
    ref: ObjectRef,
    policy: string,
    rule: string,
    result: ResultValue,
    message: string,
    properties?: Record<string, string>,
  ): PolicyReportResult => {
    const r: PolicyReportResult = {
      source: SOURCE,
      policy,
      category: "admission-guard",
      scored: true,
      timestamp: { seconds, nanos: 0 },
      resources: [ref],
      rule,
      result,
      message,
    };
    if (properties) r.properties = properties;
    return r;
  };
  for (const value of RESULT_ORDER) {
    for (const o of sorted) {
      if (value === "pass") {
        for (const [policy, rules] of passedRules(o)) {
          summary.pass += rules.length;
          for (const rule of rules) {
            if (results.length >= maxResults) continue;
            results.push(resultOf(o.ref, policy, rule, "pass", `${rule} holds`));
          }
        }
        continue;
      }
      for (const f of o.findings) {
        if (f.result !== value) continue;
        summary[value]++;
        if (results.length >= maxResults) continue;
        const properties: Record<string, string> = {};
        if (f.fix) properties.fix = f.fix;
        if (f.exemption) properties.exemption = f.exemption;
        const hasProperties = Object.keys(properties).length > 0;
        results.push(
          resultOf(
            o.ref,
            f.policy,
            f.rule,
            value,
            f.message,
            hasProperties ? properties : undefined,
          ),
        );
      }
    }
  }
  const total = summary.pass + summary.fail + summary.warn + summary.error + summary.skip;
  return {
    apiVersion: REPORT_API_VERSION,
    kind: REPORT_GVK.kind,
    metadata: {
      name: REPORT_NAME,
      namespace,
      labels: { ...MANAGED_BY },
      ...(total > results.length
        ? {
            annotations: {
              "admission-guard.dev/results-omitted": String(total - results.length),
            },
          }
        : {}),
    },
    summary,
    results,
  };
}

/** A report's content without its time stamps: what decides whether it must be written again. */
export function reportContent(report: PolicyReport): string {
  return JSON.stringify({
    metadata: report.metadata,
    summary: report.summary,
    results: report.results.map(r => ({ ...r, timestamp: undefined })),
  });
}
