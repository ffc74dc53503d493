// Reports and Events through the real module: Pepr's watcher (the built bundle with
// PEPR_WATCH_MODE=true, as the watcher Deployment runs it) sees the Pods and workloads the
// stand-in holds, writes one PolicyReport per namespace and an Event on each pod the module fixed.
import type { KubeObject } from "../../lib/objects/pod";
import type { PolicyReport } from "../../lib/reports/policy-report";
import { startWatcher, type Controller } from "../support/controller";
import { useEnvironment } from "../support/environment";
import { eventually } from "../support/wait";

const NS = "ml-team";

const env = useEnvironment({
  objects: [
    { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
    {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: "quiet", labels: { "admission-guard.dev/mode": "off" } },
    },
  ],
});
let watcher: Controller;

beforeAll(async () => {
  // This cluster serves PyTorchJobs (its CRD installed) and none of the other ML kinds: the watcher
  // watches the one and keeps probing the others, which must not stop it.
  env.api.registerType({
    group: "kubeflow.org",
    version: "v1",
    kind: "PyTorchJob",
    plural: "pytorchjobs",
    namespaced: true,
  });
  watcher = await startWatcher({
    api: env.api,
    env: { ADMISSION_GUARD_REPORTS_INTERVAL_SECONDS: "1" },
  });
}, 60_000);
afterAll(async () => {
  await watcher?.stop();
});

/** A pod as the API server stores it; `restricted` as the module leaves a pod it fixed. */
function pod(name: string, restricted: boolean, namespace = NS): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace,
      labels: { "app.kubernetes.io/component": "trainer" },
      ...(restricted
        ? {
            annotations: {
              "admission-guard.dev/fixed":
                "security-context/runAsNonRoot,security-context/seccompProfile",
            },
          }
        : {}),
    },
    spec: {
      serviceAccountName: "workload",
      automountServiceAccountToken: false,
      ...(restricted
        ? {
            securityContext: {
              runAsNonRoot: true,
              runAsUser: 1000,
              seccompProfile: { type: "RuntimeDefault" },
            },
          }
        : {}),
      containers: [
        {
          name: "train",
          image: "ghcr.io/org/trainer:1",
          securityContext: restricted
            ? {
                allowPrivilegeEscalation: false,
                capabilities: { drop: ["ALL"] },
                readOnlyRootFilesystem: true,
              }
            : { privileged: true },
        },
      ],
    },
    status: { phase: "Running" },
  };
}

const reportOf = (namespace: string) =>
  env.api.get("PolicyReport", "admission-guard", namespace) as unknown as PolicyReport | undefined;

const failures = (report: PolicyReport | undefined) =>
  (report?.results ?? [])
    .filter(r => r.result === "fail")
    .map(r => `${r.resources[0].kind}/${r.resources[0].name} ${r.policy}/${r.rule}`);

