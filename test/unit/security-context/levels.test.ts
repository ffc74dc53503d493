// The level a namespace enforces (issue 27): Pod Security Admission's labels read as PSA reads them,
// its versioned checks, the fixes each level needs, and the policy through the one engine.
import { policies } from "../../../capabilities";
import {
  checksFor,
  LATEST_POLICY_MINOR,
  namespacePodSecurity,
  podSecurityVerdict,
  type LevelVersion,
} from "../../../capabilities/security-context/checks";
import { fixPodSecurity } from "../../../capabilities/security-context/fix";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { review, type Review } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import { podTemplateOf } from "../../../lib/workload-kinds/built-in";
import { defaultSettings, parseSettings, type SettingsInput } from "../../../lib/settings";
import { runCheck } from "../../support/check-command";
import { tempTree } from "../cli/check-helpers";
import { compliantPod, deniedAt, LEVEL_CASES } from "../../fixtures/security-context/levels";

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const ENFORCE = "pod-security.kubernetes.io/enforce";
const RESTRICTED_LATEST: LevelVersion = { level: "restricted", version: "latest" };
const template = (pod: KubeObject) => podTemplateOf(pod)!;

describe("the namespace's labels, read as Pod Security Admission reads them", () => {
  const read = (labels: Record<string, string>, defaults = RESTRICTED_LATEST) =>
    namespacePodSecurity(labels, defaults);

  it("takes the defaults without labels, and the enforce label and version when set", () => {
    expect(read({})).toMatchObject({ enforce: RESTRICTED_LATEST, labelled: false, problems: [] });
    expect(read({}, { level: "privileged", version: "latest" }).enforce.level).toBe("privileged");
    const p = read({ [ENFORCE]: "baseline", [`${ENFORCE}-version`]: "v1.30" });
    expect(p.enforce).toEqual({ level: "baseline", version: 30 });
    expect(p.labelled).toBe(true);
  });

  it("fails closed for an invalid enforce level (restricted) and says so", () => {
    const p = read({ [ENFORCE]: "strict" }, { level: "privileged", version: "latest" });
    expect(p.enforce.level).toBe("restricted");
    expect(p.problems).toEqual([
      {
        label: ENFORCE,
        value: "strict",
        expected: "privileged|baseline|restricted",
        used: "restricted",
      },
    ]);
    // An invalid enforce label does not make warn follow it.
    expect(p.warn.level).toBe("privileged");
  });

  it("fails open for invalid warn and audit levels (privileged); an invalid version is latest", () => {
    const p = read({
      "pod-security.kubernetes.io/warn": "everything",
      "pod-security.kubernetes.io/audit": "Restricted",
      [`${ENFORCE}-version`]: "1.30",
      "pod-security.kubernetes.io/warn-version": "v1.030",
    });
    expect(p.warn.level).toBe("privileged");
    expect(p.audit.level).toBe("privileged");
    expect(p.enforce.version).toBe("latest");
    expect(p.warn.version).toBe("latest");
    expect(p.problems.map(x => x.label).sort()).toEqual([
      "pod-security.kubernetes.io/audit",
      `${ENFORCE}-version`,
      "pod-security.kubernetes.io/warn",
      "pod-security.kubernetes.io/warn-version",
    ]);
  });

  it("makes warn follow a stricter enforce label unless a warn label is set", () => {
    expect(read({ [ENFORCE]: "baseline", [`${ENFORCE}-version`]: "v1.25" }).warn).toEqual({
      level: "baseline",
      version: 25,
    });
    expect(
      read({ [ENFORCE]: "baseline", "pod-security.kubernetes.io/warn": "privileged" }).warn.level,
    ).toBe("privileged");
    expect(read({ "pod-security.kubernetes.io/warn": "restricted" }).warn.level).toBe("restricted");
  });
});

