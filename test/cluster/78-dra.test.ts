// GPUs claimed through Dynamic Resource Allocation on a real API server (v1.32: DRA beta, enabled
// for the suite in support/control-plane.ts): a DeviceClass, ResourceClaimTemplates, a node's
// ResourceSlice, and a namespace whose quota allows 3 devices of the class. The API server's own
// ResourceQuota plugin charges a ResourceClaim when it is created (the resource-claim controller
// makes one per pod from the template, after the pod was admitted): a Deployment over quota is
// accepted, and its claims fail later. The module refuses it at apply, with the numbers.
import { stringify } from "yaml";
import type { KubeObject } from "../../lib/objects/pod";
import { eventually } from "../support/wait";
import { applyObjects, connect, kubectl, namespace, useModule } from "./support/cluster";

const NS = "dra-quota";
const FIT_NS = "dra-fit";
const CLASS = "gpu.example.com";
const DEVICES = `${CLASS}.deviceclass.resource.k8s.io/devices`;
const NODE = "dra-gpu-node-1";
const cluster = connect();
const guard = useModule(cluster);

const DRA = "resource.k8s.io/v1beta1";
const deviceClass: KubeObject = {
  apiVersion: DRA,
  kind: "DeviceClass",
  metadata: { name: CLASS },
  spec: { selectors: [{ cel: { expression: `device.driver == "${CLASS}"` } }] },
};
const claimTemplate = (ns: string, name: string, count: number): KubeObject => ({
  apiVersion: DRA,
  kind: "ResourceClaimTemplate",
  metadata: { name, namespace: ns },
  spec: {
    spec: {
      devices: {
        requests: [{ name: "gpus", deviceClassName: CLASS, allocationMode: "ExactCount", count }],
      },
    },
  },
});
/** What a DRA driver publishes for a node with two GPUs. */
const resourceSlice: KubeObject = {
  apiVersion: DRA,
  kind: "ResourceSlice",
  metadata: { name: `${NODE}-${CLASS}` },
  spec: {
    driver: CLASS,
    nodeName: NODE,
    pool: { name: NODE, generation: 1, resourceSliceCount: 1 },
    devices: [0, 1].map(i => ({
      name: `gpu-${i}`,
      basic: { attributes: { model: { string: "h100" } } },
    })),
  },
};
const quota: KubeObject = {
  apiVersion: "v1",
  kind: "ResourceQuota",
  metadata: { name: "dra", namespace: NS },
  spec: { hard: { [DEVICES]: "3", "count/resourceclaims.resource.k8s.io": "10" } },
};

const podSpec = (template: string) => ({
  containers: [
    {
      name: "infer",
      image: "ghcr.io/example/infer:1.0",
      resources: { requests: { cpu: "100m", memory: "128Mi" }, claims: [{ name: "gpus" }] },
    },
  ],
  resourceClaims: [{ name: "gpus", resourceClaimTemplateName: template }],
});
const deployment = (replicas: number): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "infer", namespace: NS },
  spec: {
    replicas,
    selector: { matchLabels: { app: "infer" } },
    template: { metadata: { labels: { app: "infer" } }, spec: podSpec("two-gpus") },
  },
});
const pod = (ns: string, name: string, template: string): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: ns },
  spec: podSpec(template),
});

const apply = (obj: KubeObject) => kubectl(cluster, ["apply", "-f", "-"], stringify(obj));
const create = (obj: KubeObject) => kubectl(cluster, ["create", "-f", "-"], stringify(obj));
async function usedDevices(): Promise<string | undefined> {
  const q = await cluster.admin.get(`/api/v1/namespaces/${NS}/resourcequotas/dra`);
  return (q.body.status as { used?: Record<string, string> } | undefined)?.used?.[DEVICES];
}

