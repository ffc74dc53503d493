// accelerators: the tolerations GPU nodes ask for (from the node view and the
// ExtendedResourceToleration convention), runtimeClassName, and each check with its setting,
// through the one engine (review(): what `check` and the webhook run) with every capability.
import type { V1Node } from "@kubernetes/client-node";
import { policies } from "../../../capabilities";
import { gpuNodes } from "../../../capabilities/accelerators/gpu-nodes";
import { CAPABILITY, MAX_RESOURCES } from "../../../capabilities/accelerators/rules";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { recordedFixes, review } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import { formatViolation, type Violation } from "../../../lib/objects/verdict";
import { NS_KEYS, parseSettings, type SettingsInput } from "../../../lib/settings";
import { defaultTolerations } from "../../support/admission";
import { node } from "../resource-quota/support";

const NS = "ml";
type Obj = Record<string, unknown>;

const GPU_TAINT = { key: "nvidia.com/gpu", value: "present", effect: "NoSchedule" };
const SKU_TAINT = { key: "sku", value: "gpu", effect: "NoSchedule" };
const gpuNode = (name: string, taints: Obj[] = [GPU_TAINT, SKU_TAINT], labels = {}) =>
  node(
    name,
    { cpu: "32", memory: "256Gi", "nvidia.com/gpu": "8" },
    { taints },
    { accelerator: "a100", ...labels },
  );
const cpuNode = (name: string, taints: Obj[] = []) =>
  node(name, { cpu: "32", memory: "128Gi" }, { taints });
const NODES = () => [gpuNode("gpu-1"), gpuNode("gpu-2"), cpuNode("cpu-1")];

const namespace = (labels: Record<string, string> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Namespace",
  metadata: { name: NS, labels },
});
const clusterOf = (nodes: V1Node[] | undefined, labels: Record<string, string> = {}) =>
  new SnapshotCluster([namespace(labels), ...((nodes ?? []) as unknown as KubeObject[])]);

const trainer = (resources: Obj, extra: Obj = {}): Obj => ({
  name: "trainer",
  image: "ghcr.io/org/train:1",
  resources,
  ...extra,
});
const GOOD = { limits: { "nvidia.com/gpu": "1", cpu: "8", memory: "64Gi" } };
const pod = (spec: Obj, metadata: Obj = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: {
    name: "train",
    namespace: NS,
    ownerReferences: [
      { apiVersion: "batch/v1", kind: "Job", name: "train", uid: "u1", controller: true },
    ],
    ...metadata,
  },
  spec,
});
const deployment = (spec: Obj): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "serve", namespace: NS },
  spec: {
    replicas: 1,
    selector: { matchLabels: { app: "serve" } },
    template: { metadata: { labels: { app: "serve" } }, spec },
  },
});

async function judge(
  object: KubeObject,
  o: { nodes?: V1Node[] | null; settings?: SettingsInput; labels?: Record<string, string> } = {},
) {
  return review(policies, object, {
    settings: parseSettings(o.settings ?? {}),
    cluster: clusterOf(o.nodes === null ? undefined : (o.nodes ?? NODES()), o.labels),
  });
}
const specOf = (o: KubeObject) => o.spec as Obj;
const tolerationsOf = (o: KubeObject) => (specOf(o).tolerations as Obj[] | undefined) ?? [];
const ours = (r: { violations: Violation[] }) =>
  r.violations.filter(v => v.capability === CAPABILITY);
const rulesOf = (r: { violations: Violation[] }) => ours(r).map(v => v.rule);

