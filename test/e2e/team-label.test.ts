// team-label (the worked example of docs/add-a-capability.md) through the real built controller
// and through `check`'s engine on a snapshot of the same cluster: the same verdict, warnings and
// resulting object, on a Pod and a Deployment, in a namespace with the label and one without.
import type { KubeObject } from "../../lib/objects/pod";
import { useEnvironment } from "../support/environment";
import { checkParity, settingsEnv } from "../support/parity";

type Obj = Record<string, unknown>;
const LABELLED = "vision";
const UNLABELLED = "scratch";

const objects = (): KubeObject[] =>
  (
    [
      [LABELLED, { team: "vision" }],
      [UNLABELLED, {}],
    ] as [string, Record<string, string>][]
  ).flatMap(([name, labels]) => [
    { apiVersion: "v1", kind: "Namespace", metadata: { name, labels } },
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "workload", namespace: name } },
  ]);
const pod = (ns: string, labels: Record<string, string> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "train", namespace: ns, labels },
  spec: { containers: [{ name: "c", image: "ghcr.io/org/train:1" }] },
});
const deployment = (ns: string): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "serve", namespace: ns },
  spec: {
    replicas: 1,
    selector: { matchLabels: { app: "serve" } },
    template: { metadata: { labels: { app: "serve" } }, spec: pod(ns).spec },
  },
});
const teamOf = (o: KubeObject) => (o.metadata?.labels as Obj | undefined)?.team;

describe("team-label on, a pod left without it refused (teamLabel.missing: deny)", () => {
  const settings = { teamLabel: { enabled: true, missing: "deny" as const } };
  const env = useEnvironment({ objects: objects(), env: settingsEnv(settings) });
  const parity = (manifest: KubeObject) =>
    checkParity(env.controller, manifest, { objects: env.api.objects(), settings });

  it("a pod in a labelled namespace gets the namespace's team, by the controller and by check", async () => {
    const report = await parity(pod(LABELLED));
    expect(report.differences).toEqual([]);
    expect(report.e2e.allowed).toBe(true);
    expect(teamOf(report.e2e.patched)).toBe("vision");
  });

  it("a pod that names its own team keeps it", async () => {
    const report = await parity(pod(LABELLED, { team: "nlp" }));
    expect(report.differences).toEqual([]);
    expect(teamOf(report.e2e.patched)).toBe("nlp");
  });

  it("a pod in a namespace without the label is refused, the fix spelled out, by both", async () => {
    const report = await parity(pod(UNLABELLED));
    expect(report.differences).toEqual([]);
    expect(report.e2e.allowed).toBe(false);
    expect(report.e2e.message).toContain(
      `admission-guard/team-label: Pod ${UNLABELLED}/train would have no label team, and namespace ${UNLABELLED} has none to give. Fix: set metadata.labels["team"], or label the namespace: kubectl label namespace ${UNLABELLED} team=<team>`,
    );
  });

  it("a Deployment: what its pods will get, or why they would be refused", async () => {
    const given = await parity(deployment(LABELLED));
    expect(given.differences).toEqual([]);
    expect(given.e2e.warnings.join("\n")).toContain(
      'admission-guard/team-label: its pods will get spec.template.metadata.labels["team"]="vision" (from namespace vision)',
    );
    const refused = await parity(deployment(UNLABELLED));
    expect(refused.differences).toEqual([]);
    expect(refused.e2e.allowed).toBe(false);
  });
});

describe("team-label as shipped (off)", () => {
  const env = useEnvironment({ objects: objects() });

  it("does nothing: no label given, nothing refused", async () => {
    const report = await checkParity(env.controller, pod(UNLABELLED), {
      objects: env.api.objects(),
    });
    expect(report.differences).toEqual([]);
    expect(report.e2e.allowed).toBe(true);
    expect(teamOf(report.e2e.patched)).toBeUndefined();
    expect(report.e2e.warnings.join("\n")).not.toContain("team-label");
  });
});
