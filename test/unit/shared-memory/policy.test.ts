// shared-memory: a memory-backed emptyDir at /dev/shm for the pods of data loaders, through the
// one engine (review(): what `check` runs; mutate(): the mutating webhook's step) with every
// capability, as the webhook runs them.
import { policies } from "../../../capabilities";
import { CAPABILITY, gpuAskedFor, SHM_VOLUME } from "../../../capabilities/shared-memory/rules";
import { isGpuResource } from "../../../lib/objects/accelerators";
import { sharedMemoryPolicy } from "../../../capabilities/shared-memory";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { answer, mutate, recordedFixes, review } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import { podTemplateOf } from "../../../lib/workload-kinds/built-in";
import {
  defaultSettings,
  NS_KEYS,
  parseSettings,
  SettingsError,
  settingsFromEnv,
  type Settings,
  type SettingsInput,
} from "../../../lib/settings";
import type { Change } from "../../../lib/objects/verdict";

const NS = "ml";
type Obj = Record<string, unknown>;

const namespace = (name: string, labels: Record<string, string> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Namespace",
  metadata: { name, labels },
});
const clusterOf = (labels: Record<string, string> = {}, ...objects: KubeObject[]) =>
  new SnapshotCluster([namespace(NS, labels), namespace("kube-system"), ...objects]);

const container = (name: string, limits: Record<string, string> = {}, extra: Obj = {}): Obj => ({
  name,
  image: "ghcr.io/org/train:1",
  ...(Object.keys(limits).length ? { resources: { limits } } : {}),
  ...extra,
});
const pod = (spec: Obj, ns = NS): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "train", namespace: ns },
  spec,
});
const gpuPod = (memory = "16Gi") =>
  pod({ containers: [container("pytorch", { "nvidia.com/gpu": "1", memory })] });

const settingsWith = (sharedMemory: SettingsInput["sharedMemory"], more: SettingsInput = {}) =>
  parseSettings({ ...more, sharedMemory });

async function judge(
  object: KubeObject,
  opts: { settings?: Settings; cluster?: SnapshotCluster } = {},
) {
  return review(policies, object, {
    settings: opts.settings ?? defaultSettings(),
    cluster: opts.cluster ?? clusterOf(),
  });
}

const specOf = (o: KubeObject): Obj => podTemplateOf(o)!.spec as unknown as Obj;
const volumesOf = (o: KubeObject) => (specOf(o).volumes as Obj[] | undefined) ?? [];
const ourVolume = (o: KubeObject) => volumesOf(o).find(v => v.name === SHM_VOLUME);
const shmMounts = (c: Obj) =>
  ((c.volumeMounts as Obj[] | undefined) ?? []).filter(m => m.mountPath === "/dev/shm");
const shmChanges = (r: { changes: Change[] }) => r.changes.filter(c => c.capability === CAPABILITY);
const said = (r: { warnings: string[] }) => r.warnings.join("\n");

describe("which pods ask for a GPU", () => {
  it("a resource named <vendor>/gpu, an NVIDIA MIG slice, Intel's; more than 0, in limits or requests", () => {
    for (const name of [
      "nvidia.com/gpu",
      "amd.com/gpu",
      "nvidia.com/mig-1g.5gb",
      "gpu.intel.com/i915",
    ])
      expect([name, isGpuResource(name)]).toEqual([name, true]);
    for (const name of ["cpu", "memory", "example.com/fpga", "nvidia.com/gpumem"])
      expect([name, isGpuResource(name)]).toEqual([name, false]);
    const asks = (resources: Obj) =>
      gpuAskedFor(podTemplateOf(pod({ containers: [{ name: "c", image: "x", resources }] }))!);
    expect(asks({ limits: { "amd.com/gpu": "2" } })).toBe("amd.com/gpu");
    expect(asks({ requests: { "nvidia.com/gpu": 1 } })).toBe("nvidia.com/gpu");
    expect(asks({ limits: { "nvidia.com/gpu": "0" } })).toBeUndefined();
    expect(asks({ limits: { "nvidia.com/gpu": "lots" } })).toBeUndefined();
    expect(asks({ limits: { cpu: "8", memory: "64Gi" } })).toBeUndefined();
  });
});