const CONVENTION = { key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" };

describe("the node view", () => {
  it("a taint of every node offering the resource and of no other; transient taints never", () => {
    const nodes = [
      gpuNode("gpu-1", [GPU_TAINT, SKU_TAINT, { key: "team", value: "a", effect: "NoSchedule" }]),
      gpuNode("gpu-2", [
        GPU_TAINT,
        SKU_TAINT,
        { key: "node.kubernetes.io/not-ready", effect: "NoExecute" },
      ]),
      gpuNode("gpu-3", [
        GPU_TAINT,
        SKU_TAINT,
        { key: "node.kubernetes.io/not-ready", effect: "NoExecute" },
      ]),
      // sku=gpu is also on a node without GPUs: it is not the GPUs' taint.
      cpuNode("cpu-1", [SKU_TAINT]),
    ];
    const view = gpuNodes(nodes)!;
    expect(view.resources.get("nvidia.com/gpu")).toEqual({
      taints: [GPU_TAINT],
      offering: 3,
      first: "gpu-1",
    });
    expect(view.someWithout).toBe(true);
    expect(gpuNodes(undefined)).toBeUndefined();
    // Computed once per node list.
    expect(gpuNodes(nodes)).toBe(view);
  });

  it("every node not-ready at once: the not-ready taint is still not the GPUs'", () => {
    const notReady = { key: "node.kubernetes.io/not-ready", effect: "NoExecute" };
    const view = gpuNodes([gpuNode("gpu-1", [notReady]), cpuNode("cpu-1")])!;
    expect(view.resources.get("nvidia.com/gpu")!.taints).toEqual([]);
  });
});

describe("the fix on a Pod", () => {
  it("adds the GPU nodes' tolerations and the convention, nothing else, and records them", async () => {
    const r = await judge(pod({ containers: [trainer(GOOD)] }));
    expect(r.allowed).toBe(true);
    expect(tolerationsOf(r.object)).toEqual([
      { key: "nvidia.com/gpu", operator: "Equal", value: "present", effect: "NoSchedule" },
      { key: "sku", operator: "Equal", value: "gpu", effect: "NoSchedule" },
      CONVENTION,
    ]);
    expect(recordedFixes(r.object).get(CAPABILITY)).toEqual(["tolerations"]);
    expect(r.changes.filter(c => c.capability === CAPABILITY).map(c => c.message)).toEqual([
      'spec.tolerations[0]={"key":"nvidia.com/gpu","operator":"Equal","value":"present","effect":"NoSchedule"} (a taint of every node offering nvidia.com/gpu (2, first gpu-1) and of no other)',
      'spec.tolerations[1]={"key":"sku","operator":"Equal","value":"gpu","effect":"NoSchedule"} (a taint of every node offering nvidia.com/gpu (2, first gpu-1) and of no other)',
      'spec.tolerations[2]={"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"} (the ExtendedResourceToleration convention for nvidia.com/gpu)',
    ]);
    // No runtimeClassName unless a setting names one.
    expect(specOf(r.object).runtimeClassName).toBeUndefined();
  });

  it("idempotent: fixing twice equals once, with DefaultTolerationSeconds' tolerations there", async () => {
    const defaulted = defaultTolerations();
    const once = await judge(pod({ containers: [trainer(GOOD)], tolerations: defaulted }));
    expect(tolerationsOf(once.object).slice(0, 2)).toEqual(defaulted);
    expect(tolerationsOf(once.object)).toHaveLength(5);
    const twice = await judge(once.object);
    expect(twice.object.spec).toEqual(once.object.spec);
    expect(twice.changes.filter(c => c.capability === CAPABILITY)).toEqual([]);
  });

  it("never duplicates a toleration the pod has (an Exists on the key tolerates every value)", async () => {
    const own = { key: "nvidia.com/gpu", operator: "Exists" };
    const r = await judge(pod({ containers: [trainer(GOOD)], tolerations: [own] }));
    expect(tolerationsOf(r.object)).toEqual([
      own,
      { key: "sku", operator: "Equal", value: "gpu", effect: "NoSchedule" },
    ]);
  });

  it("a pod without a GPU, or with the fix off, is left alone", async () => {
    const cpu = await judge(
      pod({ containers: [trainer({ limits: { cpu: "1", memory: "1Gi" } })] }),
    );
    expect(specOf(cpu.object).tolerations).toBeUndefined();
    // 0 of a GPU, however written, or a value that is no quantity: asks for none.
    for (const zero of ["0", "0m", "0.0", 0, "lots"]) {
      const r = await judge(pod({ containers: [trainer({ limits: { "nvidia.com/gpu": zero } })] }));
      expect([zero, specOf(r.object).tolerations]).toEqual([zero, undefined]);
    }
    const off = await judge(pod({ containers: [trainer(GOOD)] }), {
      settings: { accelerators: { mutate: false } },
    });
    expect(specOf(off.object).tolerations).toBeUndefined();
    const disabled = await judge(pod({ containers: [trainer(GOOD)] }), {
      settings: { accelerators: { enabled: false } },
    });
    expect(specOf(disabled.object).tolerations).toBeUndefined();
  });

  it("nodes not known (check without nodes, cache not synced): only the convention", async () => {
    const r = await judge(pod({ containers: [trainer(GOOD)] }), { nodes: null });
    expect(tolerationsOf(r.object)).toEqual([CONVENTION]);
  });

  it("AMD, MIG slices and Intel each get their own convention; at most MAX_RESOURCES resources read", async () => {
    const r = await judge(
      pod({
        containers: [
          trainer({ limits: { "amd.com/gpu": "1", "nvidia.com/mig-1g.5gb": "1", cpu: "1" } }),
        ],
      }),
      { nodes: [cpuNode("cpu-1")] },
    );
    expect(tolerationsOf(r.object).map(t => t.key)).toEqual([
      "amd.com/gpu",
      "nvidia.com/mig-1g.5gb",
    ]);
    const many: Record<string, string> = {};
    for (let i = 0; i < 50; i++) many[`vendor${i}.example/gpu`] = "1";
    const flood = await judge(pod({ containers: [trainer({ limits: many })] }), { nodes: null });
    expect(tolerationsOf(flood.object)).toHaveLength(MAX_RESOURCES);
  });

  it("a hostile node list cannot make it tolerate a taint not tied to the GPUs", async () => {
    // Every node carries the taint: it is not the GPUs'; a taint on some GPU nodes only: not either.
    const everywhere = { key: "maintenance", value: "soon", effect: "NoExecute" };
    const nodes = [
      gpuNode("gpu-1", [GPU_TAINT, everywhere]),
      gpuNode("gpu-2", [GPU_TAINT, everywhere, { key: "team", value: "a", effect: "NoSchedule" }]),
      cpuNode("cpu-1", [everywhere]),
    ];
    const r = await judge(pod({ containers: [trainer(GOOD)] }), { nodes });
    expect(tolerationsOf(r.object).map(t => t.key)).toEqual(["nvidia.com/gpu", "nvidia.com/gpu"]);
  });

  it("runtimeClassName from the setting, never over the pod's own", async () => {
    const settings = { accelerators: { runtimeClassName: "nvidia" } };
    const r = await judge(pod({ containers: [trainer(GOOD)] }), { settings });
    expect(specOf(r.object).runtimeClassName).toBe("nvidia");
    expect(recordedFixes(r.object).get(CAPABILITY)).toEqual(["runtime-class", "tolerations"]);
    const own = await judge(pod({ containers: [trainer(GOOD)], runtimeClassName: "kata" }), {
      settings,
    });
    expect(specOf(own.object).runtimeClassName).toBe("kata");
    const cpu = await judge(pod({ containers: [trainer({ limits: { cpu: "1" } })] }), { settings });
    expect(specOf(cpu.object).runtimeClassName).toBeUndefined();
    expect(() => parseSettings({ accelerators: { runtimeClassName: "Not A Name" } })).toThrow(
      /accelerators.runtimeClassName/,
    );
  });
});

describe("node fit sees the fix", () => {
  it("a GPU pod on tainted GPU nodes: admitted after the fix; denied by node fit with the fix off", async () => {
    const fixed = await judge(pod({ containers: [trainer(GOOD)] }));
    expect(fixed.violations.filter(v => v.rule === "node-fit")).toEqual([]);
    const off = await judge(pod({ containers: [trainer(GOOD)] }), {
      settings: { accelerators: { mutate: false } },
    });
    const fit = off.violations.find(v => v.rule === "node-fit");
    expect(fit?.message).toContain("excluded: 2 by taints");
    expect(fit?.fix).toContain(
      'tolerate the taints of node "gpu-1", which offers nvidia.com/gpu: nvidia.com/gpu=present:NoSchedule, sku=gpu:NoSchedule',
    );
  });
});

describe("the fix on a Deployment's template", () => {
  it("previewed: its pods will get the tolerations, the Deployment unchanged", async () => {
    const r = await judge(deployment({ containers: [trainer(GOOD)] }));
    expect(r.allowed).toBe(true);
    expect(r.warnings.join("\n")).toContain(
      'admission-guard/accelerators: its pods will get spec.template.spec.tolerations[0]={"key":"nvidia.com/gpu","operator":"Equal","value":"present","effect":"NoSchedule"}',
    );
    expect(r.warnings.join("\n")).toContain(
      'spec.template.spec.tolerations[2]={"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"} (the ExtendedResourceToleration convention for nvidia.com/gpu) (when Deployment creates them)',
    );
    // The Deployment as stored is not changed (workloads.mutate is off): no change was applied.
    expect(r.changes.filter(c => c.capability === CAPABILITY).length).toBe(3);
    expect(r.violations.filter(v => v.rule === "node-fit")).toEqual([]);
  });
});

describe("the checks", () => {
  it("memory-request: below the limit, or none; with the numbers and the field", async () => {
    const r = await judge(
      pod({
        containers: [
          trainer({
            requests: { "nvidia.com/gpu": "1", cpu: "8", memory: "16Gi" },
            limits: { "nvidia.com/gpu": "1", cpu: "8", memory: "64Gi" },
          }),
        ],
      }),
    );
    const v = ours(r).find(x => x.rule === "memory-request")!;
    expect(formatViolation(v)).toBe(
      'admission-guard/accelerators: Pod ml/train: container "trainer" (spec.containers[0]) asks memory 16Gi below its limit 64Gi while using a GPU (1 nvidia.com/gpu): under memory pressure the kubelet evicts such a pod first, after hours on an expensive node. Fix: set resources.requests.memory equal to resources.limits.memory in spec.containers[0]',
    );
    expect(v.severity).toBe("warn");
    expect(r.allowed).toBe(true);
    const none = await judge(
      pod({ containers: [trainer({ limits: { "nvidia.com/gpu": "1", cpu: "1" } })] }),
    );
    expect(ours(none).find(x => x.rule === "memory-request")?.message).toContain(
      'container "trainer" (spec.containers[0]) asks no memory',
    );
    const good = await judge(pod({ containers: [trainer(GOOD)] }));
    expect(rulesOf(good)).toEqual([]);
  });

  it("memory-request: deny denies, off says nothing", async () => {
    const low = pod({
      containers: [
        trainer({
          requests: { memory: "1Gi", cpu: "1" },
          limits: { "nvidia.com/gpu": "1", memory: "2Gi" },
        }),
      ],
    });
    const denied = await judge(low, { settings: { accelerators: { memoryRequest: "deny" } } });
    expect(denied.allowed).toBe(false);
    expect(denied.denials.join("\n")).toContain("admission-guard/accelerators: Pod ml/train");
    const off = await judge(low, { settings: { accelerators: { memoryRequest: "off" } } });
    expect(rulesOf(off)).toEqual([]);
  });

  it("cpu-request: a GPU container without one", async () => {
    const r = await judge(
      pod({ containers: [trainer({ limits: { "nvidia.com/gpu": "1", memory: "8Gi" } })] }),
    );
    expect(rulesOf(r)).toEqual(["cpu-request"]);
    expect(formatViolation(ours(r)[0])).toContain(
      'container "trainer" (spec.containers[0]) asks no CPU while using a GPU (1 nvidia.com/gpu)',
    );
    expect(ours(r)[0].fix).toContain("set resources.requests.cpu");
  });

  it("max-per-pod: the setting, and the namespace label over it; a bad label warns", async () => {
    const eight = pod({
      containers: [trainer({ limits: { "nvidia.com/gpu": "8", cpu: "8", memory: "64Gi" } })],
    });
    expect(rulesOf(await judge(eight))).toEqual([]);
    const capped = await judge(eight, {
      settings: { accelerators: { maxPerPodCount: 4, maxPerPod: "deny" } },
    });
    expect(capped.allowed).toBe(false);
    expect(formatViolation(ours(capped)[0])).toBe(
      "admission-guard/accelerators: Pod ml/train asks for 8 accelerators (8 nvidia.com/gpu), more than 4, the most one pod may have (accelerators.maxPerPodCount). Fix: lower the GPU limits in spec.containers[*].resources.limits to 4 in all, or split the work over more pods (a PyTorchJob's or JobSet's workers)",
    );
    const labelled = await judge(eight, { labels: { [NS_KEYS.maxAccelerators]: "2" } });
    expect(ours(labelled)[0].message).toContain(
      `more than 2, the most one pod may have (the namespace label ${NS_KEYS.maxAccelerators}=2)`,
    );
    const bad = await judge(eight, {
      settings: { accelerators: { maxPerPodCount: 4 } },
      labels: { [NS_KEYS.maxAccelerators]: "lots" },
    });
    expect(rulesOf(bad)).toEqual(["max-per-pod"]);
    expect(bad.warnings.join("\n")).toContain(
      `namespace ml has ${NS_KEYS.maxAccelerators}="lots", which is not a whole number`,
    );
  });

  it("bare-pod: a GPU Pod no controller owns; never a workload's template", async () => {
    const bare = await judge(pod({ containers: [trainer(GOOD)] }, { ownerReferences: [] }));
    expect(rulesOf(bare)).toEqual(["bare-pod"]);
    expect(formatViolation(ours(bare)[0])).toContain(
      "Pod ml/train asks for 1 nvidia.com/gpu and no controller owns it",
    );
    expect(ours(bare)[0].fix).toContain("kubectl create job train");
    expect(rulesOf(await judge(deployment({ containers: [trainer(GOOD)] })))).toEqual([]);
  });

  it("gpu-node-without-accelerator: tolerating the GPU taints or selecting only GPU nodes", async () => {
    const cpu = { limits: { cpu: "1", memory: "1Gi" } };
    const tolerating = await judge(
      pod({
        containers: [trainer(cpu)],
        tolerations: [
          { key: "nvidia.com/gpu", operator: "Exists" },
          { key: "sku", operator: "Exists" },
        ],
      }),
    );
    expect(rulesOf(tolerating)).toEqual(["gpu-node-without-accelerator"]);
    expect(formatViolation(ours(tolerating)[0])).toContain(
      "Pod ml/train asks for no accelerator but tolerates nvidia.com/gpu=present:NoSchedule, sku=gpu:NoSchedule, the taints that keep other pods off the 2 node(s) offering nvidia.com/gpu",
    );
    // One of two taints tolerated: it cannot land there.
    const half = await judge(
      pod({ containers: [trainer(cpu)], tolerations: [{ key: "sku", operator: "Exists" }] }),
    );
    expect(rulesOf(half)).toEqual([]);
    const selecting = await judge(
      pod({ containers: [trainer(cpu)], nodeSelector: { accelerator: "a100" } }),
      { nodes: [gpuNode("gpu-1", []), cpuNode("cpu-1")] },
    );
    expect(ours(selecting)[0].message).toContain("selects only nodes that offer a GPU");
    // A DaemonSet's pods (device plugins, monitoring) belong on every node.
    const daemon = await judge(
      pod(
        { containers: [trainer(cpu)], tolerations: [{ operator: "Exists" }] },
        {
          ownerReferences: [
            { apiVersion: "apps/v1", kind: "DaemonSet", name: "dcgm", uid: "u", controller: true },
          ],
        },
      ),
    );
    expect(rulesOf(daemon)).toEqual([]);
    // Every node a GPU node: nowhere else to go.
    const allGpu = await judge(
      pod({ containers: [trainer(cpu)], tolerations: [{ operator: "Exists" }] }),
      { nodes: [gpuNode("gpu-1"), gpuNode("gpu-2")] },
    );
    expect(rulesOf(allGpu)).toEqual([]);
  });
});

describe("DRA claims on a GPU class", () => {
  const objects = (driver: string): KubeObject[] => [
    {
      apiVersion: "resource.k8s.io/v1",
      kind: "DeviceClass",
      metadata: { name: "gpu" },
      spec: { selectors: [{ cel: { expression: `device.driver == "${driver}"` } }] },
    },
    {
      apiVersion: "resource.k8s.io/v1",
      kind: "ResourceClaimTemplate",
      metadata: { name: "two-gpus", namespace: NS },
      spec: {
        spec: {
          devices: { requests: [{ name: "g", exactly: { deviceClassName: "gpu", count: 2 } }] },
        },
      },
    },
  ];
  const claimPod = () =>
    pod(
      {
        containers: [trainer({ limits: { cpu: "1", memory: "1Gi" }, claims: [{ name: "gpus" }] })],
        resourceClaims: [{ name: "gpus", resourceClaimTemplateName: "two-gpus" }],
      },
      { ownerReferences: [] },
    );

  it("count as accelerators (bare pod, max per pod, runtimeClassName); another driver's do not", async () => {
    const run = (driver: string) =>
      review(policies, claimPod(), {
        settings: parseSettings({
          accelerators: { runtimeClassName: "nvidia", maxPerPodCount: 1 },
        }),
        cluster: new SnapshotCluster([namespace(), ...objects(driver)]),
      });
    const gpu = await run("gpu.nvidia.com");
    expect(rulesOf(gpu).sort()).toEqual(["bare-pod", "max-per-pod"]);
    expect(ours(gpu).find(v => v.rule === "max-per-pod")!.message).toContain(
      "asks for 2 accelerators (2 GPU device(s) of claim gpus)",
    );
    expect(specOf(gpu.object).runtimeClassName).toBe("nvidia");
    // No extended resource: no toleration (DRA devices carry their own taints).
    expect(specOf(gpu.object).tolerations).toBeUndefined();
    const nic = await run("nic.example.com");
    expect(rulesOf(nic)).toEqual([]);
    expect(specOf(nic.object).runtimeClassName).toBeUndefined();
  });
});
