// Whole-gang capacity at `kubectl apply` on a real API server: 40 Node objects of 8 allocatable
// nvidia.com/gpu each (no kubelet: created, their status written through the status subresource),
// a PyTorchJob of 64 workers × 8 GPUs refused with the numbers although every quota and every
// pod's node fit pass, and the same job at 40 workers admitted. The nodes are deleted afterwards:
// the later files judge node fit against the nodes they make themselves.
import { stringify } from "yaml";
import type { KubeObject } from "../../lib/objects/pod";
import { eventually } from "../support/wait";
import { addNode, applyObjects, connect, kubectl, namespace, useModule } from "./support/cluster";
import { installCrds, ML_CRDS } from "./support/crds";

const NS = "gang-capacity";
const NODES = Array.from({ length: 40 }, (_, i) => `gang-gpu-${String(i + 1).padStart(2, "0")}`);
const cluster = connect();
const guard = useModule(cluster);

/** A PyTorchJob of workers only (its worker 0 is rank 0), 8 GPUs each. */
const workersOnly = (name: string, workers: number): KubeObject => ({
  apiVersion: "kubeflow.org/v1",
  kind: "PyTorchJob",
  metadata: { name, namespace: NS },
  spec: {
    pytorchReplicaSpecs: {
      Worker: {
        replicas: workers,
        restartPolicy: "OnFailure",
        template: {
          spec: {
            containers: [
              {
                name: "pytorch",
                image: "ghcr.io/ml-platform/train:1.0",
                resources: { limits: { "nvidia.com/gpu": "8", cpu: "16", memory: "128Gi" } },
              },
            ],
          },
        },
      },
    },
  },
});
const apply = (obj: KubeObject) => kubectl(cluster, ["apply", "-f", "-"], stringify(obj));

beforeAll(async () => {
  await installCrds(
    cluster,
    ML_CRDS.filter(k => k.kind === "PyTorchJob"),
  );
  await applyObjects(cluster, [namespace(NS)]);
  for (const name of NODES)
    await addNode(cluster, {
      metadata: { name, labels: { "kubernetes.io/hostname": name, pool: "gang-gpu" } },
      spec: {},
      status: {
        capacity: { cpu: "96", memory: "1Ti", pods: "110", "nvidia.com/gpu": "8" },
        allocatable: { cpu: "96", memory: "1Ti", pods: "110", "nvidia.com/gpu": "8" },
      },
    });
  await guard.install();
}, 300_000);

afterAll(async () => {
  for (const name of NODES) await cluster.admin.raw("DELETE", `/api/v1/nodes/${name}`);
});

test("64 workers × 8 GPUs on 40 eight-GPU nodes are refused at apply, with the numbers and the fixes", async () => {
  // Once the module's node cache holds the 40 nodes.
  const result = await eventually(async () => {
    const r = await apply(workersOnly("too-wide-a-gang", 64));
    expect(r.stderr).toContain("at most 40 fit at once");
    return r;
  }, 30_000);
  expect(result.code).not.toBe(0);
  expect(result.stderr).toContain(
    "admission-guard/resource-quota: PyTorchJob gang-capacity/too-wide-a-gang cannot be placed whole (its pods start together): it needs 64 pods asking cpu 16, memory 128Gi, nvidia.com/gpu 8 each at once",
  );
  expect(result.stderr).toContain(
    '40 nodes like node "gang-gpu-01": 1 pod each, 8 allocatable nvidia.com/gpu',
  );
  expect(result.stderr).toContain(
    "lower spec.pytorchReplicaSpecs.Worker.replicas from 64 to at most 40",
  );
  expect(result.stderr).toContain(
    'have an admin add at least 24 more nodes like node "gang-gpu-01"',
  );
  expect(
    (await cluster.admin.get(`/apis/kubeflow.org/v1/namespaces/${NS}/pytorchjobs/too-wide-a-gang`))
      .status,
  ).toBe(404);
});

test("the same gang at 40 workers is admitted", async () => {
  const result = await apply(workersOnly("fits-the-cluster", 40));
  expect({ code: result.code, stderr: result.stderr }).toMatchObject({ code: 0 });
  expect(result.stderr).not.toContain("cannot be placed whole");
  expect(
    (await cluster.admin.get(`/apis/kubeflow.org/v1/namespaces/${NS}/pytorchjobs/fits-the-cluster`))
      .status,
  ).toBe(200);
});

test("cordoning a node makes the 40-worker gang too big: an update to 40 from 39 is refused", async () => {
  await apply(workersOnly("grows", 39)).then(r => expect(r.code).toBe(0));
  const cordoned = await cluster.admin.mergePatch(`/api/v1/nodes/${NODES[0]}`, {
    spec: { unschedulable: true },
  });
  expect(cordoned.status).toBeLessThan(300);
  const result = await eventually(async () => {
    const r = await apply(workersOnly("grows", 40));
    expect(r.stderr).toContain("at most 39 fit at once");
    return r;
  }, 30_000);
  expect(result.code).not.toBe(0);
  // Other files' nodes may be excluded too (by their taints): the cordoned one is counted.
  expect(result.stderr).toMatch(/excluded: [^)]*\b1 by unschedulable/);
});
