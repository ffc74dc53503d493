// The three field reports, on a real node: what Kubernetes alone does with each seed's workload,
// what the module answers at apply time, and whether the workload runs once the printed fix is
// applied. The seeds' manifests are the ones in examples/, with two changes this node needs, said
// here: `imagePullPolicy: IfNotPresent` (their `:latest` images were loaded into the node; with
// the module they are mirrored to the tier's registry, which the kubelet pulls from), and for the
// GPT-4 canary the node carries the chart's `node-pool: inference` label. Each image is a
// root-built probe: the trainers train (write their HOME caches, /tmp, /dev/shm), the canary
// serves (reads its model, writes nothing).
import { join } from "node:path";
import type { V1Container, V1PodSpec } from "@kubernetes/client-node";
import type { KubeObject } from "../../lib/objects/pod";
import { REPO_ROOT } from "../support/controller";
import { loadManifests } from "../support/manifests";
import { eventually } from "../support/wait";
import { applyObjects, connect, kubectl, useModule } from "../cluster/support/cluster";
import {
  describeOutcome,
  nodeModuleEnv,
  runPods,
  table,
  type Outcome,
  removeNamespaces,
  seedNamespaces,
} from "./support/workloads";
import { stringify } from "yaml";

const cluster = connect();
const guard = useModule(cluster, { env: nodeModuleEnv(cluster.node!.registry!) });

const example = (file: string) =>
  loadManifests(join(REPO_ROOT, "examples", file)).map(m => m.object);
const [llamaPod] = example("llamaindex-trainer.yaml");
const [mlflowPod] = example("mlflow-train.yaml");
const [, canary] = example("gpt4-canary.yaml");

function specOf(obj: KubeObject): V1PodSpec {
  const spec = obj.spec as { template?: { spec: V1PodSpec } } & V1PodSpec;
  return spec.template?.spec ?? spec;
}

/** The seed's object as this node runs it: images loaded, not pulled; resources as given. */
function onThisNode(obj: KubeObject, resources?: V1Container["resources"]): KubeObject {
  const copy = structuredClone(obj);
  const spec = specOf(copy);
  if (!copy.spec || !("template" in (copy.spec as object))) spec.restartPolicy = "Never";
  for (const c of spec.containers) {
    c.imagePullPolicy = "IfNotPresent";
    c.terminationMessagePolicy = "FallbackToLogsOnError";
    if (resources) c.resources = resources;
  }
  return copy;
}

const SMALL = { requests: { cpu: "250m", memory: "256Mi" }, limits: { cpu: "1", memory: "1Gi" } };
type Row = { seed: string; alone: string; atApply: string; afterFix: string };
const rows = new Map<string, Row>();
const row = (seed: string) => {
  if (!rows.has(seed)) rows.set(seed, { seed, alone: "-", atApply: "-", afterFix: "-" });
  return rows.get(seed)!;
};

/** The canary Deployment, with requests this 2-CPU node can hold, as `kubectl apply` sends it. */
const applyCanary = () =>
  kubectl(cluster, ["apply", "-f", "-"], stringify(onThisNode(canary, SMALL)));

async function podsOf(ns: string, selector: string): Promise<KubeObject[]> {
  const res = await cluster.admin.get(
    `/api/v1/namespaces/${ns}/pods?labelSelector=${encodeURIComponent(selector)}`,
  );
  return (res.body.items as KubeObject[]) ?? [];
}

async function deletePod(ns: string, name: string) {
  await cluster.admin.raw("DELETE", `/api/v1/namespaces/${ns}/pods/${name}?gracePeriodSeconds=0`);
  await eventually(async () => {
    const res = await cluster.admin.get(`/api/v1/namespaces/${ns}/pods/${name}`);
    if (res.status !== 404) throw new Error(`${name} still there`);
  }, 30_000);
}

beforeAll(async () => {
  await applyObjects(cluster, [
    ...seedNamespaces(),
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "llama-index-config", namespace: "llama-index" },
      stringData: { OPENAI_API_BASE: "http://127.0.0.1:1" },
    },
    {
      apiVersion: "v1",
      kind: "ResourceQuota",
      metadata: { name: "compute-resources", namespace: "mlflow-prod" },
      spec: {
        hard: {
          "requests.cpu": "2",
          "requests.memory": "4Gi",
          "limits.cpu": "2",
          "limits.memory": "4Gi",
        },
      },
    },
  ]);
  // The chart's inference pool (examples/gpt4-canary.yaml: nodeSelector node-pool=inference).
  const labelled = await cluster.admin.mergePatch(`/api/v1/nodes/${cluster.node!.name}`, {
    metadata: { labels: { "node-pool": "inference" } },
  });
  expect(labelled.status).toBe(200);
});

afterAll(() => {
  process.stdout.write(
    `\nThe seeds on the real node:\n\n${table(
      [
        "seed",
        "Kubernetes alone",
        "with admission-guard, at apply",
        "after the printed fix, with admission-guard",
      ],
      [...rows.values()].map(r => [r.seed, r.alone, r.atApply, r.afterFix]),
    )}\n\n`,
  );
});

