// Operations at platform scale on a real API server, under the module's own RBAC: the Exemption
// CRD applied by the controller itself; Exemptions judged by the CRD schema and by our webhook;
// a GPU driver's privileged pod admitted on an admin's Exemption and refused without; Pepr's
// watcher writing a PolicyReport per namespace (kubectl get policyreport) and an Event on each pod
// the module fixed (kubectl describe pod).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import type { KubeObject } from "../../lib/objects/pod";
import { REPO_ROOT } from "../support/controller";
import { eventually } from "../support/wait";
import { addNode, applyObjects, connect, kubectl, namespace, useModule } from "./support/cluster";

const cluster = connect();
const guard = useModule(cluster, {
  watcher: true,
  env: { ADMISSION_GUARD_REPORTS_INTERVAL_SECONDS: "2" },
});

const EXEMPTIONS = "admission-guard-exemptions";
const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8"));
const GPU = "gpu-operator";
const TEAM = "ml-team";
const DAY = 24 * 60 * 60 * 1000;

const driverPod = (): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: {
    name: "nvidia-driver-x7k2p",
    namespace: GPU,
    labels: { app: "nvidia-driver", "app.kubernetes.io/component": "driver" },
  },
  spec: {
    containers: [
      { name: "driver", image: "nvcr.io/nvidia/driver:550", securityContext: { privileged: true } },
    ],
  },
});

const exemption = (name: string, ns: string, spec: Record<string, unknown> = {}): KubeObject => ({
  apiVersion: "admission-guard.dev/v1alpha1",
  kind: "Exemption",
  metadata: { name, namespace: ns },
  spec: {
    reason: "the NVIDIA driver installer loads kernel modules",
    expires: new Date(Date.now() + 30 * DAY).toISOString(),
    match: { namespaces: [GPU], names: ["nvidia-driver*"] },
    waive: [{ capability: "security-context", rules: ["privileged", "allowPrivilegeEscalation"] }],
    ...spec,
  },
});

const kubectlApply = (obj: KubeObject) => kubectl(cluster, ["apply", "-f", "-"], stringify(obj));

const OWNED_BY = "admission-guard.dev/owned-by";

beforeAll(async () => {
  // The Exemptions namespace is not made here: the install creates it (scripts/overlay/entries.ts).
  await applyObjects(cluster, [namespace(GPU), namespace(TEAM)]);
  // Node fit is judged against Node objects: one that can run these pods.
  await addNode(cluster, {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name: "ops-node-1", labels: { "kubernetes.io/hostname": "ops-node-1" } },
    spec: {},
    status: {
      capacity: { cpu: "16", memory: "64Gi", pods: "110" },
      allocatable: { cpu: "16", memory: "64Gi", pods: "110" },
    },
  }).catch(() => undefined); // left by an earlier run of this file
  await guard.install();
}, 120_000);

describe("the Exemptions namespace", () => {
  test("the install creates it, labelled as its own (owned-by the module's uuid)", async () => {
    const res = await cluster.admin.get(`/api/v1/namespaces/${EXEMPTIONS}`);
    expect(res.status).toBe(200);
    expect(res.body.metadata?.labels).toMatchObject({
      [OWNED_BY]: String(pkg.pepr.uuid),
      "app.kubernetes.io/managed-by": "admission-guard",
    });
  });
});

describe("the Exemption CRD", () => {
  test("the controller applies it at start, under the module's own RBAC", async () => {
    const established = await eventually(async () => {
      const res = await cluster.admin.get(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/exemptions.admission-guard.dev",
      );
      const conditions = (res.body.status as { conditions?: { type: string; status: string }[] })
        ?.conditions;
      if (!conditions?.some(c => c.type === "Established" && c.status === "True"))
        throw new Error("not established yet");
      return res.body;
    }, 30_000);
    // Written by the module's identity (Pepr's client applies as field manager "pepr").
    const managers = (established.metadata?.managedFields as { manager: string }[]).map(
      m => m.manager,
    );
    expect(managers).toContain("pepr");
    const explained = await kubectl(cluster, ["explain", "exemptions.spec.expires"]);
    expect(explained.stdout).toMatch(/at most\s+exemptions\.maxLifetimeDays away/);
  });

  test("the API server refuses an Exemption without a reason (the CRD's schema)", async () => {
    const result = await kubectlApply(exemption("no-reason", EXEMPTIONS, { reason: undefined }));
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("spec.reason: Required value");
  });

  test("our webhook refuses one outside the exemptions namespace, and an unknown rule", async () => {
    const elsewhere = await kubectlApply(exemption("self-granted", GPU));
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.stderr).toContain(
      `admission-guard/exemptions: Exemption ${GPU}/self-granted is not in namespace ${EXEMPTIONS}`,
    );
    const typo = await kubectlApply(
      exemption("typo", EXEMPTIONS, {
        waive: [{ capability: "security-context", rules: ["priviledged"] }],
      }),
    );
    expect(typo.code).toBe(1);
    expect(typo.stderr).toContain('names "priviledged", not rules of security-context');
  });
});