describe("the checks of each level and version (PSA's versionedChecks)", () => {
  const ids = (level: LevelVersion["level"], version: LevelVersion["version"]) =>
    checksFor(level, version).map(c => c.id);

  it("privileged has none; baseline only baseline checks", () => {
    expect(checksFor("privileged")).toEqual([]);
    expect(checksFor("baseline", 30).every(c => c.level === "baseline")).toBe(true);
  });

  it("adds each check at its first version", () => {
    expect(ids("restricted", 18)).not.toContain("seccompProfile_restricted");
    expect(ids("restricted", 18)).toContain("seccompProfile_baseline");
    expect(ids("restricted", 19)).toContain("seccompProfile_restricted");
    expect(ids("restricted", 19)).not.toContain("seccompProfile_baseline");
    expect(ids("restricted", 21)).toContain("capabilities_baseline");
    expect(ids("restricted", 22)).toContain("capabilities_restricted");
    expect(ids("restricted", 22)).not.toContain("capabilities_baseline");
    expect(ids("restricted", 22)).not.toContain("runAsUser");
    expect(ids("restricted", 23)).toContain("runAsUser");
    expect(ids("restricted", 7)).not.toContain("allowPrivilegeEscalation");
    expect(ids("baseline", 33)).not.toContain("hostProbesAndHostLifecycle");
    expect(ids("baseline", 34)).toContain("hostProbesAndHostLifecycle");
    expect(ids("restricted", 34)).toContain("procMount_baseline");
    expect(ids("restricted", 35)).toEqual(
      expect.arrayContaining(["procMount_restricted", "hostProbesAndHostLifecycle"]),
    );
  });

  it("evaluates a version newer than the newest known as latest", () => {
    expect(LATEST_POLICY_MINOR).toBe(37);
    expect(ids("restricted", 99)).toEqual(ids("restricted", "latest"));
  });

  const versions = [
    0, 7, 8, 18, 19, 21, 22, 23, 24, 25, 26, 27, 28, 29, 31, 32, 33, 34, 35, 36, 37,
  ];
  it.each(LEVEL_CASES.map(c => [c.name, c] as const))(
    "the generated pod %s, at each level and version",
    (_name, c) => {
      const wrong = (["privileged", "baseline", "restricted"] as const).flatMap(level =>
        versions
          .filter(
            v => podSecurityVerdict(template(c.pod), level, v).allowed === deniedAt(c, level, v),
          )
          .map(v => `${level} v1.${v}`),
      );
      expect(wrong).toEqual([]);
    },
  );

  it("the generated set at latest is the newest version's verdict", () => {
    for (const c of LEVEL_CASES)
      for (const level of ["baseline", "restricted"] as const)
        expect([c.name, podSecurityVerdict(template(c.pod), level).allowed]).toEqual([
          c.name,
          !deniedAt(c, level, LATEST_POLICY_MINOR),
        ]);
  });
});

describe("the fixes each level and version need", () => {
  const settings = defaultSettings().securityContext;
  const bare = (): KubeObject => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "p" },
    spec: { containers: [{ name: "app", image: "ghcr.io/example/app:1.0" }] },
  });
  const fixAt = (level: LevelVersion, pod = bare()) => {
    const changes = fixPodSecurity(template(pod), settings, { level });
    return { pod: pod as Obj, rules: [...new Set(changes.map(c => c.rule))].sort() };
  };

  it("privileged and baseline fill nothing and leave no empty securityContext", () => {
    for (const level of ["privileged", "baseline"] as const) {
      const { pod, rules } = fixAt({ level, version: "latest" });
      expect(rules).toEqual([]);
      expect(pod).toEqual(bare());
    }
  });

  it("restricted fills what its version requires, and no more", () => {
    expect(fixAt(RESTRICTED_LATEST).rules).toEqual([
      "allowPrivilegeEscalation",
      "capabilities_restricted",
      "runAsGroup",
      "runAsNonRoot",
      "runAsUser",
      "seccompProfile_restricted",
    ]);
    const v21 = fixAt({ level: "restricted", version: 21 });
    expect(v21.rules).not.toContain("capabilities_restricted");
    expect(v21.pod.spec.containers[0].securityContext.capabilities).toBeUndefined();
    expect(fixAt({ level: "restricted", version: 18 }).rules).not.toContain(
      "seccompProfile_restricted",
    );
    expect(fixAt({ level: "restricted", version: 7 }).rules).not.toContain(
      "allowPrivilegeEscalation",
    );
  });

  it("a user-namespaced pod is exempt from runAsNonRoot from 1.35 on, not before", () => {
    const userns = () => {
      const pod = bare() as Obj;
      pod.spec.hostUsers = false;
      return pod as KubeObject;
    };
    expect(fixAt({ level: "restricted", version: 35 }, userns()).rules).not.toContain(
      "runAsNonRoot",
    );
    const v34 = fixAt({ level: "restricted", version: 34 }, userns());
    expect(v34.rules).toEqual(expect.arrayContaining(["runAsNonRoot", "runAsUser"]));
    expect(podSecurityVerdict(template(v34.pod), "restricted", 34).allowed).toBe(true);
  });

  it("what restricted fills passes restricted at every version", () => {
    for (const version of [8, 19, 22, 23, 25, 34, 35, 37]) {
      const { pod } = fixAt({ level: "restricted", version });
      expect([version, podSecurityVerdict(template(pod), "restricted", version)]).toEqual([
        version,
        { allowed: true, forbidden: [] },
      ]);
    }
  });
});

