// accelerators through the real built controller (the module's one Mutate and one Validate) and
// through `check`'s engine on a snapshot of the same cluster (checkParity): GPU pods on tainted GPU
// nodes get the tolerations those nodes ask for, once; each check warns or denies with its fix; an
// Exemption waives a check.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { KubeObject } from "../../lib/objects/pod";
import { admit } from "../support/admission";
import { REPO_ROOT } from "../support/controller";
import { useEnvironment } from "../support/environment";
import { checkParity, settingsEnv } from "../support/parity";
import { eventually } from "../support/wait";

const NS = "ml-gpu";
const EXEMPTIONS_NS = "admission-guard-exemptions";
const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8"));
type Obj = Record<string, unknown>;

const GPU_TAINTS = [
  { key: "nvidia.com/gpu", value: "present", effect: "NoSchedule" },
  { key: "sku", value: "gpu", effect: "NoSchedule" },
];
const node = (
  name: string,
  allocatable: Obj,
  taints: Obj[] = [],
  labels: Obj = {},
): KubeObject => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: { name, labels: { "kubernetes.io/hostname": name, ...labels } },
  spec: { taints },
  status: { allocatable },
});
const GPU = { cpu: "32", memory: "256Gi", "nvidia.com/gpu": "8" };
const objects: KubeObject[] = [
  { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
  {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: EXEMPTIONS_NS, labels: { "admission-guard.dev/owned-by": pkg.pepr.uuid } },
  },
  // The dedicated ServiceAccount exists: nothing is created for these cases.
  { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "workload", namespace: NS } },
  node("gpu-1", GPU, GPU_TAINTS, { accelerator: "a100" }),
  node("gpu-2", GPU, GPU_TAINTS, { accelerator: "a100" }),
  node("cpu-1", { cpu: "32", memory: "128Gi" }),
];

const settings = {
  accelerators: {
    runtimeClassName: "nvidia",
    memoryRequest: "deny" as const,
    maxPerPod: "deny" as const,
    maxPerPodCount: 4,
  },
};
const env = useEnvironment({ objects, env: settingsEnv(settings) });

const JOB_OWNER = [
  { apiVersion: "batch/v1", kind: "Job", name: "train", uid: "0b6d", controller: true },
];
const trainer = (limits: Obj, requests?: Obj): Obj => ({
  name: "trainer",
  image: "ghcr.io/ml-platform/llama-train:2.3",
  resources: { limits, ...(requests ? { requests } : {}) },
});
const GOOD = { "nvidia.com/gpu": "1", cpu: "8", memory: "64Gi" };
const pod = (name: string, containers: Obj[], extra: Obj = {}, owned = true): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: NS, ...(owned ? { ownerReferences: JOB_OWNER } : {}) },
  spec: { containers, ...extra },
});
const parity = (manifest: KubeObject) =>
  checkParity(env.controller, manifest, { objects: env.api.objects(), settings });
const tolerationsOf = (o: KubeObject) => ((o.spec as Obj).tolerations as Obj[] | undefined) ?? [];
const ours = (tolerations: Obj[]) =>
  tolerations.filter(t => !String(t.key).startsWith("node.kubernetes.io/"));

