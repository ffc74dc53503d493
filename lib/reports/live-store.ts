// Reports and Events in the cluster, for the watcher: the report of each namespace by
// server-side apply (one write replaces it whole), read once per namespace after a start so an
// unchanged report is not written again; in the API (or APIs) setting reports.api names
// (report-apis.ts), found by discovery when it is not the default.
import { GenericKind, K8s, kind } from "kubernetes-fluent-client";
import { API_BUDGET_MS, describeError, withBudget } from "../cluster/api-calls";
import type { CoreEvent } from "./events";
import { REPORT_NAME, type PolicyReport } from "./policy-report";
import {
  apisToDiscover,
  chooseApis,
  describeApi,
  FanOutStore,
  WGPOLICYK8S,
  type ReportApi,
  type ReportsApiSetting,
} from "./report-apis";
import type { ReportStore } from "./scanner";

const statusOf = (e: unknown) => (e as { status?: number } | null)?.status;

export class LiveReportStore implements ReportStore {
  private readonly reports = () => K8s(GenericKind, { kindOverride: this.api.gvk });

  constructor(private readonly api: ReportApi = WGPOLICYK8S) {}

  /** The stored report; an OpenReports Report as it is, its content compared as a PolicyReport's. */
  async read(namespace: string): Promise<PolicyReport | undefined> {
    try {
      return (await this.reports()
        .InNamespace(namespace)
        .Get(REPORT_NAME)) as unknown as PolicyReport;
    } catch (e) {
      if (statusOf(e) === 404) return undefined;
      throw new Error(describeError(e));
    }
  }

  async write(report: PolicyReport): Promise<void> {
    try {
      await this.reports().Apply(this.api.convert(report) as GenericKind, { force: true });
    } catch (e) {
      const reason = describeError(e);
      // No such resource: nobody installed the CRD.
      throw new Error(
        statusOf(e) === 404
          ? `${reason} (is the ${this.api.gvk.kind} CRD installed? ${this.api.install})`
          : reason,
      );
    }
  }

  async remove(namespace: string): Promise<void> {
    try {
      await this.reports().Delete({ metadata: { name: REPORT_NAME, namespace } });
    } catch (e) {
      if (statusOf(e) !== 404) throw new Error(describeError(e));
    }
  }
}

/**
 * Whether the API server serves the API's reports: its group version's discovery document, read
 * once within the API budget (discovery needs no RBAC rule: system:discovery). undefined when it
 * could not tell (no answer, an error other than 404).
 */
async function served(api: ReportApi): Promise<boolean | undefined> {
  const { group, version, plural } = api.gvk;
  try {
    const found = (await withBudget(
      K8s(kind.Namespace).Raw(`/apis/${group}/${version}`),
      API_BUDGET_MS,
      `discovery of ${group}/${version}`,
    )) as { resources?: { name?: string }[] };
    return (found.resources ?? []).some(r => r.name === plural);
  } catch (e) {
    return statusOf(e) === 404 ? false : undefined;
  }
}

interface Log {
  info: (o: object, m: string) => void;
  warn: (o: object, m: string) => void;
}

/**
 * The store of setting reports.api: the default's at once, the others once discovery answered;
 * undefined when no API it names is served (each said once).
 */
export async function liveReportStore(
  setting: ReportsApiSetting,
  log: Log,
): Promise<ReportStore | undefined> {
  if (!apisToDiscover(setting).length) return new LiveReportStore();
  const found = new Map<ReportApi, boolean | undefined>();
  for (const api of apisToDiscover(setting)) found.set(api, await served(api));
  const { write, notServed } = chooseApis(setting, api => found.get(api));
  for (const api of notServed)
    log.warn(
      { api: describeApi(api), setting: `reports.api=${setting}` },
      `reports: the API server does not serve ${describeApi(api)}: no reports are written there (${api.install}, then restart the watcher)`,
    );
  if (!write.length) return undefined;
  log.info({ apis: write.map(describeApi) }, "reports: writing to");
  const stores = write.map(api => new LiveReportStore(api));
  return stores.length === 1 ? stores[0] : new FanOutStore(stores);
}

export async function writeEvent(event: CoreEvent): Promise<void> {
  try {
    await K8s(kind.CoreEvent).Create(event as unknown as InstanceType<typeof kind.CoreEvent>);
  } catch (e) {
    throw new Error(describeError(e));
  }
}
