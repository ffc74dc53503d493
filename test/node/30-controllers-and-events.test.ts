// Pods that controllers make, on a real node, with the module and its watcher: a Deployment's
// server pods reach Running, a training Job writes its checkpoint to a PersistentVolumeClaim, and
// `kubectl describe pod` shows the module's AdmissionGuardFixed Event next to the scheduler's and
// the kubelet's.
import { chmodSync, mkdtempSync } from "node:fs";
import { join } from "node:path";
import type { KubeObject } from "../../lib/objects/pod";
import { eventually } from "../support/wait";
import { applyObjects, connect, kubectl, namespace, useModule } from "../cluster/support/cluster";
import { imageOf } from "./support/shapes";
import {
  CHECKPOINT_DIR,
  nodeModuleEnv,
  serverContainer,
  removeNamespaces,
} from "./support/workloads";

const cluster = connect();
const registry = cluster.node!.registry!;
const guard = useModule(cluster, { watcher: true, env: nodeModuleEnv(registry) });
const NS = "node-controllers";

async function podsOf(selector: string): Promise<KubeObject[]> {
  const res = await cluster.admin.get(
    `/api/v1/namespaces/${NS}/pods?labelSelector=${encodeURIComponent(selector)}`,
  );
  return (res.body.items as KubeObject[]) ?? [];
}

type ContainerStatus = { ready: boolean; state?: { terminated?: { message?: string } } };
const statuses = (pod: KubeObject) =>
  (pod.status as { containerStatuses?: ContainerStatus[] })?.containerStatuses ?? [];

beforeAll(async () => {
  // A PersistentVolume as local-path provisioners make them: a directory on the node, mode 0777.
  const volumeDir = mkdtempSync(join(cluster.dir, "pv-"));
  chmodSync(volumeDir, 0o777);
  await applyObjects(cluster, [
    namespace(NS, { "pod-security.kubernetes.io/enforce": "restricted" }),
    {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name: "node-checkpoints" },
      spec: {
        capacity: { storage: "1Gi" },
        accessModes: ["ReadWriteOnce"],
        storageClassName: "",
        hostPath: { path: volumeDir, type: "Directory" },
      },
    },
    {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: "checkpoints", namespace: NS },
      spec: {
        accessModes: ["ReadWriteOnce"],
        storageClassName: "",
        volumeName: "node-checkpoints",
        resources: { requests: { storage: "1Gi" } },
      },
    },
  ]);
  await guard.install();
}, 60_000);

test("a Deployment of servers (no securityContext) in a restricted namespace: its pods are fixed and reach Running", async () => {
  const deployment = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "serve", namespace: NS },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: "serve" } },
      template: {
        metadata: { labels: { app: "serve" } },
        spec: {
          containers: [serverContainer(registry)],
        },
      },
    },
  };
  await applyObjects(cluster, [deployment]);
  const pods = await eventually(async () => {
    const list = await podsOf("app=serve");
    const ready = list.filter(p => statuses(p).length && statuses(p).every(c => c.ready));
    if (ready.length !== 2) throw new Error(`${ready.length}/2 ready`);
    return list;
  }, 90_000);
  for (const pod of pods)
    expect(pod.metadata?.annotations?.["admission-guard.dev/fixed"]).toContain("security-context/");
});

test("a training Job (no securityContext) writing its checkpoint to a PersistentVolumeClaim Succeeds as the image's own user, with fsGroup", async () => {
  await applyObjects(cluster, [
    {
      apiVersion: "batch/v1",
      kind: "Job",
      metadata: { name: "train", namespace: NS },
      spec: {
        backoffLimit: 0,
        template: {
          metadata: { labels: { app: "train" } },
          spec: {
            restartPolicy: "Never",
            containers: [
              {
                name: "train",
                image: imageOf(registry, "nonroot-numeric"),
                imagePullPolicy: "IfNotPresent",
                terminationMessagePolicy: "FallbackToLogsOnError",
                env: [{ name: "CHECKPOINT_DIR", value: CHECKPOINT_DIR }],
                volumeMounts: [{ name: "checkpoints", mountPath: CHECKPOINT_DIR }],
              },
            ],
            volumes: [{ name: "checkpoints", persistentVolumeClaim: { claimName: "checkpoints" } }],
          },
        },
      },
    },
  ]);
  const job = await eventually(async () => {
    const res = await cluster.admin.get(`/apis/batch/v1/namespaces/${NS}/jobs/train`);
    const status = res.body.status as { succeeded?: number; failed?: number };
    if (!status?.succeeded && !status?.failed) throw new Error("still running");
    return status;
  }, 90_000);
  const [pod] = await podsOf("app=train");
  expect([job, statuses(pod)[0]?.state?.terminated?.message]).toEqual([
    expect.objectContaining({ succeeded: 1 }),
    expect.stringContaining("probe ok"),
  ]);
  expect(pod.spec).toMatchObject({
    securityContext: { runAsUser: 1001, fsGroup: 1001, fsGroupChangePolicy: "OnRootMismatch" },
  });
});

test("kubectl describe pod shows the module's AdmissionGuardFixed Event next to the scheduler's and the kubelet's", async () => {
  const [pod] = await podsOf("app=serve");
  const name = pod.metadata!.name!;
  const described = await eventually(async () => {
    const out = await kubectl(cluster, ["describe", "pod", name, "-n", NS]);
    for (const reason of ["AdmissionGuardFixed", "Scheduled", "Started"])
      if (!out.stdout.includes(reason)) throw new Error(`no ${reason} event yet:\n${out.stdout}`);
    return out.stdout;
  }, 60_000);
  const events = described.slice(described.indexOf("Events:"));
  expect(events).toMatch(/AdmissionGuardFixed\s+\S+\s+admission-guard/);
  expect(events).toMatch(/Started\s+\S+\s+kubelet/);
});

// The node is shared by the files that follow.
afterAll(() => removeNamespaces(cluster, [NS]), 60_000);
