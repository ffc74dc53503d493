// What the admission process's caches keep of each object (lib/cluster/live.ts projections): a
// realistic GPU node (50 images, conditions, managed fields, nodeInfo) shrinks to what node fit and
// the image platform read, and the rules answer the same on the reduced nodes as on the whole ones;
// namespaces keep what every rule reads; quotas, LimitRanges and Exemptions lose only bookkeeping;
// ServiceAccounts keep their names. Each cache of LiveCluster applies its projection.
import type {
  V1LimitRange,
  V1ManagedFieldsEntry,
  V1Node,
  V1ResourceQuota,
} from "@kubernetes/client-node";
import type { KubernetesObject } from "kubernetes-fluent-client";
import { resourceQuotaPolicy } from "../../../capabilities/resource-quota";
import { platformOf } from "../../../capabilities/security-context/image-user";
import { namespaceInfoOf, SnapshotCluster } from "../../../lib/cluster/view";
import {
  LiveCluster,
  namespaceAsRead,
  nodeAsRead,
  withoutBookkeeping,
} from "../../../lib/cluster/live";
import { review } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import type { RuleContext } from "../../../lib/engine/policy";
import { defaultSettings } from "../../../lib/settings";
import { formatViolation } from "../../../lib/objects/verdict";

const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

/** Server-side apply's bookkeeping as the API server returns it: a few managers, each a field tree. */
const managedFields = (fields: string[]): V1ManagedFieldsEntry[] =>
  ["kubelet", "kube-controller-manager", "nvidia-device-plugin", "kubectl-label"].map(
    (manager, i) => ({
      manager,
      operation: i ? "Update" : "Apply",
      apiVersion: "v1",
      time: "2025-01-01T00:00:00Z",
      fieldsType: "FieldsV1",
      fieldsV1: Object.fromEntries(fields.map(f => [`f:${f}`, { ".": {}, [`f:${manager}`]: {} }])),
      subresource: i === 0 ? "status" : undefined,
    }),
  ) as unknown as V1ManagedFieldsEntry[];

interface NodeShape {
  name: string;
  pool: "gpu" | "cpu";
  zone: string;
  allocatable: Record<string, string>;
  unschedulable?: boolean;
  arch?: string;
}

/** A node as a GPU cluster's API server returns it (~13 KB of JSON). */
function realisticNode(n: NodeShape): V1Node & KubernetesObject {
  const gpu = n.pool === "gpu";
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name: n.name,
      uid: `uid-${n.name}`,
      resourceVersion: "123456",
      creationTimestamp: new Date("2025-01-01T00:00:00Z"),
      labels: {
        "kubernetes.io/hostname": n.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": n.arch ?? "amd64",
        "node.kubernetes.io/instance-type": gpu ? "p4d.24xlarge" : "m6i.4xlarge",
        "topology.kubernetes.io/zone": n.zone,
        pool: n.pool,
        ...(gpu && { "nvidia.com/gpu.product": "A100-SXM4-40GB", "nvidia.com/gpu.count": "8" }),
      },
      annotations: {
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        "csi.volume.kubernetes.io/nodeid": JSON.stringify({ "ebs.csi.aws.com": `i-${n.name}` }),
      },
      managedFields: managedFields(["metadata", "spec", "status", "conditions", "images"]),
    },
    spec: {
      podCIDR: "10.0.1.0/24",
      podCIDRs: ["10.0.1.0/24"],
      providerID: `aws:///${n.zone}/i-${n.name}`,
      unschedulable: n.unschedulable,
      taints: gpu
        ? [
            { key: "nvidia.com/gpu", value: "present", effect: "NoSchedule" },
            { key: "soft", value: "x", effect: "PreferNoSchedule" },
          ]
        : undefined,
    },
    status: {
      capacity: { ...n.allocatable, pods: "110" },
      allocatable: n.allocatable,
      conditions: ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"].map(type => ({
        type,
        status: type === "Ready" ? "True" : "False",
        lastHeartbeatTime: new Date("2025-01-01T00:00:00Z"),
        lastTransitionTime: new Date("2025-01-01T00:00:00Z"),
        reason: `Kubelet${type}`,
        message: `kubelet reports ${type} as it is, with a message of some length`,
      })),
      addresses: [
        { type: "InternalIP", address: "10.0.1.17" },
        { type: "Hostname", address: n.name },
      ],
      daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
      nodeInfo: {
        machineID: "ec2a0f7e0d0e4e6d9b3f1f5b1b1b1b1b",
        systemUUID: "ec2a0f7e-0d0e-4e6d-9b3f-1f5b1b1b1b1b",
        bootID: "0b0b0b0b-1c1c-2d2d-3e3e-4f4f4f4f4f4f",
        kernelVersion: "5.10.219-208.866.amzn2.x86_64",
        osImage: "Amazon Linux 2",
        containerRuntimeVersion: "containerd://1.7.11",
        kubeletVersion: "v1.30.2-eks-1552ad0",
        kubeProxyVersion: "v1.30.2-eks-1552ad0",
        operatingSystem: "linux",
        architecture: n.arch ?? "amd64",
      },
      images: Array.from({ length: 50 }, (_, i) => ({
        names: [
          `123456789012.dkr.ecr.us-west-2.amazonaws.com/ml/train-image-${i}@sha256:${"ab".repeat(32)}`,
          `123456789012.dkr.ecr.us-west-2.amazonaws.com/ml/train-image-${i}:v1.${i}.0`,
        ],
        sizeBytes: 1_000_000_000 + i,
      })),
    },
  };
}

