// OpenReports: a namespace's PolicyReport converted to an openreports.io Report (the same content),
// which API setting reports.api writes to, and one scan writing both through one store.
import { policies } from "../../../capabilities";
import { SnapshotCluster } from "../../../lib/cluster/view";
import type { EngineDeps } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import {
  buildReport,
  reportContent,
  type ObjectResults,
  type PolicyReport,
} from "../../../lib/reports/policy-report";
import { toOpenReport } from "../../../lib/reports/openreports";
import {
  chooseApis,
  FanOutStore,
  OPENREPORTS,
  WGPOLICYK8S,
  type ReportApi,
} from "../../../lib/reports/report-apis";
import { ReportScanner, type ReportStore } from "../../../lib/reports/scanner";
import { defaultSettings, parseSettings, REPORTS_API } from "../../../lib/settings";

const NS = "ml";

function results(name: string, findings: ObjectResults["findings"]): ObjectResults {
  return {
    ref: { apiVersion: "v1", kind: "Pod", namespace: NS, name },
    findings,
    judgedBy: [{ name: "labels", rules: ["require-component", "x"] } as never],
  };
}

const objects = [
  results("a", [
    { policy: "labels", rule: "require-component", result: "fail", message: "m", fix: "f" },
  ]),
  results("b", [
    { policy: "labels", rule: "x", result: "skip", message: "waived", exemption: "ns/e" },
  ]),
];

describe("a Report from a PolicyReport", () => {
  it("is an openreports.io/v1alpha1 Report with the same name, labels, summary and results", () => {
    const policyReport = buildReport(NS, objects, 100, 1700000000);
    const report = toOpenReport(policyReport);
    expect(report.apiVersion).toBe("openreports.io/v1alpha1");
    expect(report.kind).toBe("Report");
    expect(report.source).toBe("admission-guard");
    expect(report.metadata).toEqual({
      name: "admission-guard",
      namespace: NS,
      labels: { "app.kubernetes.io/managed-by": "admission-guard" },
    });
    expect(report.summary).toEqual({ pass: 2, fail: 1, warn: 0, error: 0, skip: 1 });
    expect(report.results).toEqual(policyReport.results);
    expect(report.results[0]).toMatchObject({
      source: "admission-guard",
      policy: "labels",
      rule: "require-component",
      result: "fail",
      properties: { fix: "f" },
      timestamp: { seconds: 1700000000, nanos: 0 },
      resources: [{ apiVersion: "v1", kind: "Pod", namespace: NS, name: "a" }],
    });
    // Its content, as the writes compare it, is the PolicyReport's: one digest for both APIs.
    expect(reportContent(report as unknown as PolicyReport)).toBe(reportContent(policyReport));
  });

  it("keeps maxResults' cut and the annotation saying how many were left out", () => {
    const report = toOpenReport(buildReport(NS, objects, 2, 1));
    expect(report.results.map(r => r.result)).toEqual(["fail", "skip"]);
    expect(report.summary.pass).toBe(2);
    expect(report.metadata.annotations).toEqual({ "admission-guard.dev/results-omitted": "2" });
  });
});

describe("which API reports.api writes to", () => {
  const served =
    (...names: ReportApi["name"][]) =>
    (api: ReportApi) =>
      names.includes(api.name);
  const names = (apis: ReportApi[]) => apis.map(a => a.name);

  it("is a setting: wgpolicyk8s by default, openreports, both or auto", () => {
    expect(defaultSettings().reports.api).toBe("wgpolicyk8s");
    expect(REPORTS_API).toEqual(["wgpolicyk8s", "openreports", "both", "auto"]);
    expect(parseSettings({ reports: { api: "openreports" } }, "t").reports.api).toBe("openreports");
    expect(() => parseSettings({ reports: { api: "openreport" } }, "t")).toThrow(/reports\.api/);
  });

  it("each named API the server serves; one it does not is named, never written", () => {
    expect(chooseApis("wgpolicyk8s", served())).toEqual({ write: [WGPOLICYK8S], notServed: [] });
    expect(chooseApis("openreports", served("openreports"))).toEqual({
      write: [OPENREPORTS],
      notServed: [],
    });
    expect(chooseApis("openreports", served("wgpolicyk8s"))).toEqual({
      write: [],
      notServed: [OPENREPORTS],
    });
    const both = chooseApis("both", served("wgpolicyk8s"));
    expect([names(both.write), names(both.notServed)]).toEqual([["wgpolicyk8s"], ["openreports"]]);
    expect(names(chooseApis("both", served("wgpolicyk8s", "openreports")).write)).toEqual([
      "wgpolicyk8s",
      "openreports",
    ]);
  });

  it("auto: whichever the server serves, both if both", () => {
    expect(names(chooseApis("auto", served("openreports")).write)).toEqual(["openreports"]);
    expect(names(chooseApis("auto", served("wgpolicyk8s")).write)).toEqual(["wgpolicyk8s"]);
    expect(names(chooseApis("auto", served("wgpolicyk8s", "openreports")).write)).toEqual([
      "wgpolicyk8s",
      "openreports",
    ]);
    expect(names(chooseApis("auto", served()).notServed)).toEqual(["wgpolicyk8s", "openreports"]);
  });

  it("an API discovery could not tell about is written to (its failed writes say why)", () => {
    expect(names(chooseApis("openreports", () => undefined).write)).toEqual(["openreports"]);
  });
});