describe("the fix on a Pod", () => {
  it("a GPU pod gets a memory-backed emptyDir at /dev/shm in every container, sized half its largest memory limit", async () => {
    const p = pod({
      initContainers: [container("fetch", { memory: "2Gi" })],
      containers: [
        container("pytorch", { "nvidia.com/gpu": "8", memory: "24Gi" }),
        container(
          "logger",
          { memory: "1Gi" },
          { volumeMounts: [{ name: "logs", mountPath: "/logs" }] },
        ),
      ],
      volumes: [{ name: "logs", emptyDir: {} }],
    });
    const r = await judge(p);
    expect(r.allowed).toBe(true);
    expect(ourVolume(r.object)).toEqual({
      name: SHM_VOLUME,
      emptyDir: { medium: "Memory", sizeLimit: "12Gi" },
    });
    const spec = specOf(r.object);
    for (const c of [...(spec.initContainers as Obj[]), ...(spec.containers as Obj[])])
      expect([c.name, shmMounts(c)]).toEqual([
        c.name,
        [{ name: SHM_VOLUME, mountPath: "/dev/shm" }],
      ]);
    // The user's own volume and mount stay as they were, first.
    expect(volumesOf(r.object)[0]).toEqual({ name: "logs", emptyDir: {} });
    expect((spec.containers as Obj[])[1].volumeMounts).toEqual([
      { name: "logs", mountPath: "/logs" },
      { name: SHM_VOLUME, mountPath: "/dev/shm" },
    ]);
    // Said in the trace, in the change (with its basis) and in a note of what counts its pages.
    expect(recordedFixes(r.object).get(CAPABILITY)).toEqual(["dev-shm"]);
    expect(shmChanges(r)[0].message).toBe(
      `spec.volumes[1]={"name":"${SHM_VOLUME}","emptyDir":{"medium":"Memory","sizeLimit":"12Gi"}} (0.5 of 24Gi, the memory limit of container "pytorch")`,
    );
    expect(said(r)).toContain(
      `admission-guard/shared-memory: Pod ml/train got /dev/shm as a memory-backed emptyDir (${SHM_VOLUME}) of 12Gi (it asks for nvidia.com/gpu): what is written there counts within the memory limit of the container that writes it, which quota and node fit already count (no request or limit was raised)`,
    );
    expect(said(r)).toContain("admission-guard/shared-memory: fixed dev-shm");
  });

  it("raises no request and no limit: a pod that fits its memory quota exactly still fits", async () => {
    const quota: KubeObject = {
      apiVersion: "v1",
      kind: "ResourceQuota",
      metadata: { name: "mem", namespace: NS },
      spec: { hard: { "limits.memory": "16Gi", "requests.memory": "16Gi" } },
      status: { used: { "limits.memory": "0", "requests.memory": "0" } },
    };
    const before = gpuPod("16Gi");
    const resources = JSON.stringify(before.spec);
    const r = await judge(before, { cluster: clusterOf({}, quota) });
    expect(ourVolume(r.object)).toBeDefined();
    expect(r.allowed).toBe(true);
    expect(JSON.stringify((specOf(r.object).containers as Obj[])[0].resources)).toBe(
      JSON.stringify((JSON.parse(resources).containers as Obj[])[0].resources),
    );
    // One byte more than the quota holds is still refused: quota judged the fixed pod.
    const over = await judge(gpuPod("17Gi"), { cluster: clusterOf({}, quota) });
    expect(over.allowed).toBe(false);
    expect(over.denials.join("\n")).toContain("admission-guard/resource-quota");
  });

  it("a pod without a GPU is left alone by default", async () => {
    const r = await judge(pod({ containers: [container("etl", { cpu: "4", memory: "8Gi" })] }));
    expect(ourVolume(r.object)).toBeUndefined();
    expect(shmChanges(r)).toEqual([]);
    expect(said(r)).not.toContain("admission-guard/shared-memory");
  });

  it("never overrides a /dev/shm the user mounts, in any container, nor /dev itself", async () => {
    const own = pod({
      containers: [
        container("pytorch", { "nvidia.com/gpu": "1", memory: "16Gi" }),
        container("loader", {}, { volumeMounts: [{ name: "dshm", mountPath: "/dev/shm/" }] }),
      ],
      volumes: [{ name: "dshm", emptyDir: { medium: "Memory" } }],
    });
    const copy = structuredClone(own);
    const r = await judge(own);
    expect(shmChanges(r)).toEqual([]);
    expect(volumesOf(r.object).map(v => v.name)).toEqual(["dshm"]);
    expect((specOf(r.object).containers as Obj[]).map(shmMounts)).toEqual(
      (specOf(copy).containers as Obj[]).map(shmMounts),
    );
    // Its own choice: no warning that it keeps 64 MiB.
    expect(r.violations.filter(v => v.capability === CAPABILITY)).toEqual([]);

    const dev = pod({
      containers: [
        container(
          "pytorch",
          { "nvidia.com/gpu": "1" },
          {
            volumeMounts: [{ name: "dev", mountPath: "/dev" }],
          },
        ),
      ],
      volumes: [{ name: "dev", hostPath: { path: "/dev" } }],
    });
    expect(shmChanges(await judge(dev))).toEqual([]);
  });

  it("leaves a pod alone whose volume of another kind has our name, and says why it keeps 64 MiB (a warning)", async () => {
    const taken = pod({
      containers: [container("pytorch", { "nvidia.com/gpu": "1", memory: "8Gi" })],
      volumes: [{ name: SHM_VOLUME, configMap: { name: "cfg" } }],
    });
    const r = await judge(taken);
    expect(shmChanges(r)).toEqual([]);
    expect(volumesOf(r.object)).toEqual([{ name: SHM_VOLUME, configMap: { name: "cfg" } }]);
    expect(r.allowed).toBe(true);
    const v = r.violations.find(x => x.capability === CAPABILITY)!;
    expect(v).toMatchObject({ rule: "dev-shm", severity: "warn" });
    expect(v.message).toContain(
      `keep the container runtime's 64 MiB /dev/shm although it asks for nvidia.com/gpu`,
    );
    expect(v.message).toContain(
      `(not fixed: spec.volumes already has a volume named ${SHM_VOLUME} that is not a memory-backed emptyDir)`,
    );
    expect(v.fix).toContain('"sizeLimit":"4Gi"');
  });

  it("leaves pods alone that share the host's IPC or run Windows", async () => {
    const hostIpc = pod({ hostIPC: true, containers: [container("c", { "nvidia.com/gpu": "1" })] });
    const windows = pod({
      os: { name: "windows" },
      containers: [container("c", { "nvidia.com/gpu": "1" })],
    });
    for (const p of [hostIpc, windows]) {
      const r = await judge(p);
      expect(shmChanges(r)).toEqual([]);
      expect(r.violations.filter(v => v.capability === CAPABILITY)).toEqual([]);
    }
  });

  it("never in a system namespace", async () => {
    const r = await judge({ ...gpuPod(), metadata: { name: "driver", namespace: "kube-system" } });
    expect(r.handled).toBe(false);
    expect(ourVolume(r.object)).toBeUndefined();
  });

  it("does not push a pod over payload-size's limits: left with a warning naming the limit", async () => {
    const full = pod({
      containers: [container("pytorch", { "nvidia.com/gpu": "1" })],
      volumes: [
        { name: "a", emptyDir: {} },
        { name: "b", emptyDir: {} },
      ],
    });
    const settings = parseSettings({ payload: { maxVolumes: 2 } });
    const r = await judge(full, { settings });
    expect(shmChanges(r)).toEqual([]);
    expect(r.allowed).toBe(true);
    expect(r.warnings.join("\n")).toContain(
      "(not fixed: another volume would exceed payload.maxVolumes (2))",
    );
  });

  it("a hostile mountPath (200,000 slashes) costs a linear pass, not a quadratic one", () => {
    const p = pod({
      containers: [
        container(
          "c",
          { "nvidia.com/gpu": "1" },
          {
            volumeMounts: [{ name: "x", mountPath: `${"/".repeat(200_000)}x` }],
          },
        ),
      ],
      volumes: [{ name: "x", emptyDir: {} }],
    });
    const target = { object: p, template: podTemplateOf(p)!, isTemplate: false };
    const ctx = {
      settings: defaultSettings(),
      namespaceName: NS,
      cluster: clusterOf(),
      operation: "CREATE" as const,
      dryRun: false,
      scan: false,
      policies,
    };
    const started = Date.now();
    expect(sharedMemoryPolicy.fix!(target, ctx)).toHaveLength(2);
    // A trailing-slash regex takes ~20 s on this input; a linear pass, milliseconds.
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("malformed volumes or mounts are left alone, without a throw", async () => {
    for (const spec of [
      { containers: [container("c", { "nvidia.com/gpu": "1" })], volumes: "nope" },
      { containers: [container("c", { "nvidia.com/gpu": "1" }, { volumeMounts: 7 })] },
      { containers: [null, 3, container("c", { "nvidia.com/gpu": "1" })] },
    ]) {
      const r = await judge(pod(spec as Obj));
      expect(r.violations.filter(v => v.rule === "internal-error")).toEqual([]);
    }
  });
});

describe("size", () => {
  it("without any memory limit: sharedMemory.defaultSizeLimit, and a note that nothing bounds its pages", async () => {
    const r = await judge(pod({ containers: [container("c", { "nvidia.com/gpu": "1" })] }), {
      settings: settingsWith({ defaultSizeLimit: "2Gi" }),
    });
    expect(ourVolume(r.object)).toMatchObject({ emptyDir: { medium: "Memory", sizeLimit: "2Gi" } });
    expect(shmChanges(r)[0].message).toContain(
      "(sharedMemory.defaultSizeLimit: no container has a memory limit)",
    );
    expect(said(r)).toContain(
      "no container has a memory limit, so what is written there counts against the pod's memory unbounded, and neither quota nor node fit sees it. Fix: set resources.limits.memory",
    );
  });

  it("a pod-level memory limit (spec.resources) decides; sharedMemory.sizeFraction scales it, in whole MiB", async () => {
    const p = pod({
      resources: { limits: { memory: "10Gi" } },
      containers: [container("c", { "nvidia.com/gpu": "1", memory: "32Gi" })],
    });
    const r = await judge(p, { settings: settingsWith({ sizeFraction: 0.3 }) });
    // 0.3 × 10 GiB = 3072 MiB (3Gi) exactly; 0.25 × 1000Mi below.
    expect(ourVolume(r.object)).toMatchObject({ emptyDir: { sizeLimit: "3Gi" } });
    expect(shmChanges(r)[0].message).toContain(
      "(0.3 of 10Gi, the memory limit of the pod (spec.resources))",
    );
    const odd = await judge(gpuPod("1000Mi"), { settings: settingsWith({ sizeFraction: 0.25 }) });
    expect(ourVolume(odd.object)).toMatchObject({ emptyDir: { sizeLimit: "250Mi" } });
    const decimal = await judge(gpuPod("1G"));
    // 500,000,000 bytes is 476.8 MiB: rounded down.
    expect(ourVolume(decimal.object)).toMatchObject({ emptyDir: { sizeLimit: "476Mi" } });
  });

  it("a workload template's containers get the namespace LimitRange's default memory limit, as its pods will", async () => {
    const limitRange: KubeObject = {
      apiVersion: "v1",
      kind: "LimitRange",
      metadata: { name: "defaults", namespace: NS },
      spec: { limits: [{ type: "Container", default: { memory: "6Gi" } }] },
    };
    const r = await judge(deployment([container("c", { "nvidia.com/gpu": "1" })]), {
      cluster: clusterOf({}, limitRange),
    });
    expect(shmChanges(r)[0].message).toContain('"sizeLimit":"3Gi"');
  });
});

const deployment = (containers: Obj[]): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "serve", namespace: NS },
  spec: {
    replicas: 2,
    selector: { matchLabels: { app: "serve" } },
    template: { metadata: { labels: { app: "serve" } }, spec: { containers } },
  },
});

