// The path language of workload kinds, and each built-in ML kind's templates and pod counts, from
// fixtures written from the projects' published API references.
import { findAll, findAt, parsePath, pathWith } from "../../../lib/workload-kinds/paths";
import { isSuspended, podRolesOf, workloadKindOf } from "../../../lib/workload-kinds/roles";
import { BUILT_IN_KINDS, BUILT_IN_KIND_NAMES } from "../../../lib/workload-kinds/table";
import { kindsInForce } from "../../../lib/workload-kinds/in-force";
import type { KubeObject } from "../../../lib/objects/pod";
import { isWorkload, podTemplateOf } from "../../../lib/workload-kinds/built-in";
import { defaultSettings, parseSettings, SettingsError } from "../../../lib/settings";

const segments = (p: string) => {
  const parsed = parsePath(p);
  if (!parsed.ok) throw new Error(parsed.reason);
  return parsed.segments;
};

describe("path language", () => {
  it("parses steps and *; refuses empty steps and odd characters with the reason", () => {
    expect(parsePath("spec.tasks.*.template")).toEqual({
      ok: true,
      segments: ["spec", "tasks", "*", "template"],
    });
    expect(parsePath("")).toMatchObject({ ok: false, reason: expect.stringContaining("empty") });
    expect(parsePath("spec..template")).toMatchObject({
      ok: false,
      reason: expect.stringContaining("empty step"),
    });
    expect(parsePath("spec.template.")).toMatchObject({ ok: false });
    expect(parsePath("spec[0].template")).toMatchObject({
      ok: false,
      reason: expect.stringContaining('"spec[0]"'),
    });
  });

  it("* expands lists (with indexes) and maps (with keys), in document order", () => {
    const obj = {
      spec: { list: [{ a: 1 }, { a: 2 }], map: { Master: { a: 3 }, "odd key": { a: 4 } } },
    };
    expect(findAll(obj, segments("spec.list.*.a"))).toEqual([
      { value: 1, where: "spec.list[0].a", keys: [0] },
      { value: 2, where: "spec.list[1].a", keys: [1] },
    ]);
    expect(findAll(obj, segments("spec.map.*.a")).map(m => m.where)).toEqual([
      "spec.map.Master.a",
      'spec.map["odd key"].a',
    ]);
  });

  it("missing fields, nulls and wrong types are no match, never a throw", () => {
    const odd: unknown[] = [
      null,
      7,
      "x",
      [],
      { spec: null },
      { spec: { list: "nope" } },
      { spec: { list: [null, 3] } },
    ];
    for (const obj of odd) {
      expect(findAll(obj, segments("spec.list.*.a"))).toEqual([]);
      expect(findAt(obj, segments("spec.list.*.a"), [0])).toBeUndefined();
    }
    // A map is not walked by a list index, nor a list by a key.
    expect(findAt({ m: { a: 1 } }, segments("m.*"), [0])).toBeUndefined();
    expect(findAt({ l: [1] }, segments("l.*"), ["0"])).toBeUndefined();
  });

  it("findAt binds the *s in order; a * beyond the keys given is no match", () => {
    const obj = { spec: { groups: [{ n: 1 }, { n: 5 }] } };
    expect(findAt(obj, segments("spec.groups.*.n"), [1])).toEqual({
      value: 5,
      where: "spec.groups[1].n",
      keys: [1],
    });
    expect(findAt(obj, segments("spec.groups.*.n"), [])).toBeUndefined();
    expect(pathWith(segments("spec.groups.*.n"), [3])).toBe("spec.groups[3].n");
  });
});

const template = (image: string, extra: Record<string, unknown> = {}) => ({
  metadata: { labels: { app: "t" } },
  spec: { containers: [{ name: "c", image, ...extra }] },
});
const kindOf = (obj: KubeObject) => workloadKindOf(obj, kindsInForce(defaultSettings().workloads));
const roles = (obj: KubeObject) =>
  podRolesOf(obj, kindOf(obj)!).map(r => ({
    name: r.name,
    pods: r.pods,
    path: r.template.path,
    field: r.field,
    atMost: r.atMost,
  }));

