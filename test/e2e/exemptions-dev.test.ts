// `npx pepr dev` (PEPR_MODE=dev) applies none of the build overlay's objects: the controller itself
// creates the Exemptions namespace labelled as the install's own, and never labels one that exists
// (a tenant may have created it first). The real built controller, in dev mode, on the stand-in.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { KubeObject } from "../../lib/objects/pod";
import { admit } from "../support/admission";
import { REPO_ROOT } from "../support/controller";
import { startEnvironment, type Environment } from "../support/environment";
import { eventually } from "../support/wait";

const NS = "admission-guard-exemptions";
const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8"));
const OWNED_BY = "admission-guard.dev/owned-by";
const DEV = { PEPR_MODE: "dev" };

const namespace = (name: string, labels: Record<string, string> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Namespace",
  metadata: { name, labels },
});
const exemptionsNamespace = (env: Environment) =>
  env.api.objects().find(o => o.kind === "Namespace" && o.metadata?.name === NS);
const exemption = (): KubeObject => ({
  apiVersion: "admission-guard.dev/v1alpha1",
  kind: "Exemption",
  metadata: { name: "gpu-driver", namespace: NS },
  spec: {
    reason: "the NVIDIA driver installer loads kernel modules",
    expires: new Date(Date.now() + 24 * 60 * 60 * 1000).toISOString(),
    match: { namespaces: ["gpu-operator"] },
    waive: [{ capability: "security-context" }],
  },
});

describe("pepr dev and the Exemptions namespace", () => {
  let env: Environment | undefined;
  afterEach(async () => {
    await env?.stop();
    env = undefined;
  });

  it("absent: the controller creates it, labelled as the install's own, and Exemptions there are admitted", async () => {
    env = await startEnvironment({ objects: [namespace("gpu-operator")], env: DEV });
    const started = env;
    await eventually(() => {
      expect(exemptionsNamespace(started)?.metadata?.labels).toEqual({
        "app.kubernetes.io/managed-by": "admission-guard",
        [OWNED_BY]: pkg.pepr.uuid,
      });
    });
    // The namespace reaches the controller's cache through its watch: then Exemptions there count.
    await eventually(async () => {
      const result = await admit(started.controller, exemption());
      if (!result.allowed) throw new Error(`still refused: ${result.message}`);
    });
  });

  it("created first by someone else: left unlabelled, Exemptions there refused, and the log says what an admin runs", async () => {
    const squatted = namespace(NS, { team: "a" });
    env = await startEnvironment({ objects: [namespace("gpu-operator"), squatted], env: DEV });
    const started = env;
    await eventually(() =>
      expect(started.controller.logs()).toContain(
        "The module never labels a namespace it did not create",
      ),
    );
    expect(exemptionsNamespace(started)?.metadata?.labels).toEqual({ team: "a" });
    expect(started.controller.logs()).toContain(
      `kubectl label namespace ${NS} ${OWNED_BY}=${pkg.pepr.uuid}`,
    );
    const result = await admit(started.controller, exemption());
    expect(result.allowed).toBe(false);
    expect(result.message).toContain(`would waive nothing: namespace ${NS} lacks the label`);
  });

  it("deployed (not dev): the controller creates no namespace", async () => {
    env = await startEnvironment({ objects: [namespace("gpu-operator")] });
    const started = env;
    // The controller has started its watches (the environment waits for them) and logged its state.
    await eventually(() =>
      expect(started.controller.logs()).toContain(
        `namespace ${NS} does not exist, so no Exemption counts`,
      ),
    );
    expect(exemptionsNamespace(started)).toBeUndefined();
  });
});