describe("the setting and the namespace label", () => {
  const cpuPod = () => pod({ containers: [container("etl", { memory: "4Gi" })] });

  it("sharedMemory.mount: all mounts it in every pod; off in none; enabled false turns the capability off", async () => {
    const all = await judge(cpuPod(), { settings: settingsWith({ mount: "all" }) });
    expect(ourVolume(all.object)).toMatchObject({ emptyDir: { sizeLimit: "2Gi" } });
    expect(said(all)).toContain("(sharedMemory.mount: all)");
    const off = await judge(gpuPod(), { settings: settingsWith({ mount: "off" }) });
    expect(ourVolume(off.object)).toBeUndefined();
    expect(off.violations.filter(v => v.capability === CAPABILITY)).toEqual([]);
    const disabled = await judge(gpuPod(), { settings: settingsWith({ enabled: false }) });
    expect(ourVolume(disabled.object)).toBeUndefined();
    expect(disabled.judgedBy.map(p => p.name)).not.toContain(CAPABILITY);
  });

  it("the namespace label admission-guard.dev/shared-memory opts a namespace in or out", async () => {
    const optedIn = await judge(cpuPod(), {
      cluster: clusterOf({ [NS_KEYS.sharedMemory]: "all" }),
    });
    expect(ourVolume(optedIn.object)).toBeDefined();
    expect(said(optedIn)).toContain(`(the namespace label ${NS_KEYS.sharedMemory}=all)`);
    const optedOut = await judge(gpuPod(), {
      cluster: clusterOf({ [NS_KEYS.sharedMemory]: "off" }),
    });
    expect(ourVolume(optedOut.object)).toBeUndefined();
    // The label wins over the setting both ways.
    const inOffCluster = await judge(gpuPod(), {
      settings: settingsWith({ mount: "off" }),
      cluster: clusterOf({ [NS_KEYS.sharedMemory]: "gpu" }),
    });
    expect(ourVolume(inOffCluster.object)).toBeDefined();
  });

  it("a label that names no choice: the setting, and a warning with the kubectl fix", async () => {
    const r = await judge(gpuPod(), { cluster: clusterOf({ [NS_KEYS.sharedMemory]: "yes" }) });
    expect(ourVolume(r.object)).toBeDefined();
    expect(said(r)).toContain(
      `namespace ml has ${NS_KEYS.sharedMemory}="yes", which is not one of gpu|all|off: sharedMemory.mount (gpu) is used. Fix: kubectl label namespace ml ${NS_KEYS.sharedMemory}=<gpu|all|off> --overwrite`,
    );
  });

  it("settings are validated, naming the key; the environment sets them", () => {
    const problem = (input: SettingsInput) => {
      try {
        parseSettings(input);
      } catch (e) {
        return (e as SettingsError).problems.join("\n");
      }
      return "";
    };
    expect(problem({ sharedMemory: { defaultSizeLimit: "lots" } })).toMatch(
      /^sharedMemory\.defaultSizeLimit: "lots" is not a Kubernetes quantity/,
    );
    expect(problem({ sharedMemory: { defaultSizeLimit: "512Ki" } })).toContain("is less than 1Mi");
    expect(problem({ sharedMemory: { sizeFraction: 0 } })).toMatch(/^sharedMemory\.sizeFraction/);
    expect(problem({ sharedMemory: { mount: "some" } as never })).toMatch(/^sharedMemory\.mount/);
    const env = settingsFromEnv({
      ADMISSION_GUARD_SHARED_MEMORY_MOUNT: "all",
      ADMISSION_GUARD_SHARED_MEMORY_DEFAULT_SIZE_LIMIT: "512Mi",
      ADMISSION_GUARD_SHARED_MEMORY_SIZE_FRACTION: "0.25",
    });
    expect(env.sharedMemory).toEqual({
      enabled: true,
      mount: "all",
      defaultSizeLimit: "512Mi",
      sizeFraction: 0.25,
    });
    expect(defaultSettings().sharedMemory).toEqual({
      enabled: true,
      mount: "gpu",
      sizeFraction: 0.5,
      defaultSizeLimit: "1Gi",
    });
  });
});