describe("built-in kinds", () => {
  it("PyTorchJob: one role per replica spec; replicas default 1", () => {
    const job = {
      apiVersion: "kubeflow.org/v1",
      kind: "PyTorchJob",
      metadata: { name: "j" },
      spec: {
        pytorchReplicaSpecs: {
          Master: { template: template("a") },
          Worker: { replicas: 7, template: template("a") },
        },
      },
    };
    expect(roles(job)).toEqual([
      {
        name: "Master",
        pods: 1,
        path: "spec.pytorchReplicaSpecs.Master.template",
        field: "spec.pytorchReplicaSpecs.Master.replicas",
        atMost: undefined,
      },
      {
        name: "Worker",
        pods: 7,
        path: "spec.pytorchReplicaSpecs.Worker.template",
        field: "spec.pytorchReplicaSpecs.Worker.replicas",
        atMost: undefined,
      },
    ]);
    expect(isSuspended(job, kindOf(job)!)).toBe(false);
    expect(
      isSuspended({ ...job, spec: { ...job.spec, runPolicy: { suspend: true } } }, kindOf(job)!),
    ).toBe(true);
  });

  it("RayCluster: the head, and each worker group's replicas within [min, max] × numOfHosts; maxReplicas as atMost", () => {
    const cluster = {
      apiVersion: "ray.io/v1",
      kind: "RayCluster",
      spec: {
        headGroupSpec: { template: template("ray") },
        workerGroupSpecs: [
          {
            groupName: "gpu",
            replicas: 2,
            minReplicas: 1,
            maxReplicas: 10,
            template: template("ray"),
          },
          { groupName: "tpu", minReplicas: 2, numOfHosts: 4, template: template("ray") },
          { groupName: "capped", replicas: 9, maxReplicas: 3, template: template("ray") },
        ],
      },
    };
    expect(roles(cluster)).toEqual([
      { name: "head", pods: 1, path: "spec.headGroupSpec.template", field: "", atMost: undefined },
      {
        name: "gpu",
        pods: 2,
        path: "spec.workerGroupSpecs[0].template",
        field: "spec.workerGroupSpecs[0].replicas × spec.workerGroupSpecs[0].numOfHosts",
        atMost: 10,
      },
      {
        name: "tpu",
        pods: 8,
        path: "spec.workerGroupSpecs[1].template",
        field: "spec.workerGroupSpecs[1].replicas × spec.workerGroupSpecs[1].numOfHosts",
        atMost: undefined,
      },
      {
        name: "capped",
        pods: 3,
        path: "spec.workerGroupSpecs[2].template",
        field: "spec.workerGroupSpecs[2].replicas × spec.workerGroupSpecs[2].numOfHosts",
        atMost: undefined,
      },
    ]);
  });

  it("RayJob: the cluster spec's groups and the submitter template", () => {
    const job = {
      apiVersion: "ray.io/v1",
      kind: "RayJob",
      spec: {
        rayClusterSpec: {
          headGroupSpec: { template: template("ray") },
          workerGroupSpecs: [{ replicas: 1, template: template("ray") }],
        },
        submitterPodTemplate: template("submit"),
      },
    };
    expect(roles(job).map(r => [r.name, r.pods, r.path])).toEqual([
      ["head", 1, "spec.rayClusterSpec.headGroupSpec.template"],
      ["#0", 1, "spec.rayClusterSpec.workerGroupSpecs[0].template"],
      ["submitter", 1, "spec.submitterPodTemplate"],
    ]);
  });

  it("JobSet: each replicated Job's pod template × replicas × parallelism", () => {
    const set = {
      apiVersion: "jobset.x-k8s.io/v1alpha2",
      kind: "JobSet",
      spec: {
        replicatedJobs: [
          { name: "driver", template: { spec: { template: template("d") } } },
          {
            name: "workers",
            replicas: 4,
            template: { spec: { parallelism: 2, template: template("w") } },
          },
        ],
      },
    };
    expect(roles(set).map(r => [r.name, r.pods, r.path])).toEqual([
      ["driver", 1, "spec.replicatedJobs[0].template.spec.template"],
      ["workers", 8, "spec.replicatedJobs[1].template.spec.template"],
    ]);
  });

  it("LeaderWorkerSet: leader and size-1 workers per group; without a leaderTemplate every pod is a worker's", () => {
    const withLeader = {
      apiVersion: "leaderworkerset.x-k8s.io/v1",
      kind: "LeaderWorkerSet",
      spec: {
        replicas: 3,
        leaderWorkerTemplate: {
          size: 4,
          leaderTemplate: template("l"),
          workerTemplate: template("w"),
        },
      },
    };
    expect(roles(withLeader).map(r => [r.name, r.pods])).toEqual([
      ["leader", 3],
      ["worker", 9],
    ]);
    const workersOnly = {
      ...withLeader,
      spec: { leaderWorkerTemplate: { size: 4, workerTemplate: template("w") } },
    };
    expect(roles(workersOnly).map(r => [r.name, r.pods])).toEqual([["leader and worker", 4]]);
  });

  it("a Volcano Job is its own kind, not a batch Job; a batch Job is not a Volcano one", () => {
    const volcano = {
      apiVersion: "batch.volcano.sh/v1alpha1",
      kind: "Job",
      spec: { tasks: [{ name: "ps", replicas: 2, template: template("v") }] },
    };
    expect(roles(volcano).map(r => [r.name, r.pods])).toEqual([["ps", 2]]);
    expect(podTemplateOf(volcano)).toBeUndefined();
    const batch = { apiVersion: "batch/v1", kind: "Job", spec: { template: template("b") } };
    expect(kindOf(batch)).toBeUndefined();
    expect(podTemplateOf(batch)?.path).toBe("spec.template");
  });

  it("malformed objects yield fewer roles, never a throw; metadata is created on a template without", () => {
    const kind = BUILT_IN_KINDS.find(k => k.kind === "PyTorchJob")!;
    for (const spec of [
      undefined,
      null,
      3,
      [],
      { pytorchReplicaSpecs: [] },
      { pytorchReplicaSpecs: { W: null, X: { template: "t" }, Y: { template: { spec: 1 } } } },
    ])
      expect(
        podRolesOf({ apiVersion: "kubeflow.org/v1", kind: "PyTorchJob", spec } as KubeObject, kind),
      ).toEqual([]);
    const bare = {
      apiVersion: "kubeflow.org/v1",
      kind: "PyTorchJob",
      spec: {
        pytorchReplicaSpecs: { W: { replicas: -2, template: { spec: { containers: [] } } } },
      },
    };
    const [role] = podRolesOf(bare, kind);
    expect(role.pods).toBe(0); // a count that is not a whole non-negative number counts as none
    expect(bare.spec.pytorchReplicaSpecs.W.template).toHaveProperty("metadata", {});
  });

  it("every kind of the table is found by its group and kind in any version, and is a workload", () => {
    for (const k of BUILT_IN_KINDS) {
      const obj = { apiVersion: `${k.apiVersion.split("/")[0]}/v9`, kind: k.kind };
      expect(kindOf(obj)).toBe(k);
      expect(isWorkload(obj, kindsInForce(defaultSettings().workloads))).toBe(true);
    }
    expect(BUILT_IN_KIND_NAMES).toContain("PyTorchJob.kubeflow.org");
    expect(kindOf({ apiVersion: "example.com/v1", kind: "PyTorchJob" })).toBeUndefined();
  });
});

