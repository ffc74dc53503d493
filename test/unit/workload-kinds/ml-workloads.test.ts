// The ML kinds through the engine, as `check` and the webhook judge them: every area's checks on
// each role's template with the fixes simulated, the gang's quota at once, node fit per role,
// Kueue, updates, and the platform's own kinds.
import { policies } from "../../../capabilities";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { answer, mutate, review } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import { defaultSettings, parseSettings, type Settings } from "../../../lib/settings";
import { TRAINING_RUN_KIND } from "../../fixtures/ml/training-run-kind";

const NS = "ml";
const gpuTemplate = (gpus: number) => ({
  metadata: { labels: { app: "llama" } },
  spec: {
    containers: [
      {
        name: "pytorch",
        image: "ghcr.io/org/train:1",
        resources: { limits: { "nvidia.com/gpu": String(gpus), cpu: "4", memory: "16Gi" } },
      },
    ],
  },
});
const pytorchJob = (workers: number, gpus = 8, extra: Partial<KubeObject> = {}): KubeObject => ({
  apiVersion: "kubeflow.org/v1",
  kind: "PyTorchJob",
  metadata: { name: "llama", namespace: NS },
  spec: {
    pytorchReplicaSpecs: {
      Master: { replicas: 1, template: gpuTemplate(gpus) },
      Worker: { replicas: workers, template: gpuTemplate(gpus) },
    },
  },
  ...extra,
});
const quota = (hard: number, used = 0): KubeObject => ({
  apiVersion: "v1",
  kind: "ResourceQuota",
  metadata: { name: "gpus", namespace: NS },
  spec: { hard: { "requests.nvidia.com/gpu": String(hard) } },
  status: {
    hard: { "requests.nvidia.com/gpu": String(hard) },
    used: { "requests.nvidia.com/gpu": String(used) },
  },
});
const node = (name: string, gpus: number): KubeObject => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: { name, labels: { "kubernetes.io/hostname": name } },
  status: {
    allocatable: { cpu: "64", memory: "512Gi", pods: "110", "nvidia.com/gpu": String(gpus) },
  },
});
const cluster = (...objects: KubeObject[]) =>
  new SnapshotCluster([
    { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
    // Eight 8-GPU nodes: room for the gangs of up to 8 pods these tests admit (whole-gang capacity).
    ...["a", "b", "c", "d", "e", "f", "g", "h"].map(x => node(`gpu-${x}`, 8)),
    ...objects,
  ]);

/** A RayCluster in the namespace: a head without GPUs and these worker groups. */
const rayCluster = (workerGroupSpecs: object[]): KubeObject => ({
  apiVersion: "ray.io/v1",
  kind: "RayCluster",
  metadata: { name: "rc", namespace: NS },
  spec: { headGroupSpec: { template: gpuTemplate(0) }, workerGroupSpecs },
});

const judge = (
  obj: KubeObject,
  c = cluster(quota(48)),
  settings: Settings = defaultSettings(),
  more = {},
) => review(policies, obj, { settings, cluster: c, ...more });

describe("a PyTorchJob judged whole at apply", () => {
  it("1 master + 7 workers × 8 GPUs under a 48-GPU quota: denied with the per-role totals and both fixes", async () => {
    const r = await judge(pytorchJob(7));
    expect(r.allowed).toBe(false);
    const denial = r.denials.find(d => d.includes("resource-quota"))!;
    expect(denial).toContain("PyTorchJob ml/llama exceeds the namespace quota as a whole");
    expect(denial).toContain("its pods ask 64 at once (Master: 1 × 8, Worker: 7 × 8)");
    expect(denial).toContain("quota gpus has 48 of 48 left");
    expect(denial).toContain("lower spec.pytorchReplicaSpecs.Worker.replicas from 7 to at most 5");
    expect(denial).toContain(
      `kubectl patch resourcequota gpus -n ml --type merge -p '{"spec":{"hard":{"requests.nvidia.com/gpu":"64"}}}'`,
    );
    expect(r.violations.map(v => `${v.capability}/${v.rule}`)).toEqual([
      "resource-quota/quota-exceeded",
    ]);
  });

  it("with 5 workers (48 GPUs) it is admitted, and says what its pods will get (roles alike said once)", async () => {
    const r = await judge(pytorchJob(5));
    expect(r.allowed).toBe(true);
    expect(r.handled).toBe(true);
    const pending = r.warnings.find(w =>
      w.startsWith("admission-guard/security-context: its pods will get"),
    )!;
    // Master and Worker have the same template: fixed once, each change said once for both.
    expect(pending).toContain(
      "spec.pytorchReplicaSpecs.Master.template.spec.securityContext.runAsNonRoot=true (the same in role Worker)",
    );
    expect(pending).toContain("(when PyTorchJob creates them)");
    // The object shown is the prediction: both templates fixed.
    const specs = (
      r.object.spec as {
        pytorchReplicaSpecs: Record<string, { template: { spec: { securityContext?: object } } }>;
      }
    ).pytorchReplicaSpecs;
    expect(specs.Master.template.spec.securityContext).toMatchObject({ runAsNonRoot: true });
    expect(specs.Worker.template.spec.securityContext).toMatchObject({ runAsNonRoot: true });
  });

  it("a job Kueue queues (label, or suspended) is admitted with the quota as a warning: Kueue starts it when there is room", async () => {
    const labelled = pytorchJob(7);
    labelled.metadata!.labels = { "kueue.x-k8s.io/queue-name": "team-a" };
    const suspended = pytorchJob(7);
    (suspended.spec as Record<string, unknown>).runPolicy = { suspend: true };
    for (const [job, why] of [
      [labelled, "queued by Kueue (kueue.x-k8s.io/queue-name=team-a)"],
      [suspended, "suspended (spec.runPolicy.suspend: true)"],
    ] as const) {
      const r = await judge(job);
      expect(r.allowed).toBe(true);
      const w = r.warnings.find(x => x.includes("exceeds the namespace quota"))!;
      expect(w).toContain(why);
      expect(w).toContain("Kueue starts it when its ClusterQueue has room");
    }
  });

  it("a role whose one pod fits no node (16 GPUs on 8-GPU nodes) is denied, the role and the largest node named", async () => {
    const r = await judge(pytorchJob(1, 16), cluster(quota(1000)));
    expect(r.allowed).toBe(false);
    const fit = r.violations.filter(v => v.rule === "node-fit");
    // Master and Worker have the same template: one finding, for both.
    expect(fit).toHaveLength(1);
    expect(fit[0].message).toMatch(/^PyTorchJob ml\/llama \(role Master\) fits no node/);
    expect(fit[0].message).toMatch(/\(the same in role Worker\)$/);
    expect(r.denials.join("\n")).toMatch(/node "gpu-a"/);
  });

  it("an UPDATE is judged on what it adds: more workers over quota denied, a scale-down or a relabel never", async () => {
    const c = cluster(quota(48, 48)); // the stored 5-worker job uses the whole quota
    const stored = pytorchJob(5);
    const up = await judge(pytorchJob(7), c, defaultSettings(), {
      operation: "UPDATE",
      oldObject: stored,
    });
    expect(up.allowed).toBe(false);
    expect(up.denials.join()).toContain("the update adds 16");
    const down = await judge(pytorchJob(3), c, defaultSettings(), {
      operation: "UPDATE",
      oldObject: stored,
    });
    expect(down.allowed).toBe(true);
    const relabelled = pytorchJob(5);
    relabelled.metadata!.labels = { team: "a" };
    const relabel = await judge(relabelled, c, defaultSettings(), {
      operation: "UPDATE",
      oldObject: stored,
    });
    expect(relabel.allowed).toBe(true);
    expect(relabel.violations).toEqual([]);
  });

  it("a RayCluster that a RayJob made (its controller) is the RayJob's, not judged again", async () => {
    const made: KubeObject = {
      apiVersion: "ray.io/v1",
      kind: "RayCluster",
      metadata: {
        name: "rc",
        namespace: NS,
        ownerReferences: [
          { apiVersion: "ray.io/v1", kind: "RayJob", name: "j", uid: "u", controller: true },
        ],
      },
      spec: { headGroupSpec: { template: gpuTemplate(64) } },
    };
    const r = await judge(made);
    expect(r.allowed).toBe(true);
    expect(r.violations).toEqual([]);
  });

  it("an autoscaled Ray worker group that can outgrow the quota at maxReplicas is a warning", async () => {
    const rc = rayCluster([
      {
        groupName: "gpu",
        replicas: 2,
        minReplicas: 1,
        maxReplicas: 10,
        template: gpuTemplate(8),
      },
    ]);
    const r = await judge(rc);
    expect(r.allowed).toBe(true);
    expect(r.warnings.join("\n")).toMatch(
      /RayCluster ml\/rc can outgrow quota gpus when it scales: requests.nvidia.com\/gpu up to 80 at maxReplicas, 48 left/,
    );
  });

  it("every area judges each role: a forbidden registry in one role is denied with that role's path", async () => {
    const job = pytorchJob(1);
    const spec = job.spec as {
      pytorchReplicaSpecs: { Worker: { template: { spec: { containers: { image: string }[] } } } };
    };
    spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].image = "evil.example.com/x:1";
    const settings = parseSettings({ registries: { allowed: ["ghcr.io"] } });
    const r = await judge(job, cluster(quota(48)), settings);
    expect(r.allowed).toBe(false);
    expect(r.denials.join()).toContain(
      "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].image",
    );
    expect(r.denials.join()).not.toContain(
      "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].image",
    );
  });

  it("worker groups with the same template are fixed and judged once: one finding naming the others, every template fixed", async () => {
    const privileged = gpuTemplate(1);
    (privileged.spec.containers[0] as Record<string, unknown>).securityContext = {
      privileged: true,
    };
    const rc = rayCluster(
      ["a", "b", "c", "d", "e"].map(g => ({
        groupName: g,
        replicas: 1,
        template: structuredClone(privileged),
      })),
    );
    const r = await judge(rc, cluster(quota(1000)));
    const found = r.violations.filter(v => v.rule === "privileged");
    expect(found).toHaveLength(1);
    expect(found[0].message).toMatch(/\(roles a, b, c and 2 more\)$/);
    // The prediction: every group's template fixed, each its own copy.
    const groups = (
      r.object.spec as { workerGroupSpecs: { template: { spec: { securityContext?: object } } }[] }
    ).workerGroupSpecs;
    for (const g of groups)
      expect(g.template.spec.securityContext).toMatchObject({ runAsNonRoot: true });
    expect(groups[1].template.spec).not.toBe(groups[2].template.spec);
    // A group that differs (another image) is judged on its own.
    const differs = structuredClone(rc);
    (
      differs.spec as {
        workerGroupSpecs: { template: { spec: { containers: { image: string }[] } } }[];
      }
    ).workerGroupSpecs[4].template.spec.containers[0].image = "ghcr.io/org/other:2";
    const r2 = await judge(differs, cluster(quota(1000)));
    expect(
      r2.violations.filter(v => v.rule === "privileged").map(v => v.message.replace(/^.*\(/, "(")),
    ).toEqual(["(roles a, b, c, d)", "(role e)"]);
  });

  it("an oversize gang is measured once, as a whole, naming its biggest role templates; each role's own counts stay per role", async () => {
    // Three groups, each its own image (judged one by one), the last with a big env.
    const groups = ["a", "b", "c"].map((g, i) => {
      const t = gpuTemplate(1);
      t.spec.containers[0].image = `ghcr.io/org/train:${i}`;
      if (g === "c")
        (t.spec.containers[0] as Record<string, unknown>).env = Array.from(
          { length: 80 },
          (_, k) => ({ name: `V${k}`, value: "x".repeat(40) }),
        );
      return { groupName: g, replicas: 1, template: t };
    });
    const settings = parseSettings({ payload: { maxObjectBytes: 4000, maxEnvPerContainer: 64 } });
    const r = await judge(rayCluster(groups), cluster(quota(1000)), settings);
    const tooLarge = r.violations.filter(v => v.rule === "object-too-large");
    expect(tooLarge).toHaveLength(1);
    expect(tooLarge[0].message).toMatch(
      /^RayCluster ml\/rc is [\d.]+ KiB .* over the limit of 3.9 KiB/,
    );
    expect(tooLarge[0].message).toContain(
      "biggest parts: role c (spec.workerGroupSpecs[2].template)",
    );
    expect(tooLarge[0].message).not.toMatch(/\(roles? [abc]/);
    // The env count is role c's own: said once, naming the role.
    const env = r.violations.filter(v => v.rule === "too-many-env");
    expect(env).toHaveLength(1);
    expect(env[0].message).toMatch(/^container "pytorch" has 80 env entries .*\(role c\)$/);
  });

  it("scanning a stored gang (the reports) skips the quota rules, its pods are counted already, and says so", async () => {
    const deps = { settings: defaultSettings(), cluster: cluster(quota(48, 48)), policies };
    const request = {
      object: pytorchJob(7),
      operation: "CREATE" as const,
      dryRun: true,
      scan: true,
    };
    const found = await answer(request, deps, policies);
    expect(found.violations.filter(v => v.rule === "quota-exceeded")).toEqual([]);
    expect(found.skipped).toContainEqual(
      expect.objectContaining({ capability: "resource-quota", rule: "quota-exceeded" }),
    );
  });
});

describe("kinds in force", () => {
  it("builtInKinds without PyTorchJob: the kind is not handled (the webhook does not receive it either)", async () => {
    const settings = parseSettings({ workloads: { builtInKinds: ["RayCluster.ray.io"] } });
    const r = await judge(pytorchJob(7), cluster(quota(48)), settings);
    expect(r.handled).toBe(false);
    expect(r.allowed).toBe(true);
  });

  it("a platform's own kind from the setting is judged like the built-in ones, gang quota included", async () => {
    const settings = parseSettings({
      workloads: {
        kinds: [TRAINING_RUN_KIND],
      },
    });
    const run: KubeObject = {
      apiVersion: "training.example.com/v1",
      kind: "TrainingRun",
      metadata: { name: "run", namespace: NS },
      spec: { roles: [{ name: "trainer", count: 7, podTemplate: gpuTemplate(8) }] },
    };
    const r = await judge(run, cluster(quota(48)), settings);
    expect(r.allowed).toBe(false);
    expect(r.denials.join()).toContain("(trainer: 7 × 8)");
    expect(r.denials.join()).toContain("lower spec.roles[0].count from 7 to at most 6");
  });

  it("with workloads.mutate every role's template is fixed in place, each with its trace, and twice equals once", async () => {
    const settings = parseSettings({ workloads: { mutate: true } });
    const job = pytorchJob(1);
    const deps = { settings, cluster: cluster(), policies };
    const first = await mutate({ object: job, operation: "CREATE", dryRun: false }, deps, policies);
    expect(first.changes.length).toBeGreaterThan(0);
    const specs = job.spec as {
      pytorchReplicaSpecs: Record<
        string,
        { template: { metadata: { annotations?: Record<string, string> } } }
      >;
    };
    for (const role of ["Master", "Worker"])
      expect(
        specs.pytorchReplicaSpecs[role].template.metadata.annotations?.[
          "admission-guard.dev/fixed"
        ],
      ).toContain("security-context/");
    const once = structuredClone(job);
    const second = await mutate(
      { object: job, operation: "CREATE", dryRun: false },
      deps,
      policies,
    );
    expect(second.changes).toEqual([]);
    expect(job).toEqual(once);
  });
});