describe("the PolicyReport of a namespace", () => {
  it("appears for a namespace with violations, with the message and the fix of each", async () => {
    env.api.put(pod("trainer-old", false));
    env.api.put(pod("trainer-ok", true));
    const report = await eventually(() => {
      const found = reportOf(NS);
      if (!found || !failures(found).length) throw new Error("no report with failures yet");
      return found;
    }, 20_000);
    expect(report.apiVersion).toBe("wgpolicyk8s.io/v1alpha2");
    expect(report.metadata.labels).toEqual({ "app.kubernetes.io/managed-by": "admission-guard" });
    expect(failures(report)).toContain("Pod/trainer-old security-context/privileged");
    expect(failures(report).filter(f => f.includes("trainer-ok"))).toEqual([]);
    const privileged = report.results.find(r => r.rule === "privileged" && r.result === "fail")!;
    expect(privileged.message).toContain(
      'container "train" must not set securityContext.privileged=true',
    );
    expect(privileged.properties?.fix).toContain("privileged to false");
    expect(privileged.source).toBe("admission-guard");
    expect(report.summary.fail).toBe(failures(report).length);
    expect(report.summary.pass).toBeGreaterThan(0);
  });

  it("changes when they are fixed: the old pod goes, a fixed one comes", async () => {
    env.api.remove("Pod", "trainer-old", NS);
    env.api.put(pod("trainer-new", true));
    const report = await eventually(() => {
      const found = reportOf(NS);
      if (failures(found).length) throw new Error(`still failing: ${failures(found).join(", ")}`);
      if (!found?.results.some(r => r.resources[0].name === "trainer-new"))
        throw new Error("trainer-new not reported yet");
      return found;
    }, 20_000);
    expect(report.summary.fail).toBe(0);
    expect(report.results.some(r => r.resources[0].name === "trainer-old")).toBe(false);
  });

  it("reports a workload by its template, as the webhook would judge its next apply", async () => {
    env.api.put({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "serve", namespace: NS },
      spec: {
        selector: { matchLabels: { app: "serve" } },
        template: {
          metadata: { labels: { app: "serve", "app.kubernetes.io/component": "serve" } },
          spec: {
            containers: [
              { name: "s", image: "ghcr.io/org/serve:1", securityContext: { privileged: true } },
            ],
          },
        },
      },
    });
    await eventually(() => {
      if (!failures(reportOf(NS)).includes("Deployment/serve security-context/privileged"))
        throw new Error("the Deployment is not reported yet");
    }, 20_000);
  });

  it("reports an ML workload by each role's template (its kind watched once its CRD is served)", async () => {
    env.api.put({
      apiVersion: "kubeflow.org/v1",
      kind: "PyTorchJob",
      metadata: { name: "finetune", namespace: NS },
      spec: {
        pytorchReplicaSpecs: {
          Worker: {
            replicas: 2,
            template: {
              metadata: { labels: { "app.kubernetes.io/component": "trainer" } },
              spec: {
                containers: [
                  {
                    name: "w",
                    image: "ghcr.io/org/train:1",
                    securityContext: { privileged: true },
                  },
                ],
              },
            },
          },
        },
      },
    });
    const report = await eventually(() => {
      const found = reportOf(NS);
      if (!failures(found).includes("PyTorchJob/finetune security-context/privileged"))
        throw new Error("the PyTorchJob is not reported yet");
      return found!;
    }, 20_000);
    const privileged = report.results.find(
      r => r.resources[0].kind === "PyTorchJob" && r.rule === "privileged",
    )!;
    expect(privileged.message).toContain("(role Worker)");
    expect(privileged.resources[0].apiVersion).toBe("kubeflow.org/v1");
    expect(env.api.watching("PyTorchJob")).toBe(1);
    expect(watcher.logs()).not.toMatch(/GiveUp/);
  });

  it("writes nothing for a namespace whose mode is off", async () => {
    env.api.put(pod("ignored", false, "quiet"));
    // The next write of ml-team proves the scan has seen the pod; quiet still has no report.
    env.api.put(pod("trainer-more", true));
    await eventually(() => {
      if (!reportOf(NS)?.results.some(r => r.resources[0].name === "trainer-more"))
        throw new Error("not yet");
    }, 20_000);
    expect(reportOf("quiet")).toBeUndefined();
  });
});

describe("the watcher's watches", () => {
  it("one list and watch per kind, deletions included (each is a copy of every object in memory)", () => {
    for (const kind of ["Pod", "Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"])
      expect([kind, env.api.watching(kind)]).toEqual([kind, 1]);
    expect(env.api.watching("ReplicaSet")).toBe(0);
  });
});

describe("Events on the pods the module fixed", () => {
  it("a fixed pod gets one Event saying what changed and why; an unfixed one none", async () => {
    const fixed = env.api.get("Pod", "trainer-ok", NS)!;
    const events = () =>
      env.api.list("Event", NS).map(
        e =>
          e as KubeObject & {
            involvedObject: { uid: string; name: string };
            reason: string;
            message: string;
          },
      );
    const event = await eventually(() => {
      const found = events().find(e => e.involvedObject.uid === fixed.metadata?.uid);
      if (!found) throw new Error("no Event yet");
      return found;
    });
    expect(event.reason).toBe("AdmissionGuardFixed");
    expect(event.message).toBe(
      "admission-guard fixed security-context: runAsNonRoot, seccompProfile (Pod Security Standards restricted, or the level the namespace's pod-security.kubernetes.io/enforce label sets: fills unset securityContext fields, denies what cannot be fixed)",
    );
    expect(events().filter(e => e.involvedObject.name === "trainer-ok")).toHaveLength(1);
    expect(events().filter(e => e.involvedObject.name === "trainer-old")).toEqual([]);
  });
});