/** A store of one API: what it holds is what the API server would (the converted report). */
class ApiStore implements ReportStore {
  readonly stored = new Map<string, Record<string, unknown>>();
  writes = 0;
  failing = false;
  constructor(private readonly api: ReportApi) {}
  async read(namespace: string) {
    return this.stored.get(namespace) as unknown as PolicyReport | undefined;
  }
  async write(report: PolicyReport) {
    if (this.failing) throw new Error(`${this.api.gvk.plural} is not served`);
    this.writes++;
    const converted = structuredClone(this.api.convert(report)) as Record<string, unknown>;
    this.stored.set(report.metadata.namespace, converted);
  }
  async remove(namespace: string) {
    this.stored.delete(namespace);
  }
}

function pod(name: string, privileged: boolean): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: NS, uid: `uid-${name}` },
    spec: {
      containers: [{ name: "c", image: "ghcr.io/org/t:1", securityContext: { privileged } }],
    },
    status: { phase: "Running" },
  };
}

function scan(store: ReportStore) {
  const deps: EngineDeps = {
    settings: defaultSettings(),
    cluster: new SnapshotCluster([{ apiVersion: "v1", kind: "Namespace", metadata: { name: NS } }]),
    policies,
  };
  return new ReportScanner(() => deps, store, {
    intervalMs: 0,
    maxResults: 1000,
    debounceMs: 60_000,
  });
}

const written = async (scanner: ReportScanner) => {
  scanner.flushPending();
  await scanner.idle();
};

describe("one scan, both APIs", () => {
  it("writes the same results to each, and after a restart neither again while unchanged", async () => {
    const policyReports = new ApiStore(WGPOLICYK8S);
    const reports = new ApiStore(OPENREPORTS);
    const scanner = scan(new FanOutStore([policyReports, reports]));
    await scanner.observe(pod("old", true));
    await scanner.observe(pod("ok", false));
    await written(scanner);
    const policyReport = policyReports.stored.get(NS)!;
    const report = reports.stored.get(NS)!;
    expect([policyReport.kind, report.kind]).toEqual(["PolicyReport", "Report"]);
    expect(report.apiVersion).toBe("openreports.io/v1alpha1");
    expect(report.results).toEqual(policyReport.results);
    expect(report.summary).toEqual(policyReport.summary);
    const privileged = (report.results as PolicyReport["results"])
      .filter(r => r.rule === "privileged" && r.result === "fail")
      .map(r => r.resources[0].name);
    expect(privileged).toEqual(["old"]);

    const again = scan(new FanOutStore([policyReports, reports]));
    await again.observe(pod("old", true));
    await again.observe(pod("ok", false));
    await written(again);
    expect([policyReports.writes, reports.writes]).toEqual([1, 1]);
  });

  it("writes both again when one of them holds another content (or none)", async () => {
    const policyReports = new ApiStore(WGPOLICYK8S);
    const reports = new ApiStore(OPENREPORTS);
    const first = scan(new FanOutStore([policyReports, reports]));
    await first.observe(pod("old", true));
    await written(first);
    reports.stored.clear();
    const again = scan(new FanOutStore([policyReports, reports]));
    await again.observe(pod("old", true));
    await written(again);
    expect([policyReports.writes, reports.writes]).toEqual([2, 2]);
    expect(reports.stored.get(NS)?.results).toEqual(policyReports.stored.get(NS)?.results);
  });

  it("a failing API does not stop the other's write; the write is tried again", async () => {
    const policyReports = new ApiStore(WGPOLICYK8S);
    const reports = new ApiStore(OPENREPORTS);
    reports.failing = true;
    const scanner = scan(new FanOutStore([policyReports, reports]));
    await scanner.observe(pod("old", true));
    await written(scanner);
    expect(policyReports.stored.has(NS)).toBe(true);
    expect(scanner.stats.failures).toBe(1);
    reports.failing = false;
    await scanner.observe(pod("new", false));
    await written(scanner);
    expect(reports.stored.get(NS)?.results).toEqual(policyReports.stored.get(NS)?.results);
  });
});