describe("idempotent", () => {
  const mutateOnce = (object: KubeObject, cluster = clusterOf()) =>
    mutate(
      { object, operation: "CREATE", dryRun: false },
      { settings: defaultSettings(), cluster, policies },
      policies,
    );

  it("with every capability: fixing twice equals fixing once (fsGroup included, in the same pass)", async () => {
    const p = pod({
      initContainers: [container("fetch", { memory: "1Gi" })],
      containers: [container("pytorch", { "nvidia.com/gpu": "1", memory: "16Gi" })],
    });
    const first = await mutateOnce(p);
    expect(first.changes.some(c => c.capability === CAPABILITY)).toBe(true);
    expect(first.changes.some(c => c.rule === "fsGroup")).toBe(true);
    const once = JSON.stringify(p);
    const second = await mutateOnce(p);
    expect(second.changes).toEqual([]);
    expect(JSON.stringify(p)).toBe(once);
  });

  it("a container added after the first pass (a sidecar another webhook injects) gets the same volume", async () => {
    const p = gpuPod("16Gi");
    await mutateOnce(p);
    (specOf(p).containers as Obj[]).push({ name: "proxy", image: "ghcr.io/org/proxy:1" });
    const again = await mutateOnce(p);
    expect(shmChanges(again).map(c => c.message)).toEqual([
      `spec.containers[1].volumeMounts[0]={"name":"${SHM_VOLUME}","mountPath":"/dev/shm"}`,
    ]);
    expect(volumesOf(p).filter(v => v.name === SHM_VOLUME)).toHaveLength(1);
  });

  it("the rule alone: a second run on its own output changes nothing", () => {
    const p = gpuPod("8Gi");
    const target = { object: p, template: podTemplateOf(p)!, isTemplate: false };
    const ctx = {
      settings: defaultSettings(),
      namespaceName: NS,
      cluster: clusterOf(),
      operation: "CREATE" as const,
      dryRun: false,
      scan: false,
      policies,
    };
    expect(sharedMemoryPolicy.fix!(target, ctx)).toHaveLength(2);
    expect(sharedMemoryPolicy.fix!(target, ctx)).toEqual([]);
  });
});

