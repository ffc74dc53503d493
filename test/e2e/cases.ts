// The objects the e2e suites send: the seeds' workloads (examples/ or test/fixtures/e2e), the same
// pods moved into hello-pepr's demo namespace, and the awkward inputs. Shared by the admission
// and parity suites so both cover exactly the same cases.
import { HELLO_DENY_LABEL } from "../../hello-pepr";
import type { KubeObject } from "../../lib/objects/pod";
import { seedWorkloads } from "../support/manifests";

export const DEMO_NS = "pepr-demo";

export const seeds = seedWorkloads();
export const seedPods = seeds.workloads.map(m => m.object).filter(o => o.kind === "Pod");
export const seedWorkloadObjects = seeds.workloads.map(m => m.object).filter(o => o.kind !== "Pod");

/** The cluster the stand-in starts with: the seeds' namespaces plus the demo namespace. */
export const clusterObjects: KubeObject[] = [
  ...seeds.cluster,
  { apiVersion: "v1", kind: "Namespace", metadata: { name: DEMO_NS } },
  { apiVersion: "v1", kind: "Namespace", metadata: { name: "kube-system" } },
];

/** A copy of an object in another namespace (its labels kept). */
export function inNamespace(obj: KubeObject, namespace: string): KubeObject {
  const copy = structuredClone(obj);
  copy.metadata = { ...(copy.metadata ?? {}), namespace };
  return copy;
}

/** A Node whose capacity is its allocatable, labelled with its hostname as the kubelet does. */
export const node = (name: string, allocatable: Record<string, string>): KubeObject => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: { name, labels: { "kubernetes.io/hostname": name } },
  spec: {},
  status: { capacity: allocatable, allocatable },
});

export const demoPod = (labels: Record<string, string> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "demo", namespace: DEMO_NS, labels: { app: "demo", ...labels } },
  spec: { containers: [{ name: "app", image: "ghcr.io/example/app:1.0" }] },
});

export const deniedDemoPod = () => demoPod({ [HELLO_DENY_LABEL]: "true" });

export const demoDeployment = (templateLabels: Record<string, string> = {}): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "demo", namespace: DEMO_NS },
  spec: {
    replicas: 2,
    selector: { matchLabels: { app: "demo" } },
    template: {
      metadata: { labels: { app: "demo", ...templateLabels } },
      spec: { containers: [{ name: "app", image: "ghcr.io/example/app:1.0" }] },
    },
  },
});

/** A pod of a ReplicaSet, as the replicaset-controller creates it: generateName, no name, owner. */
export const replicaSetPod = (): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: {
    generateName: "demo-7d9f8b6c5-",
    namespace: DEMO_NS,
    labels: { app: "demo", "pod-template-hash": "7d9f8b6c5" },
    ownerReferences: [
      {
        apiVersion: "apps/v1",
        kind: "ReplicaSet",
        name: "demo-7d9f8b6c5",
        uid: "0b3f7c52-8a55-4c1e-9a8e-5d0c2f4a9e11",
        controller: true,
        blockOwnerDeletion: true,
      },
    ],
  },
  spec: { containers: [{ name: "app", image: "ghcr.io/example/app:1.0" }] },
});

export const kubeSystemPod = (): KubeObject => ({
  ...inNamespace(demoPod({ [HELLO_DENY_LABEL]: "true" }), "kube-system"),
});

export const podWithoutContainers = (): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "empty", namespace: DEMO_NS },
  spec: {},
});

export const podWithoutSpec = (): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "nospec", namespace: DEMO_NS },
});

export const unknownKind = (): KubeObject => ({
  apiVersion: "example.com/v1",
  kind: "Widget",
  metadata: { name: "w", namespace: DEMO_NS },
  spec: { size: 3 },
});
