// Devices claimed through DRA through the real controller (dist/, `npm run build` first): the
// stand-in serves resource.k8s.io/v1beta1 only (as a 1.32 API server with DRA on), so the
// controller's probe finds v1 and v1beta2 missing (404) and watches v1beta1. Every case also runs
// through lib/engine review() over a snapshot of the same objects (what `check` runs): the webhook
// and `check` must agree, word for word.
import type { KubeObject } from "../../lib/objects/pod";
import { startController, type Controller } from "../support/controller";
import { checkParity } from "../support/parity";
import { startStandIn, type StandInApi } from "../support/stand-in-api";
import { cachesSynced, eventually } from "../support/wait";

const NS = "dra-e2e";
const CLASS = "gpu.example.com";
const DEVICES = `${CLASS}.deviceclass.resource.k8s.io/devices`;
const DRA = "resource.k8s.io/v1beta1";

const draTypes = [
  { kind: "ResourceClaimTemplate", plural: "resourceclaimtemplates", namespaced: true },
  { kind: "DeviceClass", plural: "deviceclasses", namespaced: false },
  { kind: "ResourceSlice", plural: "resourceslices", namespaced: false },
];

const template = (name: string, requests: object[]): KubeObject => ({
  apiVersion: DRA,
  kind: "ResourceClaimTemplate",
  metadata: { name, namespace: NS },
  spec: { spec: { devices: { requests } } },
});
const exact = (count: number) => ({
  name: "gpus",
  deviceClassName: CLASS,
  allocationMode: "ExactCount",
  count,
});
const draObjects: KubeObject[] = [
  {
    apiVersion: DRA,
    kind: "DeviceClass",
    metadata: { name: CLASS },
    spec: { selectors: [{ cel: { expression: `device.driver == "${CLASS}"` } }] },
  },
  {
    apiVersion: DRA,
    kind: "DeviceClass",
    metadata: { name: "h100.example.com" },
    spec: {
      selectors: [{ cel: { expression: `device.attributes["${CLASS}"].model == "h100"` } }],
    },
  },
  template("two-gpus", [exact(2)]),
  template("four-gpus", [exact(4)]),
  template("all-gpus", [{ name: "gpus", deviceClassName: CLASS, allocationMode: "All" }]),
  template("h100", [{ name: "gpus", deviceClassName: "h100.example.com", count: 8 }]),
  {
    apiVersion: DRA,
    kind: "ResourceSlice",
    metadata: { name: `gpu-node-1-${CLASS}` },
    spec: {
      driver: CLASS,
      nodeName: "gpu-node-1",
      pool: { name: "gpu-node-1", generation: 1, resourceSliceCount: 1 },
      devices: [0, 1].map(i => ({ name: `gpu-${i}`, basic: {} })),
    },
  },
];

const podSpec = (claims: object[]) => ({
  containers: [
    {
      name: "infer",
      image: "ghcr.io/example/infer:1.0",
      resources: { requests: { cpu: "100m", memory: "128Mi" } },
    },
  ],
  resourceClaims: claims,
});
const fromTemplate = (t: string) => ({ name: "gpus", resourceClaimTemplateName: t });
const pod = (name: string, claims: object[]): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: NS },
  spec: podSpec(claims),
});
const deployment = (replicas: number, claims: object[]): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "infer", namespace: NS },
  spec: {
    replicas,
    selector: { matchLabels: { app: "infer" } },
    template: { metadata: { labels: { app: "infer" } }, spec: podSpec(claims) },
  },
});
const pytorchJob = (workers: number): KubeObject => ({
  apiVersion: "kubeflow.org/v1",
  kind: "PyTorchJob",
  metadata: { name: "llama", namespace: NS },
  spec: {
    pytorchReplicaSpecs: {
      Master: { replicas: 1, template: { spec: podSpec([fromTemplate("two-gpus")]) } },
      Worker: { replicas: workers, template: { spec: podSpec([fromTemplate("two-gpus")]) } },
    },
  },
});

let api: StandInApi;
let controller: Controller;

beforeAll(async () => {
  api = await startStandIn({
    objects: [
      {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: NS, creationTimestamp: new Date("2024-05-12T14:00:00Z") },
      },
      {
        apiVersion: "v1",
        kind: "ResourceQuota",
        metadata: { name: "dra", namespace: NS },
        spec: { hard: { [DEVICES]: "5" } },
        status: { hard: { [DEVICES]: "5" }, used: { [DEVICES]: "1" } },
      },
      {
        apiVersion: "v1",
        kind: "Node",
        metadata: { name: "gpu-node-1", labels: { "kubernetes.io/hostname": "gpu-node-1" } },
        status: { allocatable: { cpu: "64", memory: "256Gi", pods: "110" } },
      },
    ],
  });
  for (const t of draTypes)
    api.registerType({ group: "resource.k8s.io", version: "v1beta1", ...t });
  for (const obj of draObjects) api.put(obj);
  controller = await startController({ api });
  await cachesSynced(api, [
    "Namespace",
    "ResourceQuota",
    "LimitRange",
    "Node",
    ...draTypes.map(t => t.kind),
  ]);
}, 60_000);

afterAll(async () => {
  await controller?.stop();
  await api?.stop();
});

const cases: [string, KubeObject, boolean][] = [
  ["a Deployment 3 × 2 devices over 4 left", deployment(3, [fromTemplate("two-gpus")]), false],
  ["a Deployment 2 × 2 devices within", deployment(2, [fromTemplate("two-gpus")]), true],
  ["a Pod with All (32) over quota", pod("all", [fromTemplate("all-gpus")]), false],
  ["a Pod asking 4 devices on 2-device nodes", pod("four", [fromTemplate("four-gpus")]), false],
  [
    "a Pod whose class selects by attributes (not checked)",
    pod("h100", [fromTemplate("h100")]),
    true,
  ],
  [
    "a Pod with a shared claim",
    pod("shared", [{ name: "gpus", resourceClaimName: "shared" }]),
    true,
  ],
  ["a Pod whose template does not exist", pod("missing", [fromTemplate("nope")]), true],
  ["a PyTorchJob gang of 1 + 2 × 2 devices over 4 left", pytorchJob(2), false],
];

describe("DRA: controller and check agree", () => {
  it("the controller's probe fell back to v1beta1 (v1, v1beta2 not served)", async () => {
    await eventually(() => {
      const probed = api.requests
        .filter(r => r.path.includes("/apis/resource.k8s.io/"))
        .map(r => r.path.split("?")[0]);
      expect(probed).toEqual(
        expect.arrayContaining([
          "/apis/resource.k8s.io/v1/deviceclasses",
          "/apis/resource.k8s.io/v1beta2/deviceclasses",
          "/apis/resource.k8s.io/v1beta1/deviceclasses",
        ]),
      );
    });
  });

  it.each(cases)("%s", async (_name, manifest, allowed) => {
    const report = await checkParity(controller, manifest, { objects: api.objects() });
    expect(report.differences).toEqual([]);
    expect(report.e2e.allowed).toBe(allowed);
    if (!allowed)
      expect(report.e2e.message).toMatch(/resource-quota: .*(ResourceClaims|fits no node)/);
  });
});