describe("the settings workloads.kinds and workloads.builtInKinds", () => {
  const kind = {
    apiVersion: "example.com/v1",
    kind: "TrainingRun",
    templates: [
      {
        template: "spec.roles.*.podTemplate",
        name: "spec.roles.*.name",
        replicas: ["spec.roles.*.count"],
      },
    ],
  };

  it("a platform kind is judged; it replaces a built-in of the same group and kind", () => {
    const settings = parseSettings({
      workloads: { kinds: [kind, { ...kind, apiVersion: "kubeflow.org/v1", kind: "PyTorchJob" }] },
    });
    const inForce = kindsInForce(settings.workloads);
    const run = {
      apiVersion: "example.com/v1",
      kind: "TrainingRun",
      spec: { roles: [{ name: "w", count: 3, podTemplate: template("x") }] },
    };
    const found = workloadKindOf(run, inForce)!;
    expect(podRolesOf(run, found).map(r => [r.name, r.pods, r.field])).toEqual([
      ["w", 3, "spec.roles[0].count"],
    ]);
    expect(inForce.filter(k => k.kind === "PyTorchJob")).toHaveLength(1);
    expect(inForce.find(k => k.kind === "PyTorchJob")!.templates[0].template).toBe(
      "spec.roles.*.podTemplate",
    );
  });

  it("builtInKinds keeps only the kinds named; none keeps none", () => {
    const only = parseSettings({ workloads: { builtInKinds: ["RayCluster.ray.io"] } });
    expect(kindsInForce(only.workloads).map(k => k.kind)).toEqual(["RayCluster"]);
    expect(kindsInForce(parseSettings({ workloads: { builtInKinds: [] } }).workloads)).toEqual([]);
  });

  it("bad entries are named errors", () => {
    const problems = (raw: unknown) => {
      try {
        parseSettings({ workloads: raw });
        return [];
      } catch (e) {
        expect(e).toBeInstanceOf(SettingsError);
        return (e as SettingsError).problems;
      }
    };
    expect(problems({ kinds: [{ ...kind, templates: [{ template: "spec..x" }] }] }).join()).toMatch(
      /workloads\.kinds\[0\]\.templates\[0\]\.template: "spec\.\.x" has an empty step/,
    );
    expect(problems({ kinds: [{ ...kind, apiVersion: "v1" }] }).join()).toMatch(
      /apiVersion: must be group\/version/,
    );
    expect(problems({ kinds: [{ ...kind, templates: [] }] }).join()).toMatch(
      /at least one template/,
    );
    expect(problems({ kinds: [kind, kind] }).join()).toMatch(
      /TrainingRun of example\.com is listed twice/,
    );
    expect(problems({ kinds: [{ ...kind, extra: 1 }] }).join()).toMatch(/unknown setting/);
    expect(problems({ builtInKinds: ["PyTorchJob"] }).join()).toMatch(/builtInKinds\[0\]/);
  });
});

