// resource-quota through the real controller (dist/, `npm run build` first): quotas, LimitRanges and
// nodes served by the stand-in API and watched by the controller, changed between requests through
// watch events. Every case is also run through lib/engine review() over a snapshot of the same
// cluster (what `check` runs): the two front doors must agree.
import { join } from "node:path";
import type { KubeObject } from "../../lib/objects/pod";
import { REPO_ROOT, startController, type Controller } from "../support/controller";
import { node } from "./cases";
import { loadManifests } from "../support/manifests";
import { checkParity, type ParityReport } from "../support/parity";
import { startStandIn, type StandInApi } from "../support/stand-in-api";
import { cachesSynced, eventually } from "../support/wait";

const namespace = (name: string): KubeObject => ({
  apiVersion: "v1",
  kind: "Namespace",
  metadata: { name, labels: { "kubernetes.io/metadata.name": name } },
});

const quota = (
  ns: string,
  name: string,
  hard: Record<string, string>,
  used: Record<string, string>,
): KubeObject => ({
  apiVersion: "v1",
  kind: "ResourceQuota",
  metadata: { name, namespace: ns },
  spec: { hard },
  status: { hard, used },
});

/** Seed 001's quota: 100 cores of requests, `used` of them taken. */
const computeResources = (used: string) =>
  quota("mlflow-prod", "compute-resources", { "requests.cpu": "100" }, { "requests.cpu": used });

/** The seed pods as their users wrote them (test/fixtures/e2e; the API server's defaults come later). */
const seedPod = (file: string) => () =>
  structuredClone(loadManifests(join(REPO_ROOT, "test/fixtures/e2e", file))[0].object);
/** Seed 001: the pod `mlflow run ... -P cpu=8 -P memory=16Gi` creates. */
const seed001Pod = seedPod("mlflow-train.yaml");
/** Seed 000: the LlamaIndex trainer, limits only (its requests default to them). */
const seed000Pod = seedPod("llamaindex-trainer.yaml");

const trainDeployment = (replicas: number): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "train-workers", namespace: "mlflow-prod" },
  spec: {
    replicas,
    selector: { matchLabels: { app: "train-workers" } },
    template: {
      metadata: { labels: { app: "train-workers" } },
      spec: {
        containers: [
          {
            name: "worker",
            image: "private-registry.com/mlflow-train:latest",
            resources: { requests: { cpu: "4", memory: "8Gi" } },
          },
        ],
      },
    },
  },
});

const gpuJob = (): KubeObject => ({
  apiVersion: "batch/v1",
  kind: "Job",
  metadata: { name: "finetune", namespace: "gpu-training" },
  spec: {
    backoffLimit: 0,
    template: {
      spec: {
        restartPolicy: "Never",
        containers: [
          {
            name: "finetune",
            image: "ghcr.io/example/finetune:1.0",
            resources: { limits: { "nvidia.com/gpu": "2", cpu: "8", memory: "32Gi" } },
          },
        ],
      },
    },
  },
});

const bigNodes = [
  node("train-node-1", { cpu: "64", memory: "256Gi", "nvidia.com/gpu": "8", pods: "110" }),
  node("train-node-2", { cpu: "64", memory: "256Gi", pods: "110" }),
];
const smallNodes = [
  node("gpu-node-1", { cpu: "7910m", memory: "4Gi", "nvidia.com/gpu": "1", pods: "110" }),
  node("cpu-node-1", { cpu: "7910m", memory: "3800Mi", pods: "110" }),
];

let api: StandInApi;
let controller: Controller;

beforeAll(async () => {
  api = await startStandIn({
    objects: [
      namespace("mlflow-prod"),
      namespace("llama-index"),
      namespace("gpu-training"),
      computeResources("95"),
      quota(
        "gpu-training",
        "gpu",
        { "requests.nvidia.com/gpu": "4" },
        { "requests.nvidia.com/gpu": "3" },
      ),
      ...bigNodes,
    ],
  });
  controller = await startController({ api });
  await cachesSynced(api);
}, 60_000);

afterAll(async () => {
  await controller?.stop();
  await api?.stop();
});

/**
 * The object through the controller and through the engine over the cluster as it is now. Retries
 * until the controller's verdict passes `expectation`: after a change made through the stand-in,
 * the watch event reaches the controller's cache a moment later.
 */
function admitted(
  manifest: KubeObject,
  expectation: (report: ParityReport) => void,
  opts: { operation?: "UPDATE"; oldObject?: KubeObject } = {},
): Promise<ParityReport> {
  return eventually(async () => {
    const report = await checkParity(controller, manifest, { objects: api.objects(), ...opts });
    expectation(report);
    return report;
  });
}

