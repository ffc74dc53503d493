// The level a namespace enforces, through the real built controller (issue 27): a privileged
// namespace's node exporter is admitted unchanged; a baseline namespace's root pod keeps its
// user, a privileged container there is denied naming baseline; an unlabelled namespace is
// restricted. And `check` (lib/engine review) agrees with the webhook on every such case.
import type { KubeObject } from "../../lib/objects/pod";
import { admit } from "../support/admission";
import { useEnvironment } from "../support/environment";
import { checkParity } from "../support/parity";

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const ENFORCE = "pod-security.kubernetes.io/enforce";
const namespace = (name: string, labels: Record<string, string>): KubeObject => ({
  apiVersion: "v1",
  kind: "Namespace",
  // Long there: the module's ServiceAccount rule is not what these cases are about.
  metadata: { name, labels, creationTimestamp: new Date("2024-05-12T14:00:00Z") },
});
const NAMESPACES: Record<string, Record<string, string>> = {
  "psa-privileged": { [ENFORCE]: "privileged" },
  "psa-baseline": { [ENFORCE]: "baseline", [`${ENFORCE}-version`]: "v1.30" },
  "psa-restricted-v1-24": { [ENFORCE]: "restricted", [`${ENFORCE}-version`]: "v1.24" },
  "psa-warn-restricted": { [ENFORCE]: "baseline", "pod-security.kubernetes.io/warn": "restricted" },
  "psa-invalid": { [ENFORCE]: "root-ok" },
  "psa-unlabelled": {},
};

const env = useEnvironment({
  objects: Object.entries(NAMESPACES).map(([name, labels]) => namespace(name, labels)),
});

/** A node-exporter pod, as its DaemonSet makes it: host network and PID, / read-only. */
const nodeExporter = (ns: string): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "node-exporter", namespace: ns, labels: { app: "node-exporter" } },
  spec: {
    hostNetwork: true,
    hostPID: true,
    containers: [
      {
        name: "node-exporter",
        image: "ghcr.io/example/node-exporter:1.8",
        args: ["--path.rootfs=/host"],
        volumeMounts: [{ name: "root", mountPath: "/host", readOnly: true }],
      },
    ],
    volumes: [{ name: "root", hostPath: { path: "/" } }],
  },
});
const nodeExporterDaemonSet = (ns: string): KubeObject => {
  const { metadata, spec } = nodeExporter(ns);
  return {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: { name: "node-exporter", namespace: ns },
    spec: {
      selector: { matchLabels: { app: "node-exporter" } },
      template: { metadata: { labels: metadata?.labels }, spec },
    },
  };
};
/** A pod that runs as its image's root user by design. */
const rootPod = (ns: string): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "legacy", namespace: ns, labels: { app: "legacy" } },
  spec: { containers: [{ name: "app", image: "ghcr.io/example/legacy:2.1" }] },
});
const privilegedPod = (ns: string): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "driver", namespace: ns, labels: { app: "driver" } },
  spec: {
    containers: [
      { name: "driver", image: "ghcr.io/example/driver:1", securityContext: { privileged: true } },
    ],
  },
});

const spec = (o: KubeObject) => o.spec as Obj;
const securityContextFixes = (patched: KubeObject) =>
  patched.metadata?.annotations?.["admission-guard.dev/fixed"]
    ?.split(",")
    .filter(e => e.startsWith("security-context/")) ?? [];

