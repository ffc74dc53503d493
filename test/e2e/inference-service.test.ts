// KServe's InferenceService through the real built controller (its binding for
// inferenceservices.serving.kserve.io, its cache of ServingRuntimes listed and watched from the
// stand-in API) and through `check`'s engine on a snapshot of the same cluster: the same verdict,
// denial and warnings, word for word, for each case.
import { join } from "node:path";
import type { KubeObject } from "../../lib/objects/pod";
import { REPO_ROOT } from "../support/controller";
import { useEnvironment } from "../support/environment";
import { loadManifests } from "../support/manifests";
import { checkParity } from "../support/parity";
import { eventually } from "../support/wait";

const NS = "ml-gang";
const fixture = (file: string): KubeObject =>
  loadManifests(join(REPO_ROOT, "test/fixtures/ml", file))[0].object;

const env = useEnvironment({
  objects: [
    { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "workload", namespace: NS } },
    {
      apiVersion: "v1",
      kind: "ResourceQuota",
      metadata: { name: "gpus", namespace: NS },
      spec: { hard: { "requests.nvidia.com/gpu": "8" } },
      status: {
        hard: { "requests.nvidia.com/gpu": "8" },
        used: { "requests.nvidia.com/gpu": "0" },
      },
    },
    fixture("servingruntime.yaml"),
    {
      apiVersion: "serving.kserve.io/v1alpha1",
      kind: "ClusterServingRuntime",
      metadata: { name: "kserve-sklearnserver" },
      spec: {
        supportedModelFormats: [{ name: "sklearn", version: "1", autoSelect: true }],
        containers: [
          {
            name: "kserve-container",
            image: "ghcr.io/kserve/sklearnserver:v0.14.0",
            securityContext: { privileged: true },
          },
        ],
      },
    },
  ],
});

const withPredictor = (change: (p: Record<string, unknown>) => void): KubeObject => {
  const obj = fixture("inferenceservice.yaml");
  change((obj.spec as { predictor: Record<string, unknown> }).predictor);
  return obj;
};

const cases: [string, KubeObject, boolean][] = [
  [
    "a model predictor of 2 × 8 GPUs (its runtime's container merged) over an 8-GPU quota",
    fixture("inferenceservice.yaml"),
    false,
  ],
  [
    "the same at minReplicas 1: admitted, with the growth warning at maxReplicas",
    withPredictor(p => (p.minReplicas = 1)),
    true,
  ],
  [
    "a model naming a runtime that does not exist: admitted, the model's container said not judged",
    withPredictor(p => {
      p.minReplicas = 1;
      (p.model as Record<string, unknown>).runtime = "not-installed";
    }),
    true,
  ],
  [
    "a model whose auto-selected ClusterServingRuntime runs privileged: denied",
    withPredictor(p => {
      p.minReplicas = 1;
      p.model = { modelFormat: { name: "sklearn" }, storageUri: "gs://models/iris" };
    }),
    false,
  ],
];

describe("InferenceService: the controller and check agree", () => {
  it.each(cases)("%s", async (_name, manifest, allowed) => {
    // The controller's runtime caches list once KServe's kinds are probed as served.
    const report = await eventually(async () => {
      const r = await checkParity(env.controller, manifest, { objects: env.api.objects() });
      expect(r.differences).toEqual([]);
      return r;
    }, 15_000);
    expect(report.e2e.allowed).toBe(allowed);
  });

  it("the over-quota denial, as kubectl prints it: the numbers and minReplicas to lower", async () => {
    const report = await checkParity(env.controller, fixture("inferenceservice.yaml"), {
      objects: env.api.objects(),
    });
    expect(report.e2e.message).toContain(
      "InferenceService ml-gang/llm-chat exceeds the namespace quota as a whole",
    );
    expect(report.e2e.message).toContain(
      "requests.nvidia.com/gpu: its pods ask 16 at once (predictor: 2 × 8), quota gpus has 8 of 8 left",
    );
    expect(report.e2e.message).toContain("lower spec.predictor.minReplicas from 2 to at most 1");
  });

  it("the privileged runtime container is named as the model's, which overrides it", async () => {
    const report = await checkParity(env.controller, cases[3][1], { objects: env.api.objects() });
    expect(report.e2e.message).toContain("spec.predictor.model.securityContext.privileged");
  });
});