beforeAll(async () => {
  await applyObjects(cluster, [namespace(NS), namespace(FIT_NS), quota]);
  for (const obj of [
    deviceClass,
    claimTemplate(NS, "two-gpus", 2),
    claimTemplate(FIT_NS, "four-gpus", 4),
    resourceSlice,
  ]) {
    const r = await apply(obj);
    if (r.code !== 0) throw new Error(`${obj.kind}: ${r.stderr}`);
  }
  // The quota controller counts claims (its DRA evaluator): status.used has the class, at 0.
  await eventually(async () => expect(await usedDevices()).toBe("0"), 30_000);
}, 120_000);

afterAll(async () => {
  await kubectl(cluster, ["delete", "resourceslice", resourceSlice.metadata!.name!]);
  await kubectl(cluster, ["delete", "deviceclass", CLASS]);
});

describe("without admission-guard: the API server's own quota judges the claim, not the pod", () => {
  test("a ResourceClaim over quota is refused by the ResourceQuota plugin (its DRA evaluator, v1.32)", async () => {
    const claim: KubeObject = {
      apiVersion: DRA,
      kind: "ResourceClaim",
      metadata: { name: "four-at-once", namespace: NS },
      // A claim's spec is what a template's spec.spec holds.
      spec: (claimTemplate(NS, "x", 4).spec as { spec: object }).spec,
    };
    const r = await create(claim);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      `exceeded quota: dra, requested: ${DEVICES}=4, used: ${DEVICES}=0, limited: ${DEVICES}=3`,
    );
  });
});

describe("with admission-guard", () => {
  beforeAll(async () => {
    await guard.install();
  }, 60_000);

  test("a Deployment of 2 replicas × a template asking 2 devices, quota 3: refused at apply with the numbers", async () => {
    const r = await eventually(async () => {
      const result = await apply(deployment(2));
      if (!result.stderr.includes("ResourceClaims its pods get")) throw new Error(result.stderr);
      return result;
    }, 30_000);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      `admission-guard/resource-quota: Deployment ${NS}/infer exceeds the namespace quota with the ResourceClaims its pods get: ${DEVICES}: Deployment asks 4 (2 replicas × 2; ResourceClaimTemplate two-gpus asks 2 (request gpus: 2 of class ${CLASS})), quota dra has 3 of 3 left (0 used)`,
    );
    expect(r.stderr).toContain("lower spec.replicas from 2 to at most 1");
    expect(r.stderr).toContain(`kubectl patch resourcequota dra -n ${NS} --type merge`);
  });

  test("within quota (1 replica): admitted; its pod's claim is then charged 2 devices by the API server, as the module counts it", async () => {
    const r = await apply(deployment(1));
    expect(r.stderr).not.toContain("denied");
    expect(r.code).toBe(0);
    // The ReplicaSet's pod, then the claim the resource-claim controller makes from the template.
    await eventually(async () => expect(await usedDevices()).toBe("2"), 60_000);
  });

  test("a pod claiming DRA devices over quota (2 used, 2 more asked, 3 allowed): refused at create", async () => {
    const r = await eventually(async () => {
      const result = await create(pod(NS, "trainer", "two-gpus"));
      if (!result.stderr.includes("(2 used)")) throw new Error(result.stderr);
      return result;
    }, 30_000);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      `admission-guard/resource-quota: Pod ${NS}/trainer exceeds the namespace quota with the ResourceClaims its pods get: ${DEVICES}: pod asks 2 (ResourceClaimTemplate two-gpus asks 2 (request gpus: 2 of class ${CLASS})), quota dra has 1 of 3 left (2 used)`,
    );
  });

  test("a pod whose claim asks more devices than any node's ResourceSlices offer: refused (node fit)", async () => {
    const r = await create(pod(FIT_NS, "big", "four-gpus"));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      `Pod ${FIT_NS}/big fits no node: each pod's ResourceClaims ask 4 devices of DRA driver ${CLASS} on one node (ResourceClaimTemplate four-gpus request gpus: 4 of class ${CLASS}); the most any node's ResourceSlices offer is 2 (node ${NODE}, 1 node with any)`,
    );
  });
});
