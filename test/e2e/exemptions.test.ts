// Exemptions through the real controller: the Exemption reaches it through its watch of the
// exemptions namespace (lib/cluster/live.ts), the next request follows it, and the controller's
// own webhook judges Exemptions as they are written.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { KubeObject } from "../../lib/objects/pod";
import { REPO_ROOT } from "../support/controller";
import { admit } from "../support/admission";
import { useEnvironment } from "../support/environment";
import { checkParity } from "../support/parity";
import { eventually } from "../support/wait";

const DAY = 24 * 60 * 60 * 1000;
const EXEMPTIONS_NS = "admission-guard-exemptions";

const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8"));
/** The install's label on the namespace it created (scripts/overlay/entries.ts). */
const OWNED = { "admission-guard.dev/owned-by": String(pkg.pepr.uuid) };

const namespace = (name: string, labels: Record<string, string> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Namespace",
  metadata: { name, labels },
});

/** The GPU driver's pod as its DaemonSet's controller sends it. */
const driverPod = (): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: {
    generateName: "nvidia-driver-",
    namespace: "gpu-operator",
    labels: { app: "nvidia-driver", "app.kubernetes.io/component": "driver" },
  },
  spec: {
    containers: [
      { name: "driver", image: "nvcr.io/nvidia/driver:550", securityContext: { privileged: true } },
    ],
  },
});

const exemption = (
  name: string,
  expires: Date,
  namespace = EXEMPTIONS_NS,
  waive: unknown = [
    { capability: "security-context", rules: ["privileged", "allowPrivilegeEscalation"] },
  ],
): KubeObject => ({
  apiVersion: "admission-guard.dev/v1alpha1",
  kind: "Exemption",
  metadata: { name, namespace },
  spec: {
    reason: "the NVIDIA driver installer loads kernel modules",
    expires: expires.toISOString(),
    match: { namespaces: ["gpu-operator"], names: ["nvidia-driver*"] },
    waive,
  },
});

const env = useEnvironment({
  objects: [namespace("gpu-operator"), namespace(EXEMPTIONS_NS, OWNED), namespace("team-a")],
});

/** Waits until the controller's verdict on the driver pod is `allowed`. */
const verdictBecomes = (allowed: boolean, timeoutMs?: number) =>
  eventually(async () => {
    const result = await admit(env.controller, driverPod());
    if (result.allowed !== allowed) throw new Error(`still allowed=${result.allowed}`);
    return result;
  }, timeoutMs);

describe("an exempted privileged pod", () => {
  it("without an Exemption: denied, and the denial names the way out and who grants it", async () => {
    const result = await admit(env.controller, driverPod());
    expect(result.allowed).toBe(false);
    expect(result.message).toContain("admission-guard/security-context: privileged");
    expect(result.message).toContain(
      `a platform admin (whoever may write Exemptions in namespace ${EXEMPTIONS_NS}) can waive security-context/privileged, security-context/allowPrivilegeEscalation`,
    );
  });

  it("with an Exemption in the exemptions namespace: admitted, with a warning naming it, counted and logged", async () => {
    env.api.put(exemption("gpu-driver", new Date(Date.now() + 30 * DAY)));
    const result = await verdictBecomes(true);
    expect(result.warnings).toContainEqual(
      expect.stringMatching(
        /^admission-guard\/security-context: privileged waived by Exemption admission-guard-exemptions\/gpu-driver until .* \(the NVIDIA driver installer loads kernel modules\)/,
      ),
    );
    const metrics = (await env.controller.get("/metrics")).body;
    expect(metrics).toMatch(
      /admission_guard_decisions_total\{capability="security-context",rule="privileged",outcome="exempted"\} [1-9]/,
    );
    // The log line may reach the pipe a moment after the response.
    await eventually(() =>
      expect(env.controller.logs()).toContain(
        "exempted: security-context/privileged waived by Exemption admission-guard-exemptions/gpu-driver",
      ),
    );
    // check, given the same cluster, says the same.
    const parity = await checkParity(env.controller, driverPod(), { objects: env.api.objects() });
    expect(parity.differences).toEqual([]);
    expect(parity.engine.allowed).toBe(true);
  });

  it("the same Exemption deleted: denied again", async () => {
    env.api.remove("Exemption", "gpu-driver", EXEMPTIONS_NS);
    await verdictBecomes(false);
  });

  it("an Exemption that expires stops counting, and the next request says so", async () => {
    env.api.put(exemption("short-lived", new Date(Date.now() + 3000)));
    await verdictBecomes(true);
    const after = await verdictBecomes(false, 15_000);
    expect(after.warnings.join("\n")).toContain(
      "Exemption admission-guard-exemptions/short-lived expired at",
    );
    env.api.remove("Exemption", "short-lived", EXEMPTIONS_NS);
  });

  it("in an Exemptions namespace the install does not own (a tenant created it first), none count", async () => {
    env.api.put(namespace(EXEMPTIONS_NS, { "admission-guard.dev/owned-by": "someone-else" }));
    env.api.put(exemption("squatted", new Date(Date.now() + DAY)));
    // The Exemption and the namespace reach the controller's caches through their watches.
    await new Promise(r => setTimeout(r, 1000));
    expect((await admit(env.controller, driverPod())).allowed).toBe(false);
    // The install's label (kubectl apply of its manifest): they count.
    env.api.put(namespace(EXEMPTIONS_NS, OWNED));
    await verdictBecomes(true);
    env.api.remove("Exemption", "squatted", EXEMPTIONS_NS);
    await verdictBecomes(false);
  });

  it("an Exemption its author put next to the workload does not count", async () => {
    env.api.put(exemption("self-granted", new Date(Date.now() + DAY), "gpu-operator"));
    // The controller's cache is of the exemptions namespace only: give a watch event time to arrive.
    await new Promise(r => setTimeout(r, 500));
    expect((await admit(env.controller, driverPod())).allowed).toBe(false);
  });
});

