// The webhook and `check` must never disagree: every e2e case through the real controller and
// through lib/engine.ts review() over a snapshot of the same cluster gives the same verdict, the
// same denial message and the same resulting pod (Pepr's own annotations aside).
import type { KubeObject } from "../../lib/pod";
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

const env = useEnvironment({ objects: clusterObjects });

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