describe("the policy at the namespace's level, through the engine", () => {
  const nodeExporter = (): KubeObject => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "node-exporter", namespace: "ml" },
    spec: {
      hostNetwork: true,
      hostPID: true,
      containers: [
        {
          name: "node-exporter",
          image: "ghcr.io/example/node-exporter:1.8",
          volumeMounts: [{ name: "root", mountPath: "/host", readOnly: true }],
        },
      ],
      volumes: [{ name: "root", hostPath: { path: "/" } }],
    },
  });
  const privilegedPod = (): KubeObject => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "driver", namespace: "ml" },
    spec: {
      containers: [
        { name: "driver", image: "ghcr.io/example/d:1", securityContext: { privileged: true } },
      ],
    },
  });
  const run = (pod: KubeObject, labels: Record<string, string>, settings: SettingsInput = {}) =>
    review(policies, pod, {
      settings: parseSettings(settings, "test"),
      cluster: new SnapshotCluster([{ kind: "Namespace", metadata: { name: "ml", labels } }]),
    });
  const ours = (r: Review) => r.violations.filter(v => v.capability === "security-context");
  const sc = (r: { object: KubeObject }) => (r.object as Obj).spec;

  it("privileged: a node exporter is admitted with no security-context fix", async () => {
    const r = await run(nodeExporter(), { [ENFORCE]: "privileged" });
    expect(ours(r)).toEqual([]);
    expect(r.allowed).toBe(true);
    expect(r.changes.filter(c => c.capability === "security-context")).toEqual([]);
    expect(sc(r).securityContext).toBeUndefined();
    expect(sc(r).containers[0].securityContext).toBeUndefined();
  });

  it("the same pod is denied in an unlabelled namespace (restricted), naming the level", async () => {
    const r = await run(nodeExporter(), {});
    expect(r.allowed).toBe(false);
    expect(r.denials.join("\n")).toContain(
      "host namespaces: spec.hostNetwork=true, spec.hostPID=true (Pod Security Standards restricted, latest)",
    );
  });

  it("baseline: a root pod is not forced to a user; a privileged container is denied naming baseline", async () => {
    const root = await run(compliantRootPod(), {
      [ENFORCE]: "baseline",
      [`${ENFORCE}-version`]: "v1.30",
    });
    expect(root.allowed).toBe(true);
    expect(sc(root).securityContext?.runAsNonRoot).toBeUndefined();
    expect(sc(root).securityContext?.runAsUser).toBeUndefined();
    expect(sc(root).containers[0].securityContext).toBeUndefined();
    const denied = await run(privilegedPod(), {
      [ENFORCE]: "baseline",
      [`${ENFORCE}-version`]: "v1.30",
    });
    expect(denied.allowed).toBe(false);
    expect(denied.denials[0]).toMatch(
      /^admission-guard\/security-context: privileged: container "driver" must not set securityContext.privileged=true \(Pod Security Standards baseline, v1.30\)\. Fix: /,
    );
  });

  it("restricted: the fixes, the trace and the warning name the level fixed to", async () => {
    const labels = { [ENFORCE]: "restricted", [`${ENFORCE}-version`]: "v1.30" };
    const r = await run(
      { ...compliantRootPod(), metadata: { name: "p", namespace: "ml" } },
      labels,
    );
    expect(r.allowed).toBe(true);
    expect(sc(r).securityContext.runAsNonRoot).toBe(true);
    expect(r.object.metadata?.annotations?.["admission-guard.dev/pod-security-fixed"]).toBe(
      "restricted:v1.30",
    );
    expect(r.warnings).toContain(
      "admission-guard/security-context: fixed to Pod Security restricted (v1.30)",
    );
  });

  it("warn and audit levels give warnings, never denials", async () => {
    const r = await run(privilegedPod(), {
      [ENFORCE]: "privileged",
      "pod-security.kubernetes.io/warn": "baseline",
      "pod-security.kubernetes.io/audit": "restricted",
    });
    expect(r.allowed).toBe(true);
    const warned = ours(r).map(v => [v.rule, v.severity, v.message.replace(/.*\(/, "(")]);
    expect(warned).toContainEqual([
      "privileged",
      "warn",
      "(Pod Security Standards warn baseline, latest)",
    ]);
    expect(warned).toContainEqual([
      "allowPrivilegeEscalation",
      "warn",
      "(Pod Security Standards audit restricted, latest)",
    ]);
    // The baseline violation is said once, at the warn level.
    expect(ours(r).filter(v => v.rule === "privileged")).toHaveLength(1);
  });

  it("an invalid enforce label is restricted, with a warning naming the label and the fix", async () => {
    const r = await run(nodeExporter(), { [ENFORCE]: "privilegd" });
    expect(r.allowed).toBe(false);
    expect(r.warnings).toContain(
      'admission-guard/security-context: namespace ml has pod-security.kubernetes.io/enforce="privilegd", which is not one of privileged|baseline|restricted: restricted is used, as Pod Security Admission does. Fix: kubectl label namespace ml pod-security.kubernetes.io/enforce=<privileged|baseline|restricted> --overwrite',
    );
  });

  it("securityContext.defaultLevel decides for an unlabelled namespace", async () => {
    const r = await run(nodeExporter(), {}, { securityContext: { defaultLevel: "privileged" } });
    expect(ours(r)).toEqual([]);
    const v = await run(nodeExporter(), {}, { securityContext: { defaultLevel: "baseline" } });
    expect(
      ours(v)
        .map(x => x.rule)
        .sort(),
    ).toEqual(["hostNamespaces", "hostPathVolumes"]);
  });

  it("securityContext.clusterVersion makes latest the cluster's own version", async () => {
    const probe = compliantRootPod() as Obj;
    probe.spec.containers[0].livenessProbe = { tcpSocket: { host: "10.0.0.1", port: 80 } };
    const latest = await run(probe, { [ENFORCE]: "baseline" });
    expect(ours(latest).map(v => v.rule)).toEqual(["hostProbesAndHostLifecycle"]);
    const v132 = await run(
      probe,
      { [ENFORCE]: "baseline" },
      { securityContext: { clusterVersion: "v1.32" } },
    );
    expect(ours(v132)).toEqual([]);
  });

  it("the module's own mode keeps its meaning: warn mode only warns at the enforced level", async () => {
    const r = await run(privilegedPod(), {
      [ENFORCE]: "baseline",
      "admission-guard.dev/mode": "warn",
    });
    expect(r.allowed).toBe(true);
    expect(r.warnings.join("\n")).toContain("(Pod Security Standards baseline, latest)");
  });

  it("a privileged namespace still gets the other areas' rules (registry)", async () => {
    const pod = nodeExporter() as Obj;
    pod.spec.containers[0].image = "evil.example.com/x:1";
    const r = await run(pod, { [ENFORCE]: "privileged" }, { registries: { allowed: ["ghcr.io"] } });
    expect(r.allowed).toBe(false);
    expect(r.violations.map(v => v.capability)).toEqual(["image-registry"]);
  });

  it("reports skip the checks the level does not evaluate", async () => {
    const r = await run(nodeExporter(), { [ENFORCE]: "baseline" });
    const skipped = r.skipped.filter(s => s.capability === "security-context").map(s => s.rule);
    expect(skipped).toEqual(expect.arrayContaining(["runAsNonRoot", "restrictedVolumes"]));
    expect(skipped).not.toContain("hostNamespaces");
  });
});

