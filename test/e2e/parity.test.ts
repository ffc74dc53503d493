// The webhook and `check` must never disagree: every e2e case through the real controller and
// through lib/engine review() over a snapshot of the same cluster gives the same verdict, the
// same denial message and the same resulting pod (Pepr's own annotations aside).
import type { KubeObject } from "../../lib/objects/pod";
import { useEnvironment } from "../support/environment";
import { checkParity } from "../support/parity";
import {
  clusterObjects,
  DEMO_NS,
  demoDeployment,
  demoPod,
  deniedDemoPod,
  inNamespace,
  kubeSystemPod,
  podWithoutContainers,
  podWithoutSpec,
  replicaSetPod,
  seeds,
  unknownKind,
} from "./cases";
import { HELLO_DENY_LABEL } from "../../hello-pepr";

/** A namespace in each mode: the same pod must get the same answer from both doors in each. */
const MODES = ["enforce", "warn", "audit", "off"] as const;
const modeNamespace = (mode: string, labelled = true): KubeObject => ({
  apiVersion: "v1",
  kind: "Namespace",
  metadata: {
    name: `mode-${mode}`,
    labels: labelled ? { "admission-guard.dev/mode": mode } : {},
    // Long there: the controller made no ServiceAccount for it (the dry-run case needs none).
    creationTimestamp: new Date("2024-05-12T14:00:00Z"),
  },
});
// dry-run: a namespace no request of this suite makes the ServiceAccount of.
const env = useEnvironment({
  objects: [
    ...clusterObjects,
    ...MODES.map(m => modeNamespace(m)),
    modeNamespace("dry-run", false),
  ],
});

const seedObjects = seeds.workloads.map(m => m.object);
const cases: [string, KubeObject][] = [
  ...seedObjects.map((o): [string, KubeObject] => [`seed ${o.kind} ${o.metadata?.name}`, o]),
  ...seedObjects.map((o): [string, KubeObject] => [
    `seed ${o.kind} ${o.metadata?.name} in ${DEMO_NS}`,
    inNamespace(o, DEMO_NS),
  ]),
  ["demo pod", demoPod()],
  ["demo pod with the deny label", deniedDemoPod()],
  ["ReplicaSet pod", replicaSetPod()],
  ["Deployment", demoDeployment()],
  ["Deployment whose pods would be denied", demoDeployment({ [HELLO_DENY_LABEL]: "true" })],
  ["kube-system pod", kubeSystemPod()],
  ["unknown kind", unknownKind()],
  ["pod without containers", podWithoutContainers()],
  ["pod without spec", podWithoutSpec()],
];

describe("parity: controller and engine agree", () => {
  it.each(cases)("%s", async (_name, manifest) => {
    const report = await checkParity(env.controller, manifest, { objects: env.api.objects() });
    expect(report.differences).toEqual([]);
  });

  it("on UPDATE of a Deployment too", async () => {
    const report = await checkParity(
      env.controller,
      demoDeployment({ [HELLO_DENY_LABEL]: "true" }),
      {
        objects: env.api.objects(),
        operation: "UPDATE",
        oldObject: demoDeployment(),
      },
    );
    expect(report.e2e.allowed).toBe(false);
    expect(report.differences).toEqual([]);
  });

  it.each(MODES)("in a namespace in %s mode, for a pod that violates several rules", async mode => {
    const mlflow = seedObjects.find(o => o.metadata?.name === "mlflow-train")!;
    const report = await checkParity(env.controller, inNamespace(mlflow, `mode-${mode}`), {
      objects: env.api.objects(),
    });
    expect(report.differences).toEqual([]);
    expect(report.e2e.allowed).toBe(mode !== "enforce");
  });

  it("on UPDATE of a Pod: a privileged debug container added, judged the same by both", async () => {
    const created = await checkParity(env.controller, demoPod(), { objects: env.api.objects() });
    const stored = created.e2e.patched;
    const updated = structuredClone(stored);
    (updated.spec as Record<string, unknown>).ephemeralContainers = [
      { name: "debugger", image: "busybox:1.36", securityContext: { privileged: true } },
    ];
    const report = await checkParity(env.controller, updated, {
      objects: env.api.objects(),
      operation: "UPDATE",
      oldObject: stored,
      subResource: "ephemeralcontainers",
    });
    expect(report.differences).toEqual([]);
    expect(report.e2e.allowed).toBe(false);
    expect(report.e2e.message).toContain(
      'container "debugger" must not set securityContext.privileged=true',
    );
  });

  it("on a dry run, where the dedicated ServiceAccount would have to be created", async () => {
    const trainer = seedObjects.find(o => o.metadata?.name === "llamaindex-trainer")!;
    const report = await checkParity(env.controller, inNamespace(trainer, "mode-dry-run"), {
      objects: env.api.objects(),
      dryRun: true,
    });
    expect(report.differences).toEqual([]);
    expect((report.e2e.patched.spec as { serviceAccountName: string }).serviceAccountName).toBe(
      "default",
    );
    expect(report.e2e.warnings.join("\n")).toContain("dry run:");
  });

  it("notices when they disagree (the engine told the namespace is in warn mode)", async () => {
    const warnCluster = env.api
      .objects()
      .map(o =>
        o.kind === "Namespace" && o.metadata?.name === DEMO_NS
          ? { ...o, metadata: { ...o.metadata, labels: { "admission-guard.dev/mode": "warn" } } }
          : o,
      );
    const report = await checkParity(env.controller, deniedDemoPod(), { objects: warnCluster });
    expect(report.differences.join("\n")).toMatch(/allowed: controller false, engine true/);
  });
});
