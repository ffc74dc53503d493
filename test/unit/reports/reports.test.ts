// PolicyReports: an object's results, a namespace's report, and the scan that keeps them written
// with bounded writes. The module's real policies over a snapshot; reports go to a list.
import { policies } from "../../../capabilities";
import { SnapshotCluster } from "../../../lib/cluster/view";
import type { EngineDeps } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import type { Policy } from "../../../lib/engine/policy";
import {
  buildReport,
  objectResults,
  passedRules,
  reportContent,
  type ObjectResults,
  type PolicyReport,
} from "../../../lib/reports/policy-report";
import { ReportScanner, type ReportStore } from "../../../lib/reports/scanner";
import { ScannerOverApi } from "./support";
import { defaultSettings, parseSettings } from "../../../lib/settings";
import { asArea } from "../../support/policies";

const NS = "ml";

function pod(
  name: string,
  securityContext: Record<string, unknown> = {},
  extra: Record<string, unknown> = {},
): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: NS,
      uid: `uid-${name}`,
      labels: { "app.kubernetes.io/component": "trainer" },
    },
    spec: {
      containers: [{ name: "c", image: "ghcr.io/org/trainer:1", securityContext }],
      ...extra,
    },
    status: { phase: "Running" },
  };
}

/** A pod as the module leaves it: restricted, on its own ServiceAccount. */
const fixedPod = (name: string) =>
  pod(
    name,
    {
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"] },
      readOnlyRootFilesystem: true,
    },
    {
      securityContext: {
        runAsNonRoot: true,
        runAsUser: 1000,
        seccompProfile: { type: "RuntimeDefault" },
      },
      serviceAccountName: "workload",
      automountServiceAccountToken: false,
    },
  );

class ListStore implements ReportStore {
  readonly stored = new Map<string, PolicyReport>();
  writes = 0;
  removals = 0;
  async read(namespace: string) {
    return this.stored.get(namespace);
  }
  async write(report: PolicyReport) {
    this.writes++;
    this.stored.set(report.metadata.namespace, structuredClone(report));
  }
  async remove(namespace: string) {
    this.removals++;
    this.stored.delete(namespace);
  }
}