describe("the controller's webhook judges Exemptions as they are written", () => {
  it("admits a well-formed one in the exemptions namespace, as check does", async () => {
    const ok = exemption("ok", new Date(Date.now() + DAY));
    const result = await admit(env.controller, ok);
    expect(result.allowed).toBe(true);
    const parity = await checkParity(env.controller, ok, { objects: env.api.objects() });
    expect(parity.differences).toEqual([]);
  });

  it("refuses one in the exemptions namespace the install does not own, naming the label and the admin's command; check says the same", async () => {
    // Made by `kubectl create namespace`, or by a tenant before the install: no ownership label.
    env.api.put(namespace(EXEMPTIONS_NS));
    const squatted = exemption("unowned", new Date(Date.now() + DAY));
    // The namespace's change reaches the controller's cache through its watch.
    const result = await eventually(async () => {
      const r = await admit(env.controller, squatted);
      if (r.allowed) throw new Error("still allowed");
      return r;
    });
    expect(result.message).toContain(
      `admission-guard/exemptions: Exemption ${EXEMPTIONS_NS}/unowned would waive nothing: namespace ${EXEMPTIONS_NS} lacks the label admission-guard.dev/owned-by=${pkg.pepr.uuid}`,
    );
    expect(result.message).toContain(`kubectl get rolebindings,roles -n ${EXEMPTIONS_NS}`);
    expect(result.message).toContain(
      `kubectl label namespace ${EXEMPTIONS_NS} admission-guard.dev/owned-by=${pkg.pepr.uuid}`,
    );
    const parity = await checkParity(env.controller, squatted, { objects: env.api.objects() });
    expect(parity.differences).toEqual([]);
    expect(parity.engine.allowed).toBe(false);
    // And the controller's log says it once, without a request.
    expect(env.controller.logs()).toContain(
      `exemptions: namespace ${EXEMPTIONS_NS} lacks the label admission-guard.dev/owned-by=${pkg.pepr.uuid} that the install writes on the namespace it creates (it has no such label)`,
    );
    // Owned again: admitted.
    env.api.put(namespace(EXEMPTIONS_NS, OWNED));
    await eventually(async () => {
      if (!(await admit(env.controller, squatted)).allowed) throw new Error("still refused");
    });
  });

  it("refuses one created elsewhere, saying where they count and why", async () => {
    const result = await admit(
      env.controller,
      exemption("mine", new Date(Date.now() + DAY), "team-a"),
    );
    expect(result.allowed).toBe(false);
    expect(result.message).toContain(
      `admission-guard/exemptions: Exemption team-a/mine is not in namespace ${EXEMPTIONS_NS}, the only one whose Exemptions count`,
    );
    const parity = await checkParity(
      env.controller,
      exemption("mine", new Date(Date.now() + DAY), "team-a"),
      { objects: env.api.objects() },
    );
    expect(parity.differences).toEqual([]);
  });

  it("refuses an unknown rule and an expiry beyond the maximum, naming what is allowed", async () => {
    const result = await admit(
      env.controller,
      exemption("typo", new Date(Date.now() + 365 * DAY), EXEMPTIONS_NS, [
        { capability: "security-context", rules: ["priviledged"] },
      ]),
    );
    expect(result.allowed).toBe(false);
    expect(result.message).toContain('names "priviledged", not rules of security-context');
    expect(result.message).toContain("is more than exemptions.maxLifetimeDays (90) days away");
  });

  it("refuses an expiry in the past on UPDATE too", async () => {
    const old = exemption("renewed", new Date(Date.now() + DAY));
    const result = await admit(env.controller, exemption("renewed", new Date(Date.now() - DAY)), {
      operation: "UPDATE",
      oldObject: old,
    });
    expect(result.allowed).toBe(false);
    expect(result.message).toContain("is in the past");
  });
});