describe("Kubernetes alone", () => {
  test("LlamaIndex trainer (4 CPUs on a 2-CPU node): admitted, then Pending for ever", async () => {
    const outcome = (await runPods(cluster, [onThisNode(llamaPod)], "completion", 15_000)).get(
      "llamaindex-trainer",
    )!;
    row("000 LlamaIndex trainer").alone = describeOutcome(outcome);
    expect(outcome).toMatchObject({
      kind: "Pending",
      message: expect.stringContaining("Insufficient cpu"),
    });
    await deletePod("llama-index", "llamaindex-trainer");
  });

  test("MLflow job (8 CPUs against a 2-CPU quota): refused by the ResourceQuota admission", async () => {
    const outcome = (await runPods(cluster, [onThisNode(mlflowPod)])).get("mlflow-train")!;
    row("001 MLflow training job").alone = describeOutcome(outcome);
    expect(outcome).toMatchObject({
      kind: "Denied",
      message: expect.stringContaining("exceeded quota: compute-resources"),
    });
  });

  test("GPT-4 canary Deployment: stored, and its ReplicaSet makes no pod (Pod Security)", async () => {
    expect((await applyCanary()).code).toBe(0);
    const failure = await eventually(async () => {
      const list = await cluster.admin.get("/apis/apps/v1/namespaces/gpt4-canary/replicasets");
      const rs = (list.body.items as KubeObject[])[0];
      const cond = (
        (rs?.status as { conditions?: { type: string; message: string }[] })?.conditions ?? []
      ).find(c => c.type === "ReplicaFailure");
      if (!cond) throw new Error("no ReplicaFailure yet");
      return cond.message;
    }, 30_000);
    row("002 GPT-4 canary (2 replicas)").alone = `0/2 pods: ${failure.slice(0, 110)}...`;
    expect(failure).toContain('violates PodSecurity "restricted:latest"');
    expect(await podsOf("gpt4-canary", "app=gpt4")).toEqual([]);
    expect(
      (
        await kubectl(cluster, [
          "delete",
          "deployment",
          "gpt4-canary",
          "-n",
          "gpt4-canary",
          "--wait=true",
        ])
      ).code,
    ).toBe(0);
  });
});

describe("with admission-guard", () => {
  beforeAll(async () => {
    await guard.install();
  }, 60_000);

  test("LlamaIndex trainer: denied at apply, naming the node and the field to change", async () => {
    const outcome = await eventually(async () => {
      const o = (await runPods(cluster, [onThisNode(llamaPod)])).get("llamaindex-trainer")!;
      if (o.kind !== "Denied") {
        await deletePod("llama-index", "llamaindex-trainer");
        throw new Error(`not denied yet (the module's node cache): ${describeOutcome(o)}`);
      }
      return o;
    }, 30_000);
    row("000 LlamaIndex trainer").atApply = describeOutcome(outcome);
    expect(outcome).toMatchObject({ kind: "Denied" });
    const message = (outcome as { message: string }).message;
    expect(message).toContain("admission-guard/resource-quota");
    expect(message).toContain(cluster.node!.name);
    expect(message).toContain("Fix:");
  });

  test("MLflow job: denied at apply with the quota's numbers and both fixes", async () => {
    const outcome = (await runPods(cluster, [onThisNode(mlflowPod)])).get("mlflow-train")!;
    row("001 MLflow training job").atApply = describeOutcome(outcome);
    const message = (outcome as { message: string }).message;
    expect(message).toContain("admission-guard/resource-quota");
    expect(message).toContain("kubectl patch resourcequota compute-resources -n mlflow-prod");
  });

  test("GPT-4 canary Deployment, fixed by the module: 2/2 Running", async () => {
    expect((await applyCanary()).code).toBe(0);
    const running = await eventually(async () => {
      const pods = await podsOf("gpt4-canary", "app=gpt4");
      const ready = pods.filter(p =>
        ((p.status as { containerStatuses?: { ready: boolean }[] })?.containerStatuses ?? []).every(
          c => c.ready,
        ),
      );
      if (pods.length !== 2 || ready.length !== 2)
        throw new Error(`${ready.length}/${pods.length} ready`);
      return pods;
    }, 60_000);
    row("002 GPT-4 canary (2 replicas)").atApply = "admitted, pods fixed";
    row("002 GPT-4 canary (2 replicas)").afterFix = "2/2 Running";
    for (const pod of running)
      expect(pod.metadata?.labels?.["app.kubernetes.io/component"]).toBe("gpt4");
  });

  // The trainers after the printed fix: requests within what the node and the quota have.
  const fixedRuns = new Map<string, Outcome>();
  const runFixed = async () => {
    if (fixedRuns.size) return fixedRuns;
    const results = await runPods(cluster, [
      onThisNode(llamaPod, SMALL),
      onThisNode(mlflowPod, {
        requests: { cpu: "1", memory: "1Gi" },
        limits: { cpu: "1", memory: "1Gi" },
      }),
    ]);
    for (const [name, o] of results) fixedRuns.set(name, o);
    row("000 LlamaIndex trainer").afterFix = describeOutcome(fixedRuns.get("llamaindex-trainer")!);
    row("001 MLflow training job").afterFix = describeOutcome(fixedRuns.get("mlflow-train")!);
    return fixedRuns;
  };

  test("the trainers, fixed as the denials say, are admitted", async () => {
    const runs = await runFixed();
    for (const name of ["llamaindex-trainer", "mlflow-train"])
      expect([name, runs.get(name)!.kind]).not.toEqual([name, "Denied"]);
  });

  test("LlamaIndex trainer, root-built, Succeeds once fixed: UID 1000 with a HOME of its own", async () => {
    expect((await runFixed()).get("llamaindex-trainer")).toEqual({ kind: "Succeeded" });
  });

  test("MLflow job, root-built, Succeeds once fixed: UID 1000 with a HOME of its own", async () => {
    expect((await runFixed()).get("mlflow-train")).toEqual({ kind: "Succeeded" });
  });
});

// The node is shared by the files that follow.
afterAll(() => removeNamespaces(cluster, ["llama-index", "mlflow-prod", "gpt4-canary"]), 60_000);
