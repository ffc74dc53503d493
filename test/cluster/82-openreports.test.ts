// OpenReports on a real API server: the OpenReports CRDs served (test/fixtures/openreports), the
// module built and run with reports.api=both under its own RBAC (the build's openreports.io grant),
// and the watcher writing each namespace's Report beside its PolicyReport with the same results
// as the PolicyReports case (80-exemptions-and-reports) asserts: what enforce would deny fails,
// and a fixed pod leaves no failure.
import { join } from "node:path";
import { stringify } from "yaml";
import type { KubeObject } from "../../lib/objects/pod";
import { REPO_ROOT } from "../support/controller";
import { eventually } from "../support/wait";
import { applyObjects, connect, kubectl, namespace, useModule } from "./support/cluster";
import { buildVariant } from "./support/variant-build";

const NS = "or-team";
const SETTING = { ADMISSION_GUARD_REPORTS_API: "both" };
const cluster = connect();
const guard = useModule(cluster, {
  watcher: true,
  env: { ...SETTING, ADMISSION_GUARD_REPORTS_INTERVAL_SECONDS: "2" },
});

interface Report {
  apiVersion: string;
  kind: string;
  summary: Record<string, number>;
  results: { rule: string; result: string; resources: { name: string }[] }[];
}

const teamPod = (name: string, securityContext?: Record<string, unknown>): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: NS, labels: { "app.kubernetes.io/component": "trainer" } },
  spec: { containers: [{ name: "train", image: "ghcr.io/org/trainer:1", securityContext }] },
});

/** `kubectl get <resource> admission-guard -n NS -o json`. */
async function read(resource: "reports.openreports.io" | "policyreports.wgpolicyk8s.io") {
  const r = await kubectl(cluster, ["get", resource, "admission-guard", "-n", NS, "-o", "json"]);
  if (r.code !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout) as Report;
}
const failing = (report: Report) =>
  report.results.filter(r => r.result === "fail").map(r => `${r.resources[0].name} ${r.rule}`);
const untimed = (report: Report) =>
  report.results.map(r => ({ ...r, timestamp: undefined }) as Report["results"][number]);

/** The Report and the PolicyReport of NS once both say the same and `ready` holds of them. */
const bothSaying = (ready: (report: Report) => string | undefined) =>
  eventually(async () => {
    const [report, policyReport] = [
      await read("reports.openreports.io"),
      await read("policyreports.wgpolicyk8s.io"),
    ];
    const notYet = ready(report) ?? ready(policyReport);
    if (notYet) throw new Error(notYet);
    expect(untimed(report)).toEqual(untimed(policyReport));
    return { report, policyReport };
  }, 30_000);

beforeAll(async () => {
  const dist = await buildVariant("reports-both", SETTING);
  // As a cluster with no policy engine: the PolicyReport CRD shipped for that case, and the
  // OpenReports CRDs as a producer or Policy Reporter would have installed them.
  for (const file of ["deploy/policyreport-crd.yaml", "test/fixtures/openreports/crds.yaml"]) {
    const crd = await kubectl(cluster, ["apply", "-f", join(REPO_ROOT, file)]);
    if (crd.code !== 0) throw new Error(crd.stderr);
  }
  // Served before the watcher starts: it asks discovery once, at its start.
  for (const path of ["/apis/openreports.io/v1alpha1", "/apis/wgpolicyk8s.io/v1alpha2"])
    await eventually(async () => {
      const res = await cluster.admin.get(path);
      expect(res.status).toBe(200);
    }, 30_000);
  await applyObjects(cluster, [namespace(NS, { "admission-guard.dev/mode": "audit" })]);
  await guard.install({ dist });
}, 300_000);

test("a namespace in audit mode gets a Report saying what enforce would deny, as its PolicyReport does", async () => {
  await eventually(async () => {
    const r = await kubectl(
      cluster,
      ["apply", "-f", "-"],
      stringify(teamPod("legacy", { privileged: true })),
    );
    if (r.code !== 0) throw new Error(r.stderr);
  }, 15_000);
  const { report } = await bothSaying(r =>
    failing(r).includes("legacy privileged") ? undefined : "legacy not failing yet",
  );
  expect(report.apiVersion).toBe("openreports.io/v1alpha1");
  expect(report.kind).toBe("Report");
  const listed = await kubectl(cluster, ["get", "reports.openreports.io", "-A"]);
  expect(listed.stdout).toMatch(new RegExp(`${NS}\\s+admission-guard\\s+\\d+\\s+[1-9]`));
});

test("both change when the team fixes the pod", async () => {
  expect((await kubectl(cluster, ["delete", "pod", "legacy", "-n", NS])).code).toBe(0);
  const fixed = await kubectl(cluster, ["apply", "-f", "-"], stringify(teamPod("trainer")));
  expect(fixed.code).toBe(0);
  const { report, policyReport } = await bothSaying(r =>
    failing(r).length
      ? `still failing: ${failing(r).join(", ")}`
      : r.results.some(x => x.resources[0].name === "trainer")
        ? undefined
        : "trainer not reported yet",
  );
  expect(report.summary).toEqual(policyReport.summary);
  expect(report.summary.fail).toBe(0);
  expect(report.summary.pass).toBeGreaterThan(0);
});

test("the build's RBAC was enough: nothing forbidden in the watcher's log, and no API said missing", () => {
  const logs = guard.module!.watcher!.logs();
  expect(logs).not.toMatch(/forbidden/i);
  expect(logs).not.toMatch(/does not serve/);
});