describe("resource-quota through the controller", () => {
  it("denies the seed 001 pod (cpu 8) against a quota with 95 of 100 cores used", async () => {
    const report = await admitted(seed001Pod(), r => expect(r.e2e.allowed).toBe(false));
    expect(report.e2e.message).toContain(
      "requests.cpu: pod asks 8, quota compute-resources has 5 of 100 left (95 used)",
    );
    expect(report.e2e.message).toContain(
      `kubectl patch resourcequota compute-resources -n mlflow-prod --type merge -p '{"spec":{"hard":{"requests.cpu":"103"}}}'`,
    );
    expect(report.differences).toEqual([]);
  });

  it("allows it once a watch event says the quota has room, and denies again when it fills up", async () => {
    api.put(computeResources("90"));
    const allowed = await admitted(seed001Pod(), r => expect(r.e2e.allowed).toBe(true));
    expect(allowed.differences).toEqual([]);

    api.put(computeResources("95"));
    const denied = await admitted(seed001Pod(), r => expect(r.e2e.allowed).toBe(false));
    expect(denied.e2e.message).toContain("5 of 100 left (95 used)");
    expect(denied.differences).toEqual([]);
  });

  it("denies a Deployment of 3 replicas × 4 cpu with 10 cpu left at apply time", async () => {
    api.put(computeResources("90"));
    const report = await admitted(trainDeployment(3), r =>
      expect(r.e2e.message).toContain("10 of 100 left (90 used)"),
    );
    expect(report.e2e.allowed).toBe(false);
    expect(report.e2e.message).toContain(
      "requests.cpu: Deployment asks 12 (3 replicas × 4), quota compute-resources has 10 of 100 left (90 used)",
    );
    expect(report.e2e.message).toContain("lower spec.replicas from 3 to at most 2");
    expect(report.differences).toEqual([]);

    const two = await admitted(trainDeployment(2), r => expect(r.e2e.allowed).toBe(true));
    expect(two.differences).toEqual([]);
  });

  it("on UPDATE charges only the increase over the stored Deployment", async () => {
    const scaleUp = await admitted(
      trainDeployment(5),
      r => expect(r.e2e.message).toContain("10 of 100 left (90 used)"),
      { operation: "UPDATE", oldObject: trainDeployment(2) },
    );
    expect(scaleUp.e2e.message).toContain(
      "requests.cpu: the update adds 12 (5 replicas × 4, was 2 × 4)",
    );
    expect(scaleUp.differences).toEqual([]);

    const byTwo = await admitted(trainDeployment(4), r => expect(r.e2e.allowed).toBe(true), {
      operation: "UPDATE",
      oldObject: trainDeployment(2),
    });
    expect(byTwo.differences).toEqual([]);
  });

  it("denies a GPU Job asking for 2 nvidia.com/gpu with 1 left", async () => {
    const report = await admitted(gpuJob(), r => expect(r.e2e.allowed).toBe(false));
    expect(report.e2e.message).toContain(
      "requests.nvidia.com/gpu: Job asks 2 (1 parallelism × 2), quota gpu has 1 of 4 left (3 used)",
    );
    expect(report.e2e.message).toContain("asks 2, its limit too");
    expect(report.differences).toEqual([]);
  });

  it("denies the seed 000 pod (limits 8Gi) on nodes of 4Gi allocatable, naming the node", async () => {
    for (const n of bigNodes) api.remove("Node", n.metadata!.name!);
    for (const n of smallNodes) api.put(n);
    const report = await admitted(seed000Pod(), r =>
      expect(r.e2e.message).toContain('node "gpu-node-1", has 4Gi allocatable memory'),
    );
    expect(report.e2e.allowed).toBe(false);
    expect(report.e2e.message).toContain(
      "memory request and limit 8Gi is more than any schedulable node can allocate",
    );
    expect(report.differences).toEqual([]);
  });

  it("keeps judging on the last known state while the API server is unreachable", async () => {
    api.put(computeResources("95"));
    await admitted(seed001Pod(), r => expect(r.e2e.message).toContain("5 of 100 left"));
    api.setDown(true);
    try {
      const report = await checkParity(controller, seed001Pod(), { objects: api.objects() });
      expect(report.e2e.allowed).toBe(false);
      expect(report.e2e.message).toContain("5 of 100 left (95 used)");
      expect(report.e2e.message).toContain('node "gpu-node-1", has 4Gi allocatable memory');
      expect(report.differences).toEqual([]);
    } finally {
      api.setDown(false);
    }
  });
});
