// Which reports API the watcher writes to (setting reports.api), and the store that writes to each
// chosen one: one scan, one report per namespace, converted per API (openreports.ts). An API the
// API server does not serve is found once, at the start, by discovery and said once; nothing is
// written there (no write that fails every interval). Why: docs/adr/0037-reports-api-a-setting.md
import type { REPORTS_API } from "../settings";
import { REPORT_GVK, reportContent, type PolicyReport } from "./policy-report";
import { OPEN_REPORT_GVK, toOpenReport } from "./openreports";
import type { ReportStore } from "./report-writes";

export type ReportsApiSetting = (typeof REPORTS_API)[number];

export interface ReportApi {
  name: "wgpolicyk8s" | "openreports";
  gvk: { group: string; version: string; kind: string; plural: string };
  /** The object written for a namespace's report. */
  convert(report: PolicyReport): object;
  /** What an admin runs when the API is not served. */
  install: string;
}

export const WGPOLICYK8S: ReportApi = {
  name: "wgpolicyk8s",
  gvk: REPORT_GVK,
  convert: report => report,
  install: "kubectl apply -f deploy/policyreport-crd.yaml",
};

export const OPENREPORTS: ReportApi = {
  name: "openreports",
  gvk: OPEN_REPORT_GVK,
  convert: toOpenReport,
  install: "install the OpenReports CRDs (openreports/reports-api's install.yaml or Helm chart)",
};

export const describeApi = (api: ReportApi) =>
  `${api.gvk.plural}.${api.gvk.group}/${api.gvk.version}`;

/**
 * The APIs to ask discovery about. None for wgpolicyk8s, the default: it is written as before
 * discovery existed, its failed writes saying what to install.
 */
export function apisToDiscover(setting: ReportsApiSetting): ReportApi[] {
  return setting === "wgpolicyk8s"
    ? []
    : setting === "openreports"
      ? [OPENREPORTS]
      : [WGPOLICYK8S, OPENREPORTS];
}

export interface ApiChoice {
  write: ReportApi[];
  /** The wanted APIs the API server does not serve: said once, never written to. */
  notServed: ReportApi[];
}

/**
 * The APIs written to, from the setting and what discovery found (true, false, or undefined when
 * it could not tell: then the API is written to, and a failed write says why, as for the default).
 */
export function chooseApis(
  setting: ReportsApiSetting,
  served: (api: ReportApi) => boolean | undefined,
): ApiChoice {
  if (setting === "wgpolicyk8s") return { write: [WGPOLICYK8S], notServed: [] };
  const wanted = apisToDiscover(setting);
  return {
    write: wanted.filter(api => served(api) !== false),
    notServed: wanted.filter(api => served(api) === false),
  };
}

/**
 * One report written to several stores (one per API). A namespace's stored report counts only
 * when every store holds the same content: otherwise it is written to all again.
 */
export class FanOutStore implements ReportStore {
  constructor(private readonly stores: readonly ReportStore[]) {}

  async read(namespace: string): Promise<PolicyReport | undefined> {
    const stored = await Promise.all(this.stores.map(s => s.read(namespace)));
    if (stored.some(r => !r)) return undefined;
    const content = reportContent(stored[0]!);
    return stored.every(r => reportContent(r!) === content) ? stored[0] : undefined;
  }

  write(report: PolicyReport): Promise<void> {
    return this.each(s => s.write(report));
  }

  remove(namespace: string): Promise<void> {
    return this.each(s => s.remove(namespace));
  }

  /** Each store is tried; the first failure is the write's (it is tried again after the interval). */
  private async each(call: (s: ReportStore) => Promise<void>): Promise<void> {
    const done = await Promise.allSettled(this.stores.map(call));
    const failed = done.find(d => d.status === "rejected");
    if (failed) throw failed.reason;
  }
}