describe("workload templates and ML kinds", () => {
  it("a Deployment's template: its pods will get it (the stored Deployment unchanged), said as pending", async () => {
    const d = deployment([container("serve", { "nvidia.com/gpu": "1", memory: "8Gi" })]);
    const stored = JSON.stringify(d);
    const r = await judge(d);
    expect(r.allowed).toBe(true);
    // check shows the template as its pods will be; the Deployment itself is not mutated.
    expect(ourVolume(r.object)).toMatchObject({ emptyDir: { sizeLimit: "4Gi" } });
    expect(JSON.stringify(d)).toBe(stored);
    expect(said(r)).toContain(
      `admission-guard/shared-memory: its pods will get spec.template.spec.volumes[0]={"name":"${SHM_VOLUME}","emptyDir":{"medium":"Memory","sizeLimit":"4Gi"}} (0.5 of 8Gi, the memory limit of container "serve"); spec.template.spec.containers[0].volumeMounts[0]={"name":"${SHM_VOLUME}","mountPath":"/dev/shm"} (when Deployment creates them)`,
    );
    expect(said(r)).toContain(
      "admission-guard/shared-memory: the pods of Deployment ml/serve will get /dev/shm as a memory-backed emptyDir (ag-shared-memory) of 4Gi (it asks for nvidia.com/gpu)",
    );
  });

  it("with workloads.mutate the template itself is fixed, once", async () => {
    const d = deployment([container("serve", { "nvidia.com/gpu": "1", memory: "8Gi" })]);
    const settings = parseSettings({ workloads: { mutate: true } });
    const deps = { settings, cluster: clusterOf(), policies };
    await mutate({ object: d, operation: "CREATE", dryRun: false }, deps, policies);
    expect(ourVolume(d)).toMatchObject({ emptyDir: { medium: "Memory", sizeLimit: "4Gi" } });
    const once = JSON.stringify(d);
    const again = await mutate({ object: d, operation: "CREATE", dryRun: false }, deps, policies);
    expect(again.changes).toEqual([]);
    expect(JSON.stringify(d)).toBe(once);
  });

  it("a PyTorchJob: the GPU role's pods will get it, the CPU-only role's will not", async () => {
    const job: KubeObject = {
      apiVersion: "kubeflow.org/v1",
      kind: "PyTorchJob",
      metadata: { name: "llama", namespace: NS },
      spec: {
        pytorchReplicaSpecs: {
          Master: {
            replicas: 1,
            template: { spec: { containers: [container("pytorch", { cpu: "2", memory: "4Gi" })] } },
          },
          Worker: {
            replicas: 4,
            template: {
              spec: {
                containers: [container("pytorch", { "nvidia.com/gpu": "8", memory: "64Gi" })],
              },
            },
          },
        },
      },
    };
    const r = await judge(job);
    expect(r.allowed).toBe(true);
    const pending = shmChanges(r).map(c => c.message);
    expect(pending).toEqual([
      `spec.pytorchReplicaSpecs.Worker.template.spec.volumes[0]={"name":"${SHM_VOLUME}","emptyDir":{"medium":"Memory","sizeLimit":"32Gi"}} (0.5 of 64Gi, the memory limit of container "pytorch")`,
      `spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].volumeMounts[0]={"name":"${SHM_VOLUME}","mountPath":"/dev/shm"}`,
    ]);
    // Opted in for every pod, the Master role gets it too, sized from its own limit.
    const all = await judge(job, { cluster: clusterOf({ [NS_KEYS.sharedMemory]: "all" }) });
    expect(
      shmChanges(all)
        .map(c => c.message)
        .join("\n"),
    ).toContain(
      `spec.pytorchReplicaSpecs.Master.template.spec.volumes[0]={"name":"${SHM_VOLUME}","emptyDir":{"medium":"Memory","sizeLimit":"2Gi"}}`,
    );
  });
});

