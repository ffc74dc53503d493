// OpenReports through the real module: the built watcher (PEPR_WATCH_MODE=true) with setting
// reports.api writes openreports.io Reports, PolicyReports, or both, with the same results; an API
// the stand-in does not serve (its CRD not installed) is said once and never written to.
import type { KubeObject } from "../../lib/objects/pod";
import type { PolicyReport } from "../../lib/reports/policy-report";
import type { OpenReport } from "../../lib/reports/openreports";
import { startWatcher, type Controller } from "../support/controller";
import { startStandIn, type StandInApi, type StandInOptions } from "../support/stand-in-api";
import { eventually } from "../support/wait";

const NS = "ml-team";
const OPENREPORTS = "openreports.io/v1alpha1";
const WGPOLICYK8S = "wgpolicyk8s.io/v1alpha2";

/** A running pod as the API server stores it; a privileged one fails security-context/privileged. */
function pod(name: string, privileged: boolean): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: NS, labels: { "app.kubernetes.io/component": "trainer" } },
    spec: {
      serviceAccountName: "workload",
      automountServiceAccountToken: false,
      containers: [
        { name: "train", image: "ghcr.io/org/trainer:1", securityContext: { privileged } },
      ],
    },
    status: { phase: "Running" },
  };
}

let api: StandInApi | undefined;
let watcher: Controller | undefined;

/** A stand-in with the namespace and two pods, and the watcher with reports.api in front of it. */
async function start(reportsApi: string, options: StandInOptions = {}) {
  api = await startStandIn({
    ...options,
    objects: [
      { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
      pod("trainer-old", true),
      pod("trainer-ok", false),
    ],
  });
  watcher = await startWatcher({
    api,
    env: {
      ADMISSION_GUARD_REPORTS_INTERVAL_SECONDS: "1",
      ADMISSION_GUARD_REPORTS_API: reportsApi,
    },
  });
  return { api, watcher };
}

afterEach(async () => {
  await watcher?.stop();
  await api?.stop();
  watcher = api = undefined;
});

const reportOf = (standIn: StandInApi) =>
  standIn.get("Report", "admission-guard", NS) as unknown as OpenReport | undefined;
const policyReportOf = (standIn: StandInApi) =>
  standIn.get("PolicyReport", "admission-guard", NS) as unknown as PolicyReport | undefined;

const failures = (report: { results: PolicyReport["results"] } | undefined) =>
  (report?.results ?? [])
    .filter(r => r.result === "fail")
    .map(r => `${r.resources[0].name} ${r.policy}/${r.rule}`);

/** Requests to an API group version's paths (discovery, reads, writes). */
const requestsTo = (standIn: StandInApi, groupVersion: string) =>
  standIn.requests.filter(r => r.path.startsWith(`/apis/${groupVersion}`));

/** Waits until the report has the privileged pod's failure. */
const withFailures = <T extends { results: PolicyReport["results"] }>(read: () => T | undefined) =>
  eventually(() => {
    const found = read();
    if (!failures(found).includes("trainer-old security-context/privileged"))
      throw new Error("no report with the privileged pod's failure yet");
    return found!;
  }, 20_000);

describe("reports.api", () => {
  it("openreports: an openreports.io Report per namespace, with the message and fix of each result; no PolicyReport", async () => {
    const { api } = await start("openreports");
    const report = await withFailures(() => reportOf(api));
    expect(report.apiVersion).toBe(OPENREPORTS);
    expect(report.kind).toBe("Report");
    expect(report.source).toBe("admission-guard");
    expect(report.metadata.labels).toEqual({ "app.kubernetes.io/managed-by": "admission-guard" });
    expect(failures(report)).not.toContain("trainer-ok security-context/privileged");
    const privileged = report.results.find(r => r.rule === "privileged" && r.result === "fail")!;
    expect(privileged.message).toContain(
      'container "train" must not set securityContext.privileged=true',
    );
    expect(privileged.properties?.fix).toContain("privileged to false");
    expect(report.summary.fail).toBe(failures(report).length);
    expect(policyReportOf(api)).toBeUndefined();
    expect(requestsTo(api, WGPOLICYK8S)).toEqual([]);
  });

  it("both: a PolicyReport and a Report, with the same results and summary", async () => {
    const { api } = await start("both");
    await withFailures(() => reportOf(api));
    await withFailures(() => policyReportOf(api));
    // Written from one report, to each API in turn: equal once both writes are in.
    const [report, policyReport] = await eventually(() => {
      const pair = [reportOf(api)!, policyReportOf(api)!] as const;
      if (JSON.stringify(pair[0].results) !== JSON.stringify(pair[1].results))
        throw new Error("the two reports differ yet");
      return pair;
    }, 20_000);
    expect(report.results).toEqual(policyReport.results);
    expect(report.summary).toEqual(policyReport.summary);
    expect([report.apiVersion, policyReport.apiVersion]).toEqual([OPENREPORTS, WGPOLICYK8S]);
  });

  it("auto: whichever the API server serves (here only OpenReports)", async () => {
    const { api } = await start("auto", { notServed: [WGPOLICYK8S] });
    await withFailures(() => reportOf(api));
    // Discovery asked once; nothing written where nothing is served.
    expect(requestsTo(api, WGPOLICYK8S).map(r => `${r.method} ${r.path}`)).toEqual([
      `GET /apis/${WGPOLICYK8S}`,
    ]);
  });

  it("an API not served is said once and never written to; the watcher goes on with the rest", async () => {
    const { api, watcher } = await start("both", { notServed: [OPENREPORTS] });
    await withFailures(() => policyReportOf(api));
    // A change, and its write (at least one interval later): still one line, no request but
    // discovery's to the API that is not served.
    api.put(pod("trainer-new", true));
    await eventually(() => {
      if (!failures(policyReportOf(api)).includes("trainer-new security-context/privileged"))
        throw new Error("trainer-new not reported yet");
    }, 20_000);
    const said = watcher.logs().match(/does not serve reports\.openreports\.io\/v1alpha1/g) ?? [];
    expect(said).toHaveLength(1);
    expect(requestsTo(api, OPENREPORTS).map(r => `${r.method} ${r.path}`)).toEqual([
      `GET /apis/${OPENREPORTS}`,
    ]);
    expect(watcher.logs()).not.toMatch(/could not write the namespace's PolicyReport/);
  });

  it("openreports alone, not served: said once, nothing written or judged, the watcher keeps running", async () => {
    const { api, watcher } = await start("openreports", { notServed: [OPENREPORTS] });
    await eventually(() => {
      if (!/does not serve reports\.openreports\.io/.test(watcher.logs()))
        throw new Error("not said yet");
    }, 20_000);
    // The fix Events still come (the watcher lives on): a pod the module fixed gets one.
    api.put({
      ...pod("trainer-fixed", false),
      metadata: {
        ...pod("trainer-fixed", false).metadata,
        uid: "uid-trainer-fixed",
        annotations: { "admission-guard.dev/fixed": "security-context/runAsNonRoot" },
      },
    });
    await eventually(() => {
      if (!api.list("Event", NS).length) throw new Error("no Event yet");
    }, 20_000);
    expect(watcher.logs().match(/does not serve reports\.openreports\.io/g)).toHaveLength(1);
    expect(requestsTo(api, OPENREPORTS)).toHaveLength(1);
    expect(policyReportOf(api)).toBeUndefined();
    // No report to write, no scan: only the Pods the Events need are watched, no workload kind.
    expect([api.watching("Pod"), api.watching("Deployment")]).toEqual([1, 0]);
  });
});