describe("edges the mutation run found untested", () => {
  it("a step must be a whole field name; a path must be a string", () => {
    expect(parsePath("spec.$x")).toMatchObject({ ok: false });
    expect(parsePath("spec.x$")).toMatchObject({ ok: false });
    expect(parsePath(undefined as unknown as string)).toMatchObject({ ok: false });
  });

  it("null is no value, for findAll and findAt", () => {
    expect(findAll({ a: null }, segments("a"))).toEqual([]);
    expect(findAll({ a: [null, 1] }, segments("a.*")).map(m => m.value)).toEqual([1]);
    expect(findAt({ a: null }, segments("a"), [])).toBeUndefined();
    expect(findAt({ a: [null] }, segments("a.*"), [0])).toBeUndefined();
  });

  it("a count that is not a whole non-negative number counts 0; a name that is not a string falls back to the key", () => {
    const kind = {
      apiVersion: "example.com/v1",
      kind: "Run",
      templates: [{ template: "spec.r.*.t", name: "spec.r.*.n", replicas: ["spec.r.*.c"] }],
    };
    const run = (c: unknown, n: unknown) => ({
      apiVersion: "example.com/v1",
      kind: "Run",
      spec: { r: { main: { c, n, t: template("x") } } },
    });
    for (const bad of ["3", 2.5, -1, true]) expect(podRolesOf(run(bad, "x"), kind)[0].pods).toBe(0);
    expect(podRolesOf(run(3, 7), kind)[0].name).toBe("main");
    expect(podRolesOf(run(3, ""), kind)[0].name).toBe("main");
    expect(podRolesOf(run(3, "lead"), kind)[0].name).toBe("lead");
  });

  it("atMost is said only when more than the pods it makes now", () => {
    const rc = (replicas: number, maxReplicas: number) => ({
      apiVersion: "ray.io/v1",
      kind: "RayCluster",
      spec: {
        workerGroupSpecs: [{ groupName: "g", replicas, maxReplicas, template: template("r") }],
      },
    });
    expect(roles(rc(3, 3))[0].atMost).toBeUndefined();
    expect(roles(rc(3, 4))[0].atMost).toBe(4);
  });

  it("an object without a kind, an apiVersion or a group is not one of the kinds; no kinds in force, none is", () => {
    const inForce = kindsInForce(defaultSettings().workloads);
    expect(workloadKindOf({ kind: "PyTorchJob" }, inForce)).toBeUndefined();
    expect(workloadKindOf({ apiVersion: "kubeflow.org/v1" }, inForce)).toBeUndefined();
    expect(workloadKindOf({ apiVersion: "v1", kind: "PyTorchJob" }, inForce)).toBeUndefined();
    expect(
      workloadKindOf({ apiVersion: "kubeflow.org/v1", kind: "PyTorchJob" }, []),
    ).toBeUndefined();
    expect(workloadKindOf(null as unknown as KubeObject, inForce)).toBeUndefined();
  });
});