const NODES: NodeShape[] = [
  { name: "gpu-a-1", pool: "gpu", zone: "z1", allocatable: gpuAlloc() },
  { name: "gpu-a-2", pool: "gpu", zone: "z1", allocatable: gpuAlloc() },
  { name: "gpu-b-1", pool: "gpu", zone: "z2", allocatable: gpuAlloc(), unschedulable: true },
  { name: "cpu-a-1", pool: "cpu", zone: "z1", allocatable: cpuAlloc() },
  { name: "cpu-b-1", pool: "cpu", zone: "z2", allocatable: cpuAlloc() },
  { name: "cpu-b-2", pool: "cpu", zone: "z2", allocatable: { ...cpuAlloc(), cpu: "7910m" } },
];
function gpuAlloc() {
  return { cpu: "95", memory: "1100Gi", "ephemeral-storage": "900Gi", "nvidia.com/gpu": "8" };
}
function cpuAlloc() {
  return { cpu: "15890m", memory: "57Gi", "ephemeral-storage": "95Gi" };
}

const pod = (
  name: string,
  requests: Record<string, string>,
  spec: Record<string, unknown> = {},
  kind = "Pod",
): KubeObject => {
  const podSpec = {
    containers: [{ name: "c", image: "registry.example/train:1", resources: { requests } }],
    ...spec,
  };
  return kind === "Pod"
    ? { apiVersion: "v1", kind, metadata: { name, namespace: "ml" }, spec: podSpec }
    : {
        apiVersion: "apps/v1",
        kind,
        metadata: { name, namespace: "ml" },
        spec: {
          selector: { matchLabels: { app: name } },
          template: { metadata: { labels: { app: name } }, spec: podSpec },
        },
      };
};
const GPU_TOLERATION = [{ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" }];
const PODS: KubeObject[] = [
  pod("fits", { cpu: "2", memory: "4Gi" }),
  pod("too-much-cpu", { cpu: "200" }),
  pod("gpu-untolerated", { "nvidia.com/gpu": "1" }),
  pod("gpu-fits", { "nvidia.com/gpu": "4", cpu: "40" }, { tolerations: GPU_TOLERATION }),
  pod("gpu-too-many", { "nvidia.com/gpu": "16" }, { tolerations: GPU_TOLERATION }),
  pod("zone-z2", { cpu: "9" }, { nodeSelector: { "topology.kubernetes.io/zone": "z2" } }),
  pod("named", { cpu: "12" }, { nodeName: "cpu-b-2" }),
  pod("by-hostname", { cpu: "16" }, { nodeSelector: { "kubernetes.io/hostname": "cpu-a-1" } }),
  pod("agent", { cpu: "1", "nvidia.com/gpu": "1" }, {}, "DaemonSet"),
];

async function verdicts(nodes: KubeObject[]) {
  const cluster = new SnapshotCluster(nodes);
  return Promise.all(
    PODS.map(async p => {
      const r = await review([resourceQuotaPolicy], p, { settings: defaultSettings(), cluster });
      return {
        pod: p.metadata?.name,
        allowed: r.allowed,
        violations: r.violations.map(formatViolation),
        warnings: r.warnings,
      };
    }),
  );
}

describe("nodes: what node fit and the image platform read", () => {
  const whole = NODES.map(realisticNode);

  it("a realistic GPU node shrinks to name, labels, taints, unschedulable, allocatable, its platform", () => {
    const node = whole[2];
    expect(JSON.stringify(node).length).toBeGreaterThan(10_000);
    const reduced = nodeAsRead(node);
    expect(reduced).toEqual({
      apiVersion: "v1",
      kind: "Node",
      metadata: {
        name: "gpu-b-1",
        labels: node.metadata!.labels,
        resourceVersion: "123456",
      },
      spec: { taints: node.spec!.taints, unschedulable: true },
      status: {
        allocatable: gpuAlloc(),
        nodeInfo: { architecture: "amd64", operatingSystem: "linux" },
      },
    });
    expect(JSON.stringify(reduced).length).toBeLessThan(JSON.stringify(node).length / 10);
    // No empty slots: a CPU node has no taints, a schedulable one no unschedulable.
    expect(nodeAsRead(whole[3]).spec).toEqual({});
    // Reduced once more, nothing changes (a re-list re-applies what the cache holds).
    expect(nodeAsRead(reduced)).toEqual(reduced);
  });

  it("node fit says the same of every pod on the reduced nodes as on the whole ones", async () => {
    const onWhole = await verdicts(whole as KubeObject[]);
    const onReduced = await verdicts(whole.map(nodeAsRead) as KubeObject[]);
    expect(onReduced).toEqual(onWhole);
    // The comparison is not vacuous: denials, warnings and allowed pods among them.
    expect(onWhole.filter(v => !v.allowed).map(v => v.pod)).toEqual(
      expect.arrayContaining(["too-much-cpu", "gpu-too-many"]),
    );
    expect(onWhole.find(v => v.pod === "fits")).toMatchObject({ allowed: true, violations: [] });
    expect(onWhole.some(v => v.warnings.length > 0)).toBe(true);
  });

  it("the image platform (the nodes' one architecture) is read from the reduced nodes", () => {
    const arm = NODES.map(n => nodeAsRead(realisticNode({ ...n, arch: "arm64" })));
    const ctx = { cluster: new SnapshotCluster(arm as KubeObject[]) } as unknown as RuleContext;
    expect(platformOf({ metadata: {}, spec: { containers: [] }, path: "" }, ctx)).toEqual({
      os: "linux",
      architecture: "arm64",
    });
  });

  it("LiveCluster's node cache holds the reduced nodes", () => {
    const live = new LiveCluster();
    for (const n of whole) live.nodeStore.apply(n, "ADDED");
    live.nodeStore.synced = true;
    expect(live.nodes()).toEqual(whole.map(nodeAsRead));
  });
});

describe("namespaces, quotas, LimitRanges, Exemptions, ServiceAccounts", () => {
  const namespace: KubernetesObject = {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: {
      name: "ml",
      uid: "uid-ml",
      resourceVersion: "42",
      creationTimestamp: new Date("2025-01-01T00:00:00Z"),
      labels: { "admission-guard.dev/mode": "warn", team: "a" },
      annotations: {
        "admission-guard.dev/allowed-registries": "registry.example",
        [LAST_APPLIED]: JSON.stringify({ big: "x".repeat(2000) }),
      },
      managedFields: managedFields(["metadata"]) as never,
    },
    spec: { finalizers: ["kubernetes"] },
    status: { phase: "Active" },
  } as KubernetesObject;

  it("a namespace keeps what the rules and the namespace events read, without kubectl's copy", () => {
    const reduced = namespaceAsRead(namespace);
    expect(reduced).toEqual({
      apiVersion: "v1",
      kind: "Namespace",
      metadata: {
        name: "ml",
        uid: "uid-ml",
        resourceVersion: "42",
        creationTimestamp: namespace.metadata!.creationTimestamp,
        labels: namespace.metadata!.labels,
        annotations: { "admission-guard.dev/allowed-registries": "registry.example" },
      },
      status: { phase: "Active" },
    });
    const info = namespaceInfoOf(namespace as KubeObject);
    delete info.annotations[LAST_APPLIED];
    expect(namespaceInfoOf(reduced as KubeObject)).toEqual(info);
  });

  it("quotas and LimitRanges lose managed fields and kubectl's copy, nothing else", () => {
    const quota = {
      apiVersion: "v1",
      kind: "ResourceQuota",
      metadata: {
        name: "compute",
        namespace: "ml",
        uid: "uid-q",
        annotations: { [LAST_APPLIED]: "{}", owner: "platform" },
        managedFields: managedFields(["spec"]),
      },
      spec: { hard: { "requests.cpu": "100" } },
      status: { hard: { "requests.cpu": "100" }, used: { "requests.cpu": "12" } },
    } as V1ResourceQuota & KubernetesObject;
    const reduced = withoutBookkeeping(quota);
    expect(reduced).toEqual({
      ...quota,
      metadata: {
        name: "compute",
        namespace: "ml",
        uid: "uid-q",
        annotations: { owner: "platform" },
      },
    });
    expect(quota.metadata?.managedFields).toBeDefined(); // the received object is not changed
    const plain = { metadata: { name: "l", namespace: "ml" }, spec: {} } as V1LimitRange &
      KubernetesObject;
    expect(withoutBookkeeping(plain)).toBe(plain);
  });

  it("LiveCluster's caches apply their projections (Exemptions, quotas, LimitRanges, namespaces, ServiceAccounts)", () => {
    const live = new LiveCluster(undefined, { exemptionsNamespace: "guard" });
    const bookkept = (kind: string, namespace?: string) =>
      ({
        kind,
        metadata: {
          name: "x",
          namespace,
          managedFields: managedFields(["spec"]),
          annotations: { [LAST_APPLIED]: "{}" },
        },
        spec: { a: 1 },
      }) as never;
    live.quotas.apply(bookkept("ResourceQuota", "ml"), "ADDED");
    live.limitRangeStore.apply(bookkept("LimitRange", "ml"), "ADDED");
    live.exemptionStore!.apply(bookkept("Exemption", "guard"), "ADDED");
    for (const store of [live.quotas, live.limitRangeStore, live.exemptionStore!])
      expect(store.all()[0]).toEqual({
        kind: store.all()[0].kind,
        metadata: { name: "x", namespace: store.all()[0].metadata?.namespace },
        spec: { a: 1 },
      });
    live.namespaces.apply(namespace, "ADDED");
    expect(live.namespaces.all()[0]).toEqual(namespaceAsRead(namespace));
    live.accounts.store.apply(
      {
        apiVersion: "v1",
        kind: "ServiceAccount",
        metadata: { name: "sa", namespace: "ml", managedFields: managedFields(["secrets"]) },
        secrets: [{ name: "token" }],
      } as never,
      "ADDED",
    );
    expect(live.accounts.store.all()).toEqual([{ metadata: { namespace: "ml", name: "sa" } }]);
  });
});
