// Reports and Events in the cluster, for the watcher: the PolicyReport of each namespace by
// server-side apply (one write replaces it whole), read once per namespace after a start so an
// unchanged report is not written again.
import { GenericKind, K8s, kind } from "kubernetes-fluent-client";
import { describeError } from "../cluster/api-calls";
import type { CoreEvent } from "./events";
import { REPORT_GVK, REPORT_NAME, type PolicyReport } from "./policy-report";
import type { ReportStore } from "./scanner";

const reports = () => K8s(GenericKind, { kindOverride: REPORT_GVK });
const statusOf = (e: unknown) => (e as { status?: number } | null)?.status;

export class LiveReportStore implements ReportStore {
  async read(namespace: string): Promise<PolicyReport | undefined> {
    try {
      return (await reports().InNamespace(namespace).Get(REPORT_NAME)) as unknown as PolicyReport;
    } catch (e) {
      if (statusOf(e) === 404) return undefined;
      throw new Error(describeError(e));
    }
  }

  async write(report: PolicyReport): Promise<void> {
    try {
      await reports().Apply(report as unknown as GenericKind, { force: true });
    } catch (e) {
      const reason = describeError(e);
      // No such resource: nobody installed the PolicyReport CRD.
      throw new Error(
        statusOf(e) === 404
          ? `${reason} (is the PolicyReport CRD installed? kubectl apply -f deploy/policyreport-crd.yaml)`
          : reason,
      );
    }
  }

  async remove(namespace: string): Promise<void> {
    try {
      await reports().Delete({ metadata: { name: REPORT_NAME, namespace } });
    } catch (e) {
      if (statusOf(e) !== 404) throw new Error(describeError(e));
    }
  }
}

export async function writeEvent(event: CoreEvent): Promise<void> {
  try {
    await K8s(kind.CoreEvent).Create(event as unknown as InstanceType<typeof kind.CoreEvent>);
  } catch (e) {
    throw new Error(describeError(e));
  }
}
