// A rolling update in a namespace whose quota is exactly full — the usual state of a GPU namespace,
// whose quota is what the team owns — on the real node: first with Kubernetes alone, then with the
// module. Kubernetes makes progress through maxUnavailable: the new ReplicaSet's pod is refused by
// the quota until an old pod goes. The module must not stall it by refusing the new ReplicaSet
// (counted whole against the full quota) that the Deployment controller creates.
import { stringify } from "yaml";
import type { KubeObject } from "../../lib/objects/pod";
import { eventually } from "../support/wait";
import { applyObjects, connect, kubectl, namespace, useModule } from "../cluster/support/cluster";
import { nodeModuleEnv, serverContainer, table, removeNamespaces } from "./support/workloads";

const cluster = connect();
const registry = cluster.node!.registry!;
const guard = useModule(cluster, { env: nodeModuleEnv(registry) });
const rows: string[][] = [];

const quota = (ns: string): KubeObject => ({
  apiVersion: "v1",
  kind: "ResourceQuota",
  metadata: { name: "team", namespace: ns },
  spec: { hard: { "requests.cpu": "500m" } },
});

const deployment = (ns: string): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "serve", namespace: ns },
  spec: {
    replicas: 2,
    strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: 1, maxUnavailable: 1 } },
    selector: { matchLabels: { app: "serve" } },
    template: {
      metadata: { labels: { app: "serve" } },
      spec: {
        terminationGracePeriodSeconds: 2,
        containers: [
          serverContainer(registry, {
            resources: { requests: { cpu: "250m" } },
            readinessProbe: { httpGet: { path: "/model.txt", port: 8080 }, periodSeconds: 1 },
          }),
        ],
      },
    },
  },
});

type Status = {
  replicas?: number;
  updatedReplicas?: number;
  readyReplicas?: number;
  observedGeneration?: number;
  conditions?: { type: string; reason?: string; message?: string }[];
};

async function statusOf(ns: string): Promise<{ generation: number; status: Status }> {
  const d = (await cluster.admin.get(`/apis/apps/v1/namespaces/${ns}/deployments/serve`)).body;
  return { generation: Number(d.metadata?.generation), status: (d.status ?? {}) as Status };
}

/** Waits until every replica runs the current template; returns how long it took, or why not. */
async function rolledOut(ns: string, timeoutMs: number): Promise<string> {
  const started = Date.now();
  try {
    await eventually(
      async () => {
        const { generation, status } = await statusOf(ns);
        const done =
          (status.observedGeneration ?? 0) >= generation &&
          status.updatedReplicas === 2 &&
          status.readyReplicas === 2 &&
          status.replicas === 2;
        if (!done) throw new Error(JSON.stringify(status));
      },
      timeoutMs,
      500,
    );
    return `rolled out in ${((Date.now() - started) / 1000).toFixed(0)} s`;
  } catch (e) {
    const { status } = await statusOf(ns);
    const stuck = (status.conditions ?? []).find(c => c.reason === "ReplicaSetCreateError");
    return `stalled: ${stuck?.message ?? (e as Error).message}`;
  }
}

async function rollOnce(ns: string): Promise<string> {
  await applyObjects(cluster, [namespace(ns), quota(ns)]);
  const applied = await kubectl(cluster, ["apply", "-f", "-"], stringify(deployment(ns)));
  expect(applied.code).toBe(0);
  expect(await rolledOut(ns, 60_000)).toMatch(/^rolled out/);
  const changed = await kubectl(cluster, ["set", "env", "deployment/serve", "-n", ns, "VERSION=2"]);
  expect(changed.code).toBe(0);
  return rolledOut(ns, 90_000);
}

afterAll(() => {
  process.stdout.write(
    `\nA rolling update under a full quota (2 × 250m, quota 500m, maxSurge 1, maxUnavailable 1):\n\n${table(
      ["", "kubectl set env deployment/serve VERSION=2"],
      rows,
    )}\n\n`,
  );
});

test("Kubernetes alone: the update rolls out through maxUnavailable", async () => {
  const outcome = await rollOnce("rollout-alone");
  rows.push(["Kubernetes alone", outcome]);
  expect(outcome).toMatch(/^rolled out/);
}, 180_000);

test("with admission-guard: the update rolls out too (the controller's ReplicaSet is not judged; its pods are)", async () => {
  await guard.install();
  const outcome = await rollOnce("rollout-guarded");
  rows.push(["with admission-guard", outcome]);
  expect(outcome).toMatch(/^rolled out/);
}, 240_000);

// The node is shared by the files that follow.
afterAll(() => removeNamespaces(cluster, ["rollout-alone", "rollout-guarded"]), 60_000);