function setup(
  objects: KubeObject[] = [],
  options: Partial<{ intervalMs: number; maxResults: number; debounceMs: number }> = {},
  settings = defaultSettings(),
) {
  const deps: EngineDeps = {
    settings,
    cluster: new SnapshotCluster([
      { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
      ...objects,
    ]),
    policies,
  };
  const store = new ListStore();
  // Judging again reads the objects again: from those the test handed over (report-scan-support).
  const scanner = new ScannerOverApi(() => deps, store, {
    intervalMs: options.intervalMs ?? 0,
    maxResults: options.maxResults ?? 1000,
    // Long enough that no write falls due by itself during a test (on a busy machine too): the
    // tests write with flushPending, as the timers would.
    debounceMs: options.debounceMs ?? 60_000,
  });
  return { deps, store, scanner };
}

const written = async (scanner: ReportScanner) => {
  scanner.flushPending();
  await scanner.idle();
};

const resultsOf = (report: PolicyReport | undefined, result?: string) =>
  (report?.results ?? [])
    .filter(r => !result || r.result === result)
    .map(r => `${r.resources[0].name} ${r.policy}/${r.rule} ${r.result}`);

describe("an object's results and a namespace's report", () => {
  const results = (o: Partial<ObjectResults> & { name: string }): ObjectResults => ({
    ref: { apiVersion: "v1", kind: "Pod", namespace: NS, name: o.name },
    findings: o.findings ?? [],
    judgedBy: o.judgedBy ?? [],
  });
  const judgedBy = (name: string, rules: string[]): Policy[] => [
    asArea({ name, description: "", rules }),
  ];

  it("says fail for what enforce would deny, warn for what only warns, skip for what is waived, error for the module's own", () => {
    const r = objectResults(pod("p"), NS, {
      violations: [
        { capability: "security-context", rule: "privileged", message: "m1", fix: "f1" },
        {
          capability: "service-account",
          rule: "secret-access",
          message: "m2",
          fix: "f2",
          severity: "warn",
        },
        { capability: "labels", rule: "internal-error", message: "m3", fix: "f3" },
      ],
      waived: [
        {
          violation: {
            capability: "image-registry",
            rule: "registry-not-allowed",
            message: "m4",
            fix: "f4",
          },
          exemption: "x/y",
        },
      ],
      judgedBy: policies.filter(p => ["security-context", "image-registry"].includes(p.name)),
      skipped: [],
    });
    expect(r.findings.map(f => `${f.policy}/${f.rule} ${f.result}`)).toEqual([
      "security-context/privileged fail",
      "service-account/secret-access warn",
      "labels/internal-error error",
      "image-registry/registry-not-allowed skip",
    ]);
    expect(r.findings[3].message).toBe("waived by Exemption x/y: m4");
    const passed = passedRules(r);
    expect(passed.get("security-context")).not.toContain("privileged");
    expect(passed.get("security-context")).toContain("runAsNonRoot");
    expect(passed.get("image-registry")).not.toContain("registry-not-allowed");
  });

  it("orders fail, error, warn, skip, pass; keeps maxResults; the summary counts them all", () => {
    const objects = [
      results({
        name: "b",
        findings: [
          { policy: "labels", rule: "require-component", result: "fail", message: "m", fix: "f" },
        ],
        judgedBy: judgedBy("labels", ["require-component", "x", "y"]),
      }),
      results({
        name: "a",
        findings: [
          { policy: "sc", rule: "r", result: "warn", message: "m" },
          { policy: "sc", rule: "e", result: "error", message: "m" },
        ],
      }),
    ];
    const full = buildReport(NS, objects, 100, 1700000000);
    expect(full.results.map(r => `${r.resources[0].name} ${r.rule} ${r.result}`)).toEqual([
      "b require-component fail",
      "a e error",
      "a r warn",
      "b x pass",
      "b y pass",
    ]);
    expect(full.summary).toEqual({ pass: 2, fail: 1, warn: 1, error: 1, skip: 0 });
    expect(full.results[0]).toMatchObject({
      source: "admission-guard",
      policy: "labels",
      scored: true,
      timestamp: { seconds: 1700000000, nanos: 0 },
      properties: { fix: "f" },
      resources: [{ apiVersion: "v1", kind: "Pod", namespace: NS, name: "b" }],
    });
    expect(full.metadata).toEqual({
      name: "admission-guard",
      namespace: NS,
      labels: { "app.kubernetes.io/managed-by": "admission-guard" },
    });
    const cut = buildReport(NS, objects, 2, 1700000000);
    expect(cut.results.map(r => r.result)).toEqual(["fail", "error"]);
    expect(cut.summary).toEqual(full.summary);
    expect(cut.metadata.annotations).toEqual({ "admission-guard.dev/results-omitted": "3" });
  });

  it("a report's content does not change with the time it was built", () => {
    const objects = [results({ name: "a", judgedBy: judgedBy("labels", ["x"]) })];
    expect(reportContent(buildReport(NS, objects, 10, 1))).toBe(
      reportContent(buildReport(NS, objects, 10, 2)),
    );
  });
});

describe("the scan", () => {
  it("writes a report for a namespace with violations, and changes it when they are fixed", async () => {
    const { scanner, store } = setup();
    await scanner.observe(pod("trainer-1", { privileged: true }));
    await scanner.observe(fixedPod("trainer-2"));
    await written(scanner);
    const first = store.stored.get(NS)!;
    expect(resultsOf(first, "fail")).toContain("trainer-1 security-context/privileged fail");
    expect(resultsOf(first, "fail").filter(r => r.startsWith("trainer-2"))).toEqual([]);
    expect(resultsOf(first, "pass")).toContain("trainer-2 security-context/privileged pass");
    expect(first.summary.fail).toBeGreaterThan(0);

    // The team fixes it: the old pod goes, a fixed one comes.
    scanner.forget(pod("trainer-1"));
    await scanner.observe(fixedPod("trainer-3"));
    await written(scanner);
    const second = store.stored.get(NS)!;
    expect(second.summary.fail).toBe(0);
    expect(resultsOf(second).some(r => r.startsWith("trainer-1"))).toBe(false);
    expect(resultsOf(second, "pass")).toContain("trainer-3 security-context/privileged pass");
    expect(store.writes).toBe(2);
  });

  it("batches a burst into one write, and writes nothing when nothing changed", async () => {
    const { scanner, store } = setup();
    for (let i = 0; i < 50; i++) await scanner.observe(pod(`p-${i}`, { privileged: true }));
    await written(scanner);
    expect(store.writes).toBe(1);
    expect(store.stored.get(NS)!.summary.fail).toBeGreaterThanOrEqual(50);
    // A status update (same spec) is not judged again; judging again with the same answer writes nothing.
    const again = pod("p-0", { privileged: true });
    (again.status as Record<string, unknown>).phase = "Running";
    await scanner.observe(again);
    expect(scanner.stats.unchanged).toBe(1);
    await scanner.rejudge();
    await written(scanner);
    expect(store.writes).toBe(1);
  });

  it("writes a namespace at most once per interval", async () => {
    const { scanner, store } = setup([], { intervalMs: 60_000 });
    await scanner.observe(pod("a", { privileged: true }));
    await written(scanner);
    expect(store.writes).toBe(1);
    await scanner.observe(pod("b", { privileged: true }));
    // The change waits for the interval: no write yet, and none until its timer fires.
    await new Promise(r => setTimeout(r, 50));
    expect(store.writes).toBe(1);
    await written(scanner); // the interval ends (the test fires the timer at once)
    expect(store.writes).toBe(2);
  });

  it("a change that arrives while its namespace is being written waits for the next interval", async () => {
    const { scanner, store } = setup([], { intervalMs: 60_000 });
    let release!: () => void;
    const write = store.write.bind(store);
    store.write = async r => {
      await new Promise<void>(done => (release = done));
      return write(r);
    };
    await scanner.observe(pod("a", { privileged: true }));
    scanner.flushPending();
    await new Promise(r => setTimeout(r, 20)); // the write has started and waits
    await scanner.observe(pod("b", { privileged: true })); // a change during the write
    release();
    await scanner.idle();
    expect(store.writes).toBe(1);
    // The change is not lost: it is written once the interval has passed (the test fires it now).
    store.write = write;
    await written(scanner);
    expect(store.writes).toBe(2);
    expect(resultsOf(store.stored.get(NS), "fail")).toContain("b security-context/privileged fail");
  });

  it("judges a burst in slices, letting the event loop run in between", async () => {
    const { scanner } = setup();
    let judgedWhenTimerRan = -1;
    setTimeout(() => (judgedWhenTimerRan = scanner.stats.judged), 0);
    const all = Array.from({ length: 3000 }, (_, i) =>
      scanner.observe(pod(`p-${i}`, { privileged: true })),
    );
    await Promise.all(all);
    expect(scanner.stats.judged).toBe(3000);
    // A timer set before the burst ran while it was being judged, not after.
    expect(judgedWhenTimerRan).toBeGreaterThanOrEqual(0);
    expect(judgedWhenTimerRan).toBeLessThan(3000);
  });

  it("a burst longer than the debounce is written once, complete, not half done and again later", async () => {
    // A 5 ms debounce: the write falls due while the burst is still being judged.
    const { scanner, store } = setup([], { intervalMs: 60_000, debounceMs: 5 });
    await Promise.all(
      Array.from({ length: 3000 }, (_, i) => scanner.observe(pod(`p-${i}`, { privileged: true }))),
    );
    await scanner.idle();
    scanner.flushPending(); // in case the burst ended before the debounce
    await scanner.idle();
    expect(store.writes).toBe(1);
    const report = store.stored.get(NS)!;
    expect(report.summary.fail).toBeGreaterThanOrEqual(3000);
  });

  it("judges only the latest version of an object that changed while it waited", async () => {
    const { scanner, store } = setup();
    const ahead = scanner.observe(fixedPod("z")); // judged first: "a" waits behind it
    const first = scanner.observe(pod("a", { privileged: true }));
    const second = scanner.observe(fixedPod("a"));
    await Promise.all([ahead, first, second]);
    expect(scanner.stats.judged).toBe(2);
    await written(scanner);
    expect(resultsOf(store.stored.get(NS), "fail")).toEqual([]);
  });

  it("a pod created again under its name (a StatefulSet's) is reported with its new uid", async () => {
    const { scanner, store } = setup();
    await scanner.observe(pod("db-0", { privileged: true }));
    const again = pod("db-0", { privileged: true });
    again.metadata!.uid = "uid-db-0-second";
    await scanner.observe(again);
    expect(scanner.stats.judged).toBe(2);
    await written(scanner);
    const uids = new Set(store.stored.get(NS)!.results.map(r => r.resources[0].uid));
    expect([...uids]).toEqual(["uid-db-0-second"]);
  });

  it("after a restart, does not write again a report that is already stored as it would write it", async () => {
    const first = setup();
    await first.scanner.observe(pod("a", { privileged: true }));
    await written(first.scanner);
    const restarted = setup();
    restarted.store.stored.set(NS, first.store.stored.get(NS)!);
    await restarted.scanner.observe(pod("a", { privileged: true }));
    await written(restarted.scanner);
    expect(restarted.store.writes).toBe(0);
    expect(restarted.scanner.stats.unchangedReports).toBe(1);
  });

  it("removes the report when nothing in the namespace is left to report", async () => {
    const { scanner, store } = setup();
    await scanner.observe(pod("a", { privileged: true }));
    await written(scanner);
    scanner.forget(pod("a"));
    await written(scanner);
    expect(store.stored.has(NS)).toBe(false);
    expect(store.removals).toBe(1);
  });

  it("reports what Exemptions waive as skip, naming the Exemption", async () => {
    const exemption = {
      apiVersion: "admission-guard.dev/v1alpha1",
      kind: "Exemption",
      metadata: { name: "trainer", namespace: "admission-guard-exemptions" },
      spec: {
        reason: "vendor image",
        expires: new Date(Date.now() + 86400_000).toISOString(),
        match: { namespaces: [NS], names: ["a"] },
        waive: [
          { capability: "security-context", rules: ["privileged", "allowPrivilegeEscalation"] },
        ],
      },
    };
    const { scanner, store } = setup([exemption]);
    await scanner.observe(pod("a", { privileged: true }));
    await written(scanner);
    const report = store.stored.get(NS)!;
    expect(resultsOf(report, "skip")).toEqual([
      "a security-context/privileged skip",
      "a security-context/allowPrivilegeEscalation skip",
      // The baseline checks restricted replaces, not evaluated at restricted (issue 27).
      "a security-context/capabilities_baseline skip",
      "a security-context/hostPathVolumes skip",
      "a security-context/procMount_baseline skip",
      "a security-context/seccompProfile_baseline skip",
      // Not evaluated on a stored pod (it is in the quota's usage already): skip, not pass.
      "a resource-quota/quota-exceeded skip",
      "a resource-quota/quota-must-specify skip",
      // The rules of capabilities off by default (team-label): switched off, not evaluated.
      ...policies
        .filter(p => p.switchedBy && !defaultSettings()[p.switchedBy].enabled)
        .flatMap(p => p.rules.map(rule => `a ${p.name}/${rule} skip`)),
    ]);
    expect(report.results.find(r => r.result === "skip")?.properties?.exemption).toBe(
      "admission-guard-exemptions/trainer",
    );
  });

  it("judges running Pods and the workloads people write, not finished pods or a Deployment's ReplicaSets", async () => {
    const { scanner } = setup();
    const done = pod("finished", { privileged: true });
    (done.status as Record<string, unknown>).phase = "Succeeded";
    await scanner.observe(done);
    await scanner.observe({
      apiVersion: "apps/v1",
      kind: "ReplicaSet",
      metadata: {
        name: "rs",
        namespace: NS,
        ownerReferences: [
          { apiVersion: "apps/v1", kind: "Deployment", name: "d", uid: "u", controller: true },
        ],
      },
      spec: { template: { spec: { containers: [{ name: "c", image: "x" }] } } },
    });
    await scanner.observe({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "cm", namespace: NS },
    });
    expect(scanner.size()).toBe(0);
    await scanner.observe({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "d", namespace: NS },
      spec: {
        template: {
          metadata: { labels: {} },
          spec: { containers: [{ name: "c", image: "ghcr.io/x:1" }] },
        },
      },
    });
    expect(scanner.size()).toBe(1);
    // A pod that finishes leaves the report.
    await scanner.observe(pod("runs"));
    const finished = pod("runs");
    (finished.status as Record<string, unknown>).phase = "Failed";
    await scanner.observe(finished);
    expect(scanner.size()).toBe(1);
  });

  it("a workload whose controller is of a kind the module does not judge (or made up) is reported itself", async () => {
    // Anyone who writes a Deployment writes its ownerReferences: `controller: true` on a
    // ConfigMap of theirs must not take it out of the report.
    const { scanner } = setup();
    const owned = (kind: string, apiVersion: string): KubeObject => ({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: {
        name: `owned-by-${kind.toLowerCase()}`,
        namespace: NS,
        ownerReferences: [{ apiVersion, kind, name: "o", uid: "u", controller: true }],
      },
      spec: {
        template: {
          metadata: { labels: {} },
          spec: { containers: [{ name: "c", image: "ghcr.io/x:1" }] },
        },
      },
    });
    await scanner.observe(owned("ConfigMap", "v1"));
    await scanner.observe(owned("Workflow", "argoproj.io/v1alpha1"));
    expect(scanner.size()).toBe(2);
    // A kind it judges (its template was judged when it was applied): its copy is not. KServe's
    // raw Deployment of an InferenceService too (its pods were built and judged at apply).
    await scanner.observe(owned("JobSet", "jobset.x-k8s.io/v1alpha2"));
    await scanner.observe(owned("InferenceService", "serving.kserve.io/v1beta1"));
    expect(scanner.size()).toBe(2);
  });

  it("does not count a stored pod against its quota again (it is in the quota's usage already)", async () => {
    const quota = {
      apiVersion: "v1",
      kind: "ResourceQuota",
      metadata: { name: "q", namespace: NS },
      spec: { hard: { "requests.cpu": "1" } },
      status: { hard: { "requests.cpu": "1" }, used: { "requests.cpu": "1" } },
    };
    const { scanner, store } = setup([
      quota,
      {
        apiVersion: "v1",
        kind: "LimitRange",
        metadata: { name: "l", namespace: NS },
        spec: { limits: [] },
      },
    ]);
    const p = fixedPod("uses-the-quota");
    (p.spec as { containers: Record<string, unknown>[] }).containers[0].resources = {
      requests: { cpu: "1" },
      limits: { cpu: "1" },
    };
    await scanner.observe(p);
    await written(scanner);
    expect(resultsOf(store.stored.get(NS), "fail")).toEqual([]);
  });

  it("skips ignored namespaces and those whose mode is off", async () => {
    const settings = parseSettings({ ignoredNamespaces: [NS] });
    const { scanner, store } = setup([], {}, settings);
    await scanner.observe(pod("a", { privileged: true }));
    await written(scanner);
    expect(store.writes).toBe(0);
  });

  it("keeps writing after a failed write: the next attempt writes the report", async () => {
    const { scanner, store } = setup();
    const write = store.write.bind(store);
    let fail = true;
    store.write = async r => {
      if (fail) throw new Error("the API server is away");
      return write(r);
    };
    await scanner.observe(pod("a", { privileged: true }));
    await written(scanner);
    expect(scanner.stats.failures).toBe(1);
    fail = false;
    await written(scanner);
    expect(store.stored.get(NS)?.summary.fail).toBeGreaterThan(0);
  });
});