describe("reports and updates", () => {
  it("a running GPU pod with the runtime's 64 MiB (made before the module) is a warning in its report, never a denial", async () => {
    const running = gpuPod("16Gi");
    // The watcher's scan: the validating step alone, on the pod as it runs.
    const r = await answer(
      { object: running, operation: "CREATE", dryRun: true, scan: true },
      { settings: defaultSettings(), cluster: clusterOf(), policies },
      policies,
    );
    // (security-context denies this unfixed pod; shared-memory never does)
    expect(r.denials.join("\n")).not.toContain("admission-guard/shared-memory");
    const v = r.violations.find(x => x.capability === CAPABILITY);
    expect(v).toMatchObject({ rule: "dev-shm", severity: "warn" });
    expect(v!.message).not.toContain("not fixed:");
  });

  it("an Exemption may waive the capability whole: the pod stays as written", async () => {
    const exemption: KubeObject = {
      apiVersion: "admission-guard.dev/v1alpha1",
      kind: "Exemption",
      metadata: { name: "no-shm", namespace: "admission-guard-exemptions" },
      spec: {
        reason: "the job sizes its own IPC",
        expires: new Date(Date.now() + 86_400_000).toISOString(),
        match: { namespaces: [NS] },
        waive: [{ capability: CAPABILITY }],
      },
    };
    const r = await judge(gpuPod(), {
      cluster: clusterOf({}, namespace("admission-guard-exemptions"), exemption),
    });
    expect(ourVolume(r.object)).toBeUndefined();
  });
});
