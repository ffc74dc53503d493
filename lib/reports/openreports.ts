// OpenReports (openreports.io/v1alpha1 Report), the successor of wgpolicyk8s.io PolicyReports that
// Policy Reporter, Kubewarden and Kyverno read. Its Report has the fields of a PolicyReport (summary,
// results with source, policy, rule, result, message, resources, properties, timestamp) plus a
// report-level `source`: a report is the PolicyReport the scan built, converted, so both APIs say
// the same. Pure. Why: docs/adr/0037-reports-api-a-setting.md
import { SOURCE, type PolicyReport } from "./policy-report";

export const OPEN_REPORT_GVK = {
  group: "openreports.io",
  version: "v1alpha1",
  kind: "Report",
  plural: "reports",
} as const;
export const OPEN_REPORT_API_VERSION = `${OPEN_REPORT_GVK.group}/${OPEN_REPORT_GVK.version}`;

export interface OpenReport extends Omit<PolicyReport, "apiVersion" | "kind"> {
  apiVersion: typeof OPEN_REPORT_API_VERSION;
  kind: typeof OPEN_REPORT_GVK.kind;
  /** Who wrote every result (each result says so too). */
  source: string;
}

/**
 * The Report of a namespace's PolicyReport: the same metadata (name, labels, the results-omitted
 * annotation), summary and results. The results are the same objects, not copies: a report at
 * maxResults holds 1,000 of them and is dropped once written.
 */
export function toOpenReport(report: PolicyReport): OpenReport {
  return {
    apiVersion: OPEN_REPORT_API_VERSION,
    kind: OPEN_REPORT_GVK.kind,
    metadata: report.metadata,
    source: SOURCE,
    summary: report.summary,
    results: report.results,
  };
}