describe("skip, never pass, for what was not evaluated", () => {
  const results = (report: PolicyReport | undefined, name: string, policy: string) =>
    (report?.results ?? [])
      .filter(r => r.resources[0].name === name && r.policy === policy)
      .map(r => `${r.rule} ${r.result}`);

  it("a capability switched off: each of its rules skip, saying so; the others judged", async () => {
    const settings = parseSettings({ labels: { enabled: false } });
    const { store, scanner } = setup([], {}, settings);
    await scanner.observe({
      ...pod("unlabelled"),
      metadata: { ...pod("unlabelled").metadata, labels: {} },
    });
    await written(scanner);
    const report = store.stored.get(NS);
    expect(results(report, "unlabelled", "labels")).toEqual(["require-component skip"]);
    const skip = report!.results.find(r => r.policy === "labels")!;
    expect(skip.message).toBe(
      "not evaluated: labels is switched off (settings labels.enabled: false)",
    );
    expect(results(report, "unlabelled", "security-context")).toContain("runAsNonRoot fail");
  });

  it("a running pod's quota and node fit are not judged again: skip with the reason", async () => {
    const placed = fixedPod("placed");
    (placed.spec as Record<string, unknown>).nodeName = "gpu-node-1";
    const { store, scanner } = setup([
      {
        apiVersion: "v1",
        kind: "ResourceQuota",
        metadata: { name: "compute", namespace: NS },
        spec: { hard: { "requests.cpu": "1" } },
        status: { hard: { "requests.cpu": "1" }, used: { "requests.cpu": "1" } },
      },
    ]);
    await scanner.observe(placed);
    await written(scanner);
    const report = store.stored.get(NS);
    const quota = results(report, "placed", "resource-quota");
    expect(quota).toEqual(
      expect.arrayContaining([
        "quota-exceeded skip",
        "quota-must-specify skip",
        "node-fit skip",
        "invalid-quantity pass",
      ]),
    );
    expect(quota.filter(r => r.endsWith(" pass")).map(r => r.split(" ")[0])).not.toContain(
      "node-fit",
    );
    expect(report!.results.find(r => r.rule === "node-fit")!.message).toBe(
      "not evaluated: placed by the scheduler on node gpu-node-1",
    );
  });
});