describe("check follows the namespace's level", () => {
  it("admits a node exporter in a privileged namespace, denies it in an unlabelled one", async () => {
    const namespace = (name: string, labels: Record<string, string>) =>
      `apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ${name}\n  labels: ${JSON.stringify(labels)}\n`;
    const exporter = (ns: string) =>
      [
        "apiVersion: apps/v1",
        "kind: DaemonSet",
        `metadata: {name: node-exporter, namespace: ${ns}}`,
        "spec:",
        "  selector: {matchLabels: {app: node-exporter}}",
        "  template:",
        "    metadata: {labels: {app: node-exporter}}",
        "    spec:",
        "      hostNetwork: true",
        "      hostPID: true",
        "      containers:",
        "        - name: node-exporter",
        "          image: ghcr.io/example/node-exporter:1.8",
        "          volumeMounts: [{name: root, mountPath: /host, readOnly: true}]",
        "      volumes: [{name: root, hostPath: {path: /}}]",
        "",
      ].join("\n");
    const dir = tempTree({
      "cluster/namespaces.yaml": [
        namespace("monitoring", { [ENFORCE]: "privileged" }),
        namespace("apps", {}),
      ].join("---\n"),
      "monitoring.yaml": exporter("monitoring"),
      "apps.yaml": exporter("apps"),
    });
    const admitted = await runCheck(["--cluster", "cluster", "monitoring.yaml"], dir);
    expect([admitted.code, admitted.stdout]).toEqual([0, expect.not.stringContaining("DENIED")]);
    expect(admitted.stdout).not.toContain("security-context");
    const denied = await runCheck(["--cluster", "cluster", "apps.yaml"], dir);
    expect(denied.code).toBe(1);
    expect(denied.stdout).toContain("(Pod Security Standards restricted, latest)");
  }, 60_000);
});

/** A pod whose image runs as root by design: no securityContext at all. */
function compliantRootPod(): KubeObject {
  const pod = compliantPod("root") as Obj;
  delete pod.spec.securityContext;
  delete pod.spec.containers[0].securityContext;
  pod.metadata = { name: "root", namespace: "ml" };
  return pod;
}