describe("the namespace's Pod Security level, through the controller", () => {
  it("privileged: a node exporter pod is admitted with its security context as written", async () => {
    const r = await admit(env.controller, nodeExporter("psa-privileged"));
    expect(r.allowed).toBe(true);
    expect(securityContextFixes(r.patched)).toEqual([]);
    const written = spec(r.request.object as KubeObject);
    expect(spec(r.patched).securityContext).toEqual(written.securityContext);
    expect(spec(r.patched).containers[0].securityContext).toBeUndefined();
    // (The ServiceAccount rule may drop the injected token volume: not this area's business.)
    expect(spec(r.patched).volumes).toContainEqual({ name: "root", hostPath: { path: "/" } });
    expect(spec(r.patched)).toMatchObject({ hostNetwork: true, hostPID: true });
    expect(r.warnings.join("\n")).not.toContain("admission-guard/security-context");
  });

  it("privileged: the node exporter DaemonSet is admitted", async () => {
    const r = await admit(env.controller, nodeExporterDaemonSet("psa-privileged"));
    expect([r.allowed, r.message]).toEqual([true, ""]);
  });

  it("baseline: a root pod runs as root (no runAsNonRoot, no runAsUser)", async () => {
    const r = await admit(env.controller, rootPod("psa-baseline"));
    expect(r.allowed).toBe(true);
    expect(securityContextFixes(r.patched)).toEqual([]);
    expect(spec(r.patched).securityContext?.runAsNonRoot).toBeUndefined();
    expect(spec(r.patched).securityContext?.runAsUser).toBeUndefined();
    expect(spec(r.patched).containers[0].securityContext).toBeUndefined();
  });

  it("baseline: a privileged container is denied, naming baseline and its version", async () => {
    const r = await admit(env.controller, privilegedPod("psa-baseline"));
    expect(r.allowed).toBe(false);
    expect(r.message).toContain(
      'admission-guard/security-context: privileged: container "driver" must not set securityContext.privileged=true (Pod Security Standards baseline, v1.30). Fix: ',
    );
  });

  it("unlabelled: restricted, as before (the node exporter denied, a root pod fixed)", async () => {
    const denied = await admit(env.controller, nodeExporter("psa-unlabelled"));
    expect(denied.allowed).toBe(false);
    expect(denied.message).toContain("(Pod Security Standards restricted, latest)");
    const fixed = await admit(env.controller, rootPod("psa-unlabelled"));
    expect(fixed.allowed).toBe(true);
    expect(spec(fixed.patched).securityContext).toMatchObject({ runAsNonRoot: true });
    expect(fixed.patched.metadata?.annotations?.["admission-guard.dev/pod-security-fixed"]).toBe(
      "restricted:latest",
    );
    expect(fixed.warnings).toContain(
      "admission-guard/security-context: fixed to Pod Security restricted (latest)",
    );
  });
});

describe("parity: check and the webhook agree at every level", () => {
  const cases: [string, KubeObject][] = Object.keys(NAMESPACES).flatMap(ns => [
    [`node exporter in ${ns}`, nodeExporter(ns)],
    [`node exporter DaemonSet in ${ns}`, nodeExporterDaemonSet(ns)],
    [`root pod in ${ns}`, rootPod(ns)],
    [`privileged pod in ${ns}`, privilegedPod(ns)],
  ]);
  it.each(cases)("%s", async (_name, manifest) => {
    const report = await checkParity(env.controller, manifest, { objects: env.api.objects() });
    expect(report.differences).toEqual([]);
  });

  it("restricted v1.24: a user-namespaced pod still gets runAsNonRoot (PSA exempts it from 1.35)", async () => {
    const pod = rootPod("psa-restricted-v1-24");
    spec(pod).hostUsers = false;
    const report = await checkParity(env.controller, pod, { objects: env.api.objects() });
    expect(report.differences).toEqual([]);
    expect(report.e2e.allowed).toBe(true);
    expect(spec(report.e2e.patched).securityContext.runAsNonRoot).toBe(true);
  });

  it("enforce baseline with warn restricted: not fixed, allowed, warned at restricted", async () => {
    const report = await checkParity(env.controller, rootPod("psa-warn-restricted"), {
      objects: env.api.objects(),
    });
    expect(report.differences).toEqual([]);
    expect(report.e2e.allowed).toBe(true);
    expect(spec(report.e2e.patched).securityContext?.runAsNonRoot).toBeUndefined();
    expect(report.e2e.warnings.join("\n")).toContain(
      "(Pod Security Standards warn restricted, latest)",
    );
  });

  it("an invalid enforce label: restricted, and a warning naming the label", async () => {
    const report = await checkParity(env.controller, nodeExporter("psa-invalid"), {
      objects: env.api.objects(),
    });
    expect(report.differences).toEqual([]);
    expect(report.e2e.allowed).toBe(false);
    expect(report.e2e.warnings.join("\n")).toContain(
      'namespace psa-invalid has pod-security.kubernetes.io/enforce="root-ok"',
    );
  });
});