describe("accelerators: the controller and check agree", () => {
  it("a GPU Pod gets its nodes' tolerations, the convention and runtimeClassName; node fit admits it", async () => {
    const report = await parity(pod("train", [trainer(GOOD)]));
    expect(report.differences).toEqual([]);
    expect(report.e2e.allowed).toBe(true);
    const patched = report.e2e.patched;
    expect(ours(tolerationsOf(patched))).toEqual([
      { key: "nvidia.com/gpu", operator: "Equal", value: "present", effect: "NoSchedule" },
      { key: "sku", operator: "Equal", value: "gpu", effect: "NoSchedule" },
      { key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" },
    ]);
    expect((patched.spec as Obj).runtimeClassName).toBe("nvidia");
    // DefaultTolerationSeconds' tolerations, added before the webhook, are kept as they were.
    expect(tolerationsOf(patched).filter(t => t.tolerationSeconds === 300)).toHaveLength(2);
    expect(patched.metadata?.annotations?.["admission-guard.dev/fixed"]).toContain(
      "accelerators/runtime-class,accelerators/tolerations",
    );
    expect(report.e2e.warnings.join("\n")).not.toContain("node-fit");

    // Idempotent: the fixed pod sent again gets nothing more.
    const again = await admit(env.controller, patched);
    expect(again.allowed).toBe(true);
    expect(tolerationsOf(again.patched)).toEqual(tolerationsOf(patched));
  });

  it("a Deployment of GPU pods: both say what its pods will get; not denied by node fit", async () => {
    const deployment: KubeObject = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "serve", namespace: NS },
      spec: {
        replicas: 2,
        selector: { matchLabels: { app: "serve" } },
        template: { metadata: { labels: { app: "serve" } }, spec: { containers: [trainer(GOOD)] } },
      },
    };
    const report = await parity(deployment);
    expect(report.differences).toEqual([]);
    expect(report.e2e.allowed).toBe(true);
    const said = report.e2e.warnings.join("\n");
    expect(said).toContain(
      'admission-guard/accelerators: its pods will get spec.template.spec.tolerations[0]={"key":"nvidia.com/gpu","operator":"Equal","value":"present","effect":"NoSchedule"}',
    );
    expect(said).toContain('spec.template.spec.runtimeClassName="nvidia"');
  });

  it("memory-request (deny here): denied with the numbers and the fix", async () => {
    const report = await parity(
      pod("low-mem", [
        trainer(
          { "nvidia.com/gpu": "1", cpu: "8", memory: "64Gi" },
          { "nvidia.com/gpu": "1", cpu: "8", memory: "16Gi" },
        ),
      ]),
    );
    expect(report.differences).toEqual([]);
    expect(report.e2e.allowed).toBe(false);
    expect(report.e2e.message).toContain(
      'admission-guard/accelerators: Pod ml-gpu/low-mem: container "trainer" (spec.containers[0]) asks memory 16Gi below its limit 64Gi while using a GPU (1 nvidia.com/gpu)',
    );
    expect(report.e2e.message).toContain(
      "Fix: set resources.requests.memory equal to resources.limits.memory in spec.containers[0]",
    );
  });

  it("cpu-request and bare-pod (warn by default): admitted with the warnings and their fixes", async () => {
    const report = await parity(
      pod("bare", [trainer({ "nvidia.com/gpu": "1", memory: "8Gi" })], {}, false),
    );
    expect(report.differences).toEqual([]);
    expect(report.e2e.allowed).toBe(true);
    const said = report.e2e.warnings.join("\n");
    expect(said).toContain(
      'admission-guard/accelerators: Pod ml-gpu/bare: container "trainer" (spec.containers[0]) asks no CPU while using a GPU (1 nvidia.com/gpu)',
    );
    expect(said).toMatch(
      /admission-guard\/accelerators: Pod ml-gpu\/bare asks for 1 nvidia.com\/gpu and no controller owns it.*Fix: run it as a Job/,
    );
  });

  it("max-per-pod (4 here, deny): 8 GPUs in one pod denied", async () => {
    const report = await parity(
      pod("big", [trainer({ "nvidia.com/gpu": "8", cpu: "8", memory: "64Gi" })]),
    );
    expect(report.differences).toEqual([]);
    expect(report.e2e.allowed).toBe(false);
    expect(report.e2e.message).toContain(
      "asks for 8 accelerators (8 nvidia.com/gpu), more than 4, the most one pod may have (accelerators.maxPerPodCount)",
    );
  });

  it("gpu-node-without-accelerator: a CPU pod tolerating the GPU nodes' taints is named", async () => {
    const report = await parity(
      pod("etl", [trainer({ cpu: "2", memory: "4Gi" })], {
        tolerations: [
          { key: "nvidia.com/gpu", operator: "Exists" },
          { key: "sku", operator: "Exists" },
        ],
      }),
    );
    expect(report.differences).toEqual([]);
    expect(report.e2e.allowed).toBe(true);
    expect(report.e2e.warnings.join("\n")).toContain(
      "Pod ml-gpu/etl asks for no accelerator but tolerates nvidia.com/gpu=present:NoSchedule, sku=gpu:NoSchedule",
    );
  });

  it("an Exemption waives memory-request for the pods it names", async () => {
    const lowMem = () =>
      pod("legacy-train", [
        trainer(
          { "nvidia.com/gpu": "1", cpu: "8", memory: "64Gi" },
          { "nvidia.com/gpu": "1", cpu: "8", memory: "16Gi" },
        ),
      ]);
    expect((await admit(env.controller, lowMem())).allowed).toBe(false);
    env.api.put({
      apiVersion: "admission-guard.dev/v1alpha1",
      kind: "Exemption",
      metadata: { name: "legacy-trainers", namespace: EXEMPTIONS_NS },
      spec: {
        reason: "the legacy trainer measures its own memory",
        expires: new Date(Date.now() + 24 * 3600 * 1000).toISOString(),
        match: { namespaces: [NS], names: ["legacy-*"] },
        waive: [{ capability: "accelerators", rules: ["memory-request"] }],
      },
    });
    const result = await eventually(async () => {
      const r = await admit(env.controller, lowMem());
      if (!r.allowed) throw new Error("still denied");
      return r;
    });
    expect(result.warnings.join("\n")).toMatch(
      /admission-guard\/accelerators: memory-request waived by Exemption admission-guard-exemptions\/legacy-trainers/,
    );
    const report = await parity(lowMem());
    expect(report.differences).toEqual([]);
    expect(report.engine.allowed).toBe(true);
    env.api.remove("Exemption", "legacy-trainers", EXEMPTIONS_NS);
  });
});