describe("a GPU driver that needs what the rules forbid", () => {
  test("without an Exemption: refused, the denial saying an Exemption is the way out", async () => {
    const result = await kubectlApply(driverPod());
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("admission-guard/security-context: privileged");
    expect(result.stderr).toContain(`whoever may write Exemptions in namespace ${EXEMPTIONS}`);
  });

  test("with an admin's Exemption: admitted, kubectl printing the warning that names it", async () => {
    const created = await kubectlApply(exemption("gpu-driver", EXEMPTIONS));
    expect(created.stderr).toBe("");
    expect(created.code).toBe(0);
    const result = await eventually(async () => {
      const r = await kubectlApply(driverPod());
      if (r.code !== 0) throw new Error(r.stderr);
      return r;
    }, 15_000);
    expect(result.stderr).toMatch(
      /Warning: admission-guard\/security-context: privileged waived by Exemption admission-guard-exemptions\/gpu-driver until/,
    );
  });

  test("in a namespace the install does not own (its label gone, as one a tenant made first), the Exemption grants nothing", async () => {
    const probe = () => {
      const pod = driverPod();
      pod.metadata!.name = "nvidia-driver-probe";
      return kubectl(cluster, ["create", "--dry-run=server", "-f", "-"], stringify(pod));
    };
    const unlabelled = await kubectl(cluster, ["label", "namespace", EXEMPTIONS, `${OWNED_BY}-`]);
    expect(unlabelled.code).toBe(0);
    try {
      const refused = await eventually(async () => {
        const r = await probe();
        if (r.code === 0) throw new Error("still waived");
        return r;
      }, 15_000);
      expect(refused.stderr).toContain("admission-guard/security-context: privileged");
    } finally {
      const relabelled = await kubectl(cluster, [
        "label",
        "namespace",
        EXEMPTIONS,
        `${OWNED_BY}=${String(pkg.pepr.uuid)}`,
      ]);
      expect(relabelled.code).toBe(0);
    }
    await eventually(async () => {
      const r = await probe();
      if (r.code !== 0) throw new Error(r.stderr);
    }, 15_000);
  });
});

describe("reports and Events of what runs", () => {
  beforeAll(async () => {
    // As a cluster with no Kyverno or Policy Reporter: the CRD shipped for that case.
    const crd = await kubectl(cluster, [
      "apply",
      "-f",
      join(REPO_ROOT, "deploy/policyreport-crd.yaml"),
    ]);
    if (crd.code !== 0) throw new Error(crd.stderr);
    await eventually(async () => {
      const r = await kubectl(cluster, ["get", "policyreports", "-A"]);
      if (r.code !== 0) throw new Error(r.stderr);
    }, 30_000);
  });

  const policyReport = async (ns: string) => {
    const r = await kubectl(cluster, [
      "get",
      "policyreport",
      "admission-guard",
      "-n",
      ns,
      "-o",
      "json",
    ]);
    if (r.code !== 0) throw new Error(r.stderr);
    return JSON.parse(r.stdout) as {
      summary: Record<string, number>;
      results: { rule: string; result: string; resources: { name: string }[] }[];
    };
  };
  const failing = (report: Awaited<ReturnType<typeof policyReport>>) =>
    report.results.filter(r => r.result === "fail").map(r => `${r.resources[0].name} ${r.rule}`);

  const teamPod = (name: string, securityContext?: Record<string, unknown>): KubeObject => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: TEAM, labels: { "app.kubernetes.io/component": "trainer" } },
    spec: { containers: [{ name: "train", image: "ghcr.io/org/trainer:1", securityContext }] },
  });

  test("a namespace in audit mode gets a PolicyReport saying what enforce would deny", async () => {
    await applyObjects(cluster, [namespace(TEAM, { "admission-guard.dev/mode": "audit" })]);
    await eventually(async () => {
      const r = await kubectlApply(teamPod("legacy", { privileged: true }));
      if (r.code !== 0) throw new Error(r.stderr);
    }, 15_000);
    const report = await eventually(async () => {
      const found = await policyReport(TEAM);
      if (!failing(found).length) throw new Error("no failures reported yet");
      return found;
    }, 30_000);
    expect(failing(report)).toContain("legacy privileged");
    const listed = await kubectl(cluster, ["get", "policyreport", "-A"]);
    expect(listed.stdout).toMatch(new RegExp(`${TEAM}\\s+admission-guard\\s+\\d+\\s+[1-9]`));
  });

  test("the report changes when the team fixes the pod", async () => {
    expect((await kubectl(cluster, ["delete", "pod", "legacy", "-n", TEAM])).code).toBe(0);
    const fixed = await kubectlApply(teamPod("trainer"));
    expect(fixed.code).toBe(0);
    const report = await eventually(async () => {
      const found = await policyReport(TEAM);
      if (failing(found).length) throw new Error(`still failing: ${failing(found).join(", ")}`);
      if (!found.results.some(r => r.resources[0].name === "trainer"))
        throw new Error("trainer not reported yet");
      return found;
    }, 30_000);
    expect(report.summary.fail).toBe(0);
    expect(report.summary.pass).toBeGreaterThan(0);
  });

  test("the exempted driver is reported as skip, naming the Exemption", async () => {
    const report = await eventually(async () => {
      const found = await policyReport(GPU);
      if (!found.results.some(r => r.result === "skip")) throw new Error("no skip yet");
      return found;
    }, 30_000);
    expect(report.results).toContainEqual(
      expect.objectContaining({
        rule: "privileged",
        result: "skip",
        properties: { exemption: `${EXEMPTIONS}/gpu-driver`, fix: expect.any(String) },
      }),
    );
  });

  test("kubectl describe pod shows the Event saying what the module fixed", async () => {
    const described = await eventually(async () => {
      const r = await kubectl(cluster, ["describe", "pod", "trainer", "-n", TEAM]);
      if (!r.stdout.includes("AdmissionGuardFixed")) throw new Error("no Event yet");
      return r.stdout;
    }, 30_000);
    expect(described).toMatch(
      /Normal\s+AdmissionGuardFixed\s+.*admission-guard fixed security-context:/,
    );
  });

  test("the module's own RBAC was enough: nothing forbidden in the controller's or the watcher's log", () => {
    expect(guard.module!.controller.logs()).not.toMatch(/forbidden/i);
    expect(guard.module!.watcher!.logs()).not.toMatch(/forbidden/i);
  });
});
