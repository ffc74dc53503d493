// The security-context capability through the one engine (lib/engine review), as the webhook
// and `check` run it: workload templates are not mutated, their pods' fixes are reported as
// pending, and what cannot be fixed is denied early with the template's field paths.
import { policies } from "../../../capabilities";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { review } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import { defaultSettings, parseSettings } from "../../../lib/settings";

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const cluster = (labels: Record<string, string> = {}) =>
  new SnapshotCluster([{ kind: "Namespace", metadata: { name: "ml", labels } }]);

const deployment = (podSpec: Obj): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "gpt4-canary", namespace: "ml" },
  spec: {
    replicas: 2,
    selector: { matchLabels: { app: "gpt4" } },
    template: { metadata: { labels: { app: "gpt4" } }, spec: podSpec },
  },
});

const ours = (r: { violations: { capability: string }[] }) =>
  r.violations.filter(v => v.capability === "security-context");

describe("a Deployment through the engine", () => {
  it("is not mutated; its pods' fixes are reported as pending; the after-manifest is fixed", async () => {
    const input = deployment({
      containers: [{ name: "inference", image: "openai/gpt4-inference:1.0" }],
    });
    const before = JSON.stringify(input);
    const r = await review(policies, input, { settings: defaultSettings(), cluster: cluster() });
    expect(JSON.stringify(input)).toBe(before);
    expect(r.allowed).toBe(true);
    const changes = r.changes.filter(c => c.capability === "security-context");
    expect(changes.map(c => c.message)).toContain(
      "spec.template.spec.securityContext.runAsNonRoot=true",
    );
    expect(changes.map(c => c.message)).toContain(
      "spec.template.spec.containers[0].securityContext.allowPrivilegeEscalation=false",
    );
    const pending = r.warnings.find(w =>
      w.startsWith("admission-guard/security-context: its pods will get"),
    );
    expect(pending).toContain("spec.template.spec.securityContext.runAsUser=1000");
    expect(pending).toContain("(when Deployment creates them)");
    const template = (r.object as Obj).spec.template.spec;
    expect(template.securityContext).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: "RuntimeDefault" },
    });
    // readOnlyRootFilesystem is not filled by default: no scratch volumes.
    expect(template.containers[0].volumeMounts).toBeUndefined();
    expect(template.containers[0].securityContext.readOnlyRootFilesystem).toBeUndefined();
  });

  it("denies early what cannot be fixed, naming the template field and the fix", async () => {
    const r = await review(
      policies,
      deployment({
        hostNetwork: true,
        initContainers: [{ name: "setup", image: "x", securityContext: { privileged: true } }],
        containers: [{ name: "inference", image: "x", securityContext: { runAsNonRoot: false } }],
      }),
      { settings: defaultSettings(), cluster: cluster() },
    );
    expect(r.allowed).toBe(false);
    const byRule = Object.fromEntries(ours(r).map(v => [(v as Obj).rule, v as Obj]));
    expect(Object.keys(byRule).sort()).toEqual([
      "allowPrivilegeEscalation",
      "hostNamespaces",
      "privileged",
      "runAsNonRoot",
    ]);
    expect(byRule.privileged.message).toContain('container "setup"');
    expect(byRule.privileged.fix).toContain(
      "spec.template.spec.initContainers[0].securityContext.privileged",
    );
    expect(byRule.runAsNonRoot.fix).toContain(
      "spec.template.spec.containers[0].securityContext.runAsNonRoot",
    );
    expect(byRule.hostNamespaces.fix).toContain("spec.template.spec.hostNetwork");
    // fixable things are still fixed on the pods, so they are not among the denials
    expect(byRule.capabilities_restricted).toBeUndefined();
  });

  it("warns instead of denying in a warn-mode namespace", async () => {
    const r = await review(
      policies,
      deployment({
        containers: [{ name: "a", image: "x", securityContext: { privileged: true } }],
      }),
      { settings: defaultSettings(), cluster: cluster({ "admission-guard.dev/mode": "warn" }) },
    );
    expect(r.allowed).toBe(true);
    expect(r.warnings.join("\n")).toMatch(
      /admission-guard\/security-context: privileged: container "a" must not set securityContext\.privileged=true.*Fix: set spec\.template\.spec\.containers\[0\]/,
    );
  });

  it("with mutation off, denies every restricted violation, as Pod Security Admission would", async () => {
    const r = await review(
      policies,
      deployment({ containers: [{ name: "inference", image: "x" }] }),
      { settings: parseSettings({ securityContext: { mutate: false } }), cluster: cluster() },
    );
    expect(r.allowed).toBe(false);
    expect(r.changes.filter(c => c.capability === "security-context")).toEqual([]);
    expect(ours(r).map(v => (v as Obj).rule)).toEqual([
      "allowPrivilegeEscalation",
      "runAsNonRoot",
      "seccompProfile_restricted",
      "capabilities_restricted",
    ]);
  });

  it("finds a CronJob's pod template too", async () => {
    const cron: KubeObject = {
      apiVersion: "batch/v1",
      kind: "CronJob",
      metadata: { name: "nightly", namespace: "ml" },
      spec: {
        schedule: "0 0 * * *",
        jobTemplate: {
          spec: {
            template: {
              spec: {
                restartPolicy: "Never",
                containers: [{ name: "train", image: "x", securityContext: { runAsUser: 0 } }],
              },
            },
          },
        },
      },
    };
    const r = await review(policies, cron, { settings: defaultSettings(), cluster: cluster() });
    expect(r.allowed).toBe(false);
    expect(ours(r).map(v => (v as Obj).fix)).toEqual([
      "set spec.jobTemplate.spec.template.spec.containers[0].securityContext.runAsUser to a non-zero UID (e.g. 1000) or remove it",
    ]);
  });
});

describe("a Pod through the engine", () => {
  it("is fixed on CREATE and then passes restricted", async () => {
    const pod: KubeObject = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "test-gpt4", namespace: "ml" },
      spec: { containers: [{ name: "inference", image: "x" }] },
    };
    const r = await review(policies, pod, { settings: defaultSettings(), cluster: cluster() });
    expect(r.allowed).toBe(true);
    expect(ours(r)).toEqual([]);
    expect(r.changes).toContainEqual({
      capability: "security-context",
      rule: "runAsNonRoot",
      message: "spec.securityContext.runAsNonRoot=true",
    });
    expect(r.warnings.join("\n")).toMatch(
      /^admission-guard\/security-context: fixed .*runAsNonRoot/m,
    );
    expect((r.object as Obj).metadata.annotations["admission-guard.dev/fixed"]).toContain(
      "security-context/runAsNonRoot",
    );
  });

  it("is left alone in system namespaces", async () => {
    const pod: KubeObject = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "p", namespace: "kube-system" },
      spec: { containers: [{ name: "c", image: "x", securityContext: { privileged: true } }] },
    };
    const r = await review(policies, pod, { settings: defaultSettings(), cluster: cluster() });
    expect(r.handled).toBe(false);
    expect(r.allowed).toBe(true);
  });
});
