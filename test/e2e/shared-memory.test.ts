// shared-memory through the real built controller (the module's one Mutate and one Validate of
// Pods) and through `check`'s engine on a snapshot of the same cluster: the same verdict,
// warnings and resulting pod for each case, with the default setting (GPU pods), with the
// namespace label, and with sharedMemory.mount: all.
import { join } from "node:path";
import { SHM_VOLUME } from "../../capabilities/shared-memory/rules";
import type { KubeObject } from "../../lib/objects/pod";
import { REPO_ROOT } from "../support/controller";
import { useEnvironment } from "../support/environment";
import { loadManifests } from "../support/manifests";
import { checkParity, settingsEnv } from "../support/parity";

const NS = "ml-shm";
const OPTED_IN = "ml-shm-all";
const OPTED_OUT = "ml-shm-off";
type Obj = Record<string, unknown>;

const namespaceObjects = (): KubeObject[] =>
  (
    [
      [NS, {}],
      [OPTED_IN, { "admission-guard.dev/shared-memory": "all" }],
      [OPTED_OUT, { "admission-guard.dev/shared-memory": "off" }],
    ] as [string, Record<string, string>][]
  ).flatMap(([name, labels]) => [
    { apiVersion: "v1", kind: "Namespace", metadata: { name, labels } },
    // The dedicated ServiceAccount exists: nothing is created for these cases.
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "workload", namespace: name } },
  ]);

const container = (limits: Record<string, string>, extra: Obj = {}): Obj => ({
  name: "pytorch",
  image: "ghcr.io/ml-platform/llama-train:2.3",
  resources: { limits },
  ...extra,
});
const pod = (name: string, spec: Obj, ns = NS): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: ns },
  spec,
});
const gpu = { "nvidia.com/gpu": "1", cpu: "2", memory: "16Gi" };
const cpuOnly = { cpu: "2", memory: "4Gi" };
const pytorchJob = (ns: string): KubeObject => {
  const job = loadManifests(join(REPO_ROOT, "test/fixtures/ml/pytorchjob.yaml"))[0].object;
  job.metadata = { ...job.metadata, namespace: ns };
  return job;
};

const cases: [string, KubeObject, boolean][] = [
  ["a GPU pod", pod("gpu", { containers: [container(gpu)] }), true],
  ["a CPU pod", pod("cpu", { containers: [container(cpuOnly)] }), false],
  [
    "a CPU pod in a namespace labelled all",
    pod("cpu", { containers: [container(cpuOnly)] }, OPTED_IN),
    true,
  ],
  [
    "a GPU pod in a namespace labelled off",
    pod("gpu", { containers: [container(gpu)] }, OPTED_OUT),
    false,
  ],
  [
    "a GPU pod with its own /dev/shm",
    pod("own", {
      containers: [container(gpu, { volumeMounts: [{ name: "dshm", mountPath: "/dev/shm" }] })],
      volumes: [{ name: "dshm", emptyDir: { medium: "Memory", sizeLimit: "2Gi" } }],
    }),
    false,
  ],
  [
    "a GPU pod whose volume of another kind has the module's name (left, with a warning)",
    pod("taken", {
      containers: [container(gpu)],
      volumes: [{ name: SHM_VOLUME, configMap: { name: "cfg" } }],
    }),
    false,
  ],
  [
    "a GPU pod without a memory limit",
    pod("nolimit", { containers: [container({ "nvidia.com/gpu": "1", cpu: "2" })] }),
    true,
  ],
  [
    "a GPU pod in kube-system",
    pod("driver", { containers: [container(gpu)] }, "kube-system"),
    false,
  ],
];

const mounted = (o: KubeObject) =>
  ((o.spec as Obj | undefined)?.volumes as Obj[] | undefined)?.some(
    v => v.name === SHM_VOLUME && (v.emptyDir as Obj | undefined)?.medium === "Memory",
  ) ?? false;

describe("shared-memory: the controller and check agree (default: GPU pods)", () => {
  const env = useEnvironment({ objects: namespaceObjects() });

  it.each(cases)("%s", async (_name, manifest, gets) => {
    const report = await checkParity(env.controller, manifest, { objects: env.api.objects() });
    expect(report.differences).toEqual([]);
    expect(report.e2e.allowed).toBe(true);
    // What the controller's mutation really returned.
    expect(mounted(report.e2e.patched)).toBe(gets);
  });

  it("a Deployment whose pods ask for GPUs: both say what its pods will get, the Deployment unchanged", async () => {
    const deployment: KubeObject = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "serve", namespace: NS },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: "serve" } },
        template: {
          metadata: { labels: { app: "serve" } },
          spec: { containers: [container(gpu)] },
        },
      },
    };
    const report = await checkParity(env.controller, deployment, { objects: env.api.objects() });
    expect(report.differences).toEqual([]);
    expect(report.e2e.warnings.join("\n")).toContain(
      `admission-guard/shared-memory: its pods will get spec.template.spec.volumes[0]={"name":"${SHM_VOLUME}","emptyDir":{"medium":"Memory","sizeLimit":"8Gi"}}`,
    );
  });

  it("a PyTorchJob: each GPU role's pods will get it, alike", async () => {
    const report = await checkParity(env.controller, pytorchJob(NS), {
      objects: env.api.objects(),
    });
    expect(report.differences).toEqual([]);
    expect(report.e2e.warnings.join("\n")).toContain(
      `spec.pytorchReplicaSpecs.Master.template.spec.volumes[0]={"name":"${SHM_VOLUME}","emptyDir":{"medium":"Memory","sizeLimit":"32Gi"}} (0.5 of 64Gi, the memory limit of container "pytorch") (the same in role Worker)`,
    );
  });
});

describe("shared-memory with sharedMemory.mount: all", () => {
  const settings = { sharedMemory: { mount: "all" as const, defaultSizeLimit: "512Mi" } };
  const env = useEnvironment({ objects: namespaceObjects(), env: settingsEnv(settings) });

  it.each([
    ["a CPU pod", pod("cpu", { containers: [container(cpuOnly)] }), true],
    [
      "a pod without limits",
      pod("bare", { containers: [{ name: "c", image: "ghcr.io/x/y:1" }] }),
      true,
    ],
    [
      "a GPU pod in a namespace labelled off",
      pod("gpu", { containers: [container(gpu)] }, OPTED_OUT),
      false,
    ],
  ] as [string, KubeObject, boolean][])("%s", async (_name, manifest, gets) => {
    const report = await checkParity(env.controller, manifest, {
      objects: env.api.objects(),
      settings,
    });
    expect(report.differences).toEqual([]);
    expect(mounted(report.e2e.patched)).toBe(gets);
  });
});
