// KServe's InferenceService judged at apply: its pods built as KServe builds them (an inline pod
// spec; a model's container from the named or matching ServingRuntime / ClusterServingRuntime),
// minReplicas pods per component, and every area's checks and fixes on them, through the engine
// as `check` and the webhook run it. Fixtures written from KServe's v1beta1 / v1alpha1 API
// reference (InferenceService, ComponentExtensionSpec, ModelSpec, ServingRuntimeSpec).
import { join } from "node:path";
import { policies } from "../../../capabilities";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { review } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import { chooseRuntime, servingRuntimeAsRead } from "../../../lib/workload-kinds/serving-runtimes";
import { ServingRuntimeCaches } from "../../../lib/cluster/serving-runtime-cache";
import { cacheSynced } from "../../../lib/metrics";
import { valueOf } from "../metrics/support";
import { defaultSettings, parseSettings, type Settings } from "../../../lib/settings";
import { kindsInForce } from "../../../lib/workload-kinds/in-force";
import { inferenceServiceRoles } from "../../../lib/workload-kinds/inference-service";
import { workloadKindOf } from "../../../lib/workload-kinds/roles";
import { loadManifests } from "../../support/manifests";

const NS = "serving";
const fixture = (file: string): KubeObject =>
  loadManifests(join(__dirname, "../../fixtures/ml", file))[0].object;

const runtime = (
  name: string,
  spec: Record<string, unknown>,
  extra: { kind?: string; namespace?: string; created?: string } = {},
): KubeObject => ({
  apiVersion: "serving.kserve.io/v1alpha1",
  kind: extra.kind ?? "ServingRuntime",
  metadata: {
    name,
    ...(extra.kind === "ClusterServingRuntime" ? {} : { namespace: extra.namespace ?? NS }),
    // As the API sends it: a string.
    creationTimestamp: (extra.created ?? "2025-01-01T00:00:00Z") as unknown as Date,
  },
  spec,
});
const serverContainer = (image: string, more: Record<string, unknown> = {}) => ({
  name: "kserve-container",
  image,
  resources: { requests: { cpu: "1", memory: "4Gi" }, limits: { cpu: "2", memory: "8Gi" } },
  ...more,
});
const sklearnRuntime = (name: string, image: string, format: Record<string, unknown> = {}) =>
  runtime(name, {
    supportedModelFormats: [{ name: "sklearn", version: "1", autoSelect: true, ...format }],
    containers: [serverContainer(image)],
  });

const isvc = (spec: Record<string, unknown>, name = "iris"): KubeObject => ({
  apiVersion: "serving.kserve.io/v1beta1",
  kind: "InferenceService",
  metadata: { name, namespace: NS, labels: { team: "ml" } },
  spec,
});
const sklearnModel = (more: Record<string, unknown> = {}) => ({
  model: { modelFormat: { name: "sklearn" }, storageUri: "gs://models/iris", ...more },
});
const quota = (hard: Record<string, string>, used: Record<string, string> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "ResourceQuota",
  metadata: { name: "compute", namespace: NS },
  spec: { hard },
  status: { hard, used },
});
const snapshot = (...objects: KubeObject[]) =>
  new SnapshotCluster([
    { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "default", namespace: NS } },
    ...objects,
  ]);
const judge = (
  obj: KubeObject,
  cluster: SnapshotCluster,
  settings: Settings = defaultSettings(),
  more = {},
) => review(policies, obj, { settings, cluster, ...more });
const rolesOf = (obj: KubeObject, cluster?: SnapshotCluster) =>
  inferenceServiceRoles(obj, cluster, NS);
const containersOf = (obj: KubeObject, cluster?: SnapshotCluster, role = 0) =>
  (rolesOf(obj, cluster)[role].template.spec.containers ?? []) as unknown as Record<
    string,
    unknown
  >[];

describe("the kind", () => {
  it("is a built-in kind of serving.kserve.io in any version, and builtInKinds can drop it", () => {
    const inForce = kindsInForce(defaultSettings().workloads);
    expect(
      workloadKindOf({ apiVersion: "serving.kserve.io/v1beta2", kind: "InferenceService" }, inForce)
        ?.builtBy,
    ).toBe("inference-service");
    const without = parseSettings({ workloads: { builtInKinds: ["RayCluster.ray.io"] } });
    expect(workloadKindOf(isvc({}), kindsInForce(without.workloads))).toBeUndefined();
  });
});

describe("the pods KServe builds", () => {
  it("an inline predictor: its pod spec as written, the component fields left out, minReplicas pods (default 1)", () => {
    const obj = isvc({
      predictor: {
        minReplicas: 3,
        maxReplicas: 5,
        scaleTarget: 10,
        containerConcurrency: 4,
        labels: { tier: "serving" },
        nodeSelector: { pool: "gpu" },
        containers: [{ name: "kserve-container", image: "ghcr.io/org/server:1" }],
      },
    });
    const [predictor] = rolesOf(obj);
    expect(predictor).toMatchObject({
      name: "predictor",
      pods: 3,
      atMost: 5,
      field: "spec.predictor.minReplicas",
    });
    expect(predictor.template.spec).toEqual({
      nodeSelector: { pool: "gpu" },
      containers: [{ name: "kserve-container", image: "ghcr.io/org/server:1" }],
    });
    // Labels: the InferenceService's, then the component's.
    expect(predictor.template.metadata.labels).toEqual({ team: "ml", tier: "serving" });
    expect(
      rolesOf(isvc({ predictor: { containers: [{ name: "c", image: "x:1" }] } }))[0].pods,
    ).toBe(1);
  });

  it("minReplicas 0 (scale to zero) counts 1 pod, the one the first request starts; maxReplicas not above it is no growth", () => {
    const [role] = rolesOf(
      isvc({
        predictor: { minReplicas: 0, maxReplicas: 1, containers: [{ name: "c", image: "x:1" }] },
      }),
    );
    expect(role.pods).toBe(1);
    expect(role.atMost).toBeUndefined();
  });

  it("a model with its named ServingRuntime: the runtime's kserve-container with the model's fields merged over it", () => {
    const rt = runtime("sk", {
      supportedModelFormats: [{ name: "sklearn", version: "1" }], // no autoSelect: naming it is enough
      nodeSelector: { accelerator: "none" },
      tolerations: [{ key: "serving", operator: "Exists" }],
      volumes: [{ name: "cache", emptyDir: {} }],
      labels: { runtime: "sk", team: "platform" },
      containers: [
        serverContainer("ghcr.io/kserve/sklearnserver:v0.14.0", {
          args: ["--model_name={{.Name}}", "--http_port=8080"],
          env: [
            { name: "A", value: "runtime" },
            { name: "B", value: "runtime" },
          ],
        }),
        { name: "sidecar", image: "ghcr.io/org/sidecar:2" },
      ],
    });
    const obj = isvc({
      predictor: {
        serviceAccountName: "sa",
        tolerations: [{ key: "own", operator: "Exists" }],
        volumes: [{ name: "extra", emptyDir: {} }],
        ...sklearnModel({
          runtime: "sk",
          runtimeVersion: "v0.15.0",
          args: ["--workers=2"],
          env: [{ name: "B", value: "model" }],
          resources: { limits: { memory: "16Gi" } },
        }),
        containers: [{ name: "logger", image: "ghcr.io/org/logger:1" }],
      },
    });
    const cluster = snapshot(rt);
    const [main, sidecar, logger] = containersOf(obj, cluster);
    expect(main).toEqual({
      name: "kserve-container",
      // runtimeVersion is the tag, as KServe sets it
      image: "ghcr.io/kserve/sklearnserver:v0.15.0",
      // the runtime's args first, its placeholders filled from the InferenceService
      args: ["--model_name=iris", "--http_port=8080", "--workers=2"],
      env: [
        { name: "A", value: "runtime" },
        { name: "B", value: "model" },
      ],
      // requests and limits merged key by key
      resources: { requests: { cpu: "1", memory: "4Gi" }, limits: { cpu: "2", memory: "16Gi" } },
    });
    expect(sidecar).toEqual({ name: "sidecar", image: "ghcr.io/org/sidecar:2" });
    expect(logger).toEqual({ name: "logger", image: "ghcr.io/org/logger:1" });
    const { spec, metadata } = rolesOf(obj, cluster)[0].template;
    // Pod-level: the runtime's under the predictor's (a list without a merge key replaced, volumes by name).
    expect(spec).toMatchObject({
      serviceAccountName: "sa",
      nodeSelector: { accelerator: "none" },
      tolerations: [{ key: "own", operator: "Exists" }],
      volumes: [
        { name: "cache", emptyDir: {} },
        { name: "extra", emptyDir: {} },
      ],
    });
    expect(metadata.labels).toEqual({ runtime: "sk", team: "ml" });
  });

  it("a model without a runtime: the namespace's ServingRuntimes first, by priority then newest; disabled, multi-model, autoSelect off or another version never", () => {
    const format = (more: Record<string, unknown>) => ({
      supportedModelFormats: [{ name: "sklearn", version: "1", autoSelect: true, ...more }],
    });
    const rts = [
      runtime("off", { ...format({}), disabled: true, containers: [serverContainer("r/off:1")] }),
      runtime("mm", { ...format({}), multiModel: true, containers: [serverContainer("r/mm:1")] }),
      runtime("manual", {
        ...format({ autoSelect: false, priority: 9 }),
        containers: [serverContainer("r/manual:1")],
      }),
      runtime("v2", {
        ...format({ version: "2", priority: 9 }),
        containers: [serverContainer("r/v2:1")],
      }),
      runtime(
        "old",
        { ...format({}), containers: [serverContainer("r/old:1")] },
        { created: "2024-01-01T00:00:00Z" },
      ),
      runtime(
        "new",
        { ...format({}), containers: [serverContainer("r/new:1")] },
        { created: "2025-06-01T00:00:00Z" },
      ),
      runtime("low", { ...format({ priority: 1 }), containers: [serverContainer("r/low:1")] }),
      runtime(
        "high",
        { ...format({ priority: 5 }), containers: [serverContainer("r/high:1")] },
        { kind: "ClusterServingRuntime" },
      ),
    ];
    const image = (
      objects: KubeObject[],
      model = sklearnModel({ modelFormat: { name: "sklearn", version: "1" } }),
    ) => containersOf(isvc({ predictor: model }), snapshot(...objects))[0]?.image;
    // A namespace runtime wins over a ClusterServingRuntime whatever its priority; a set priority first.
    expect(image(rts)).toBe("r/low:1");
    // Without priorities: the newest.
    expect(image(rts.filter(r => r.metadata?.name !== "low"))).toBe("r/new:1");
    // Only the ClusterServingRuntime matches.
    expect(image([rts[7], rts[0]])).toBe("r/high:1");
    // A model without a version matches any version of the format.
    expect(image([rts[3]], sklearnModel())).toBe("r/v2:1");
  });

  it("a namespace admin's thousands of runtimes: a name still found, the choice not worked out, never wrong", () => {
    const many = Array.from({ length: 600 }, (_, i) =>
      sklearnRuntime(`rt-${i}`, `r/rt-${i}:1`, { autoSelect: true }),
    );
    const view = snapshot(...many);
    const named = chooseRuntime(view, NS, { name: "sklearn" }, "rt-599", undefined);
    expect(named).toMatchObject({ state: "found", name: "rt-599" });
    const chosen = chooseRuntime(view, NS, { name: "sklearn" }, undefined, undefined);
    expect(chosen).toMatchObject({ state: "unknown" });
    expect(chosen.state === "unknown" && chosen.reason).toContain("over 500 ServingRuntimes");
  });

  it("placeholders a namespace admin repeats over a 200 KB annotation fill 1 MiB at most, not gigabytes", () => {
    const placeholders = Array.from({ length: 5_000 }, () => "{{.Annotations.big}}");
    const rt = runtime("amplify", {
      supportedModelFormats: [{ name: "sklearn", version: "1", autoSelect: true }],
      containers: [serverContainer("r/amplify:1", { args: placeholders })],
    });
    const service = isvc({ predictor: sklearnModel() });
    service.metadata!.annotations = { big: "x".repeat(200_000) };
    const [container] = containersOf(service, snapshot(rt));
    const args = container.args as string[];
    // The first five fit in the cap and are filled; the rest stay as written.
    expect(args.filter(a => a.length === 200_000)).toHaveLength(5);
    expect(args.filter(a => a === "{{.Annotations.big}}")).toHaveLength(4_995);
    expect(JSON.stringify(container).length).toBeLessThan(1.2 * 1024 * 1024);
  });

  it("the 1 MiB cap is per InferenceService: a runtime's two filled containers share it", () => {
    // Each container alone stays under the cap (10 x 100 KB); together they would add 2 MB.
    const placeholders = Array.from({ length: 10 }, () => "{{.Annotations.big}}");
    const rt = runtime("two", {
      supportedModelFormats: [{ name: "sklearn", version: "1", autoSelect: true }],
      containers: [
        serverContainer("r/two:1", { args: placeholders }),
        { name: "transformer-container", image: "r/two-t:1", args: placeholders },
      ],
    });
    const service = isvc({ predictor: sklearnModel() });
    service.metadata!.annotations = { big: "x".repeat(100_000) };
    const containers = rolesOf(service, snapshot(rt)).flatMap(
      r => (r.template.spec.containers ?? []) as unknown as Record<string, unknown>[],
    );
    const args = containers.flatMap(c => (Array.isArray(c.args) ? (c.args as string[]) : []));
    expect(args).toHaveLength(20);
    // 10 fills make 1,000,000 characters; the 11th would pass 1 MiB, wherever it is.
    expect(args.filter(a => a.length === 100_000).length).toBe(10);
    expect(args.filter(a => a === "{{.Annotations.big}}").length).toBe(10);
    const added = containers.reduce((n, c) => n + JSON.stringify(c).length, 0);
    expect(added).toBeLessThan(1.2 * 1024 * 1024);
  });

  it("a named ClusterServingRuntime; a namespace ServingRuntime of the same name comes first", () => {
    const cluster = runtime(
      "shared",
      {
        supportedModelFormats: [{ name: "sklearn" }],
        containers: [serverContainer("r/cluster:1")],
      },
      { kind: "ClusterServingRuntime" },
    );
    const own = runtime("shared", {
      supportedModelFormats: [{ name: "sklearn" }],
      containers: [serverContainer("r/own:1")],
    });
    const obj = isvc({ predictor: sklearnModel({ runtime: "shared" }) });
    expect(containersOf(obj, snapshot(cluster))[0].image).toBe("r/cluster:1");
    expect(containersOf(obj, snapshot(cluster, own))[0].image).toBe("r/own:1");
  });

  it("a framework predictor (sklearn:) is the model of that format KServe's defaulting makes of it", () => {
    const obj = isvc({
      predictor: { sklearn: { storageUri: "gs://m", resources: { limits: { cpu: "3" } } } },
    });
    const [main] = containersOf(obj, snapshot(sklearnRuntime("sk", "r/sk:1")));
    expect(main).toMatchObject({
      image: "r/sk:1",
      resources: { limits: { cpu: "3", memory: "8Gi" } },
    });
  });

  it("no runtime known or none matching: the model's container left out and said; the predictor's own parts still judged", () => {
    const obj = isvc({
      predictor: {
        ...sklearnModel(),
        containers: [{ name: "logger", image: "ghcr.io/org/logger:1" }],
      },
    });
    const unknown = rolesOf(obj, snapshot());
    expect(unknown[0].template.spec.containers).toEqual([
      { name: "logger", image: "ghcr.io/org/logger:1" },
    ]);
    expect(unknown[0].notes?.join()).toMatch(
      /the model's container \(spec\.predictor\.model, model format sklearn\) is not judged at apply: the cluster snapshot holds no ServingRuntime/,
    );
    // Runtimes known (a ClusterServingRuntime in the snapshot), none for this format.
    const none = rolesOf(
      obj,
      snapshot(
        runtime(
          "tf",
          {
            supportedModelFormats: [{ name: "tensorflow", autoSelect: true }],
            containers: [serverContainer("r/tf:1")],
          },
          { kind: "ClusterServingRuntime" },
        ),
      ),
    );
    expect(none[0].notes?.join()).toMatch(
      /no ServingRuntime or ClusterServingRuntime supports model format sklearn with autoSelect/,
    );
    expect(
      chooseRuntime(
        snapshot(sklearnRuntime("sk", "r:1")),
        NS,
        { name: "sklearn" },
        "gone",
        undefined,
      ),
    ).toMatchObject({
      state: "none",
      reason: expect.stringContaining(
        "no ServingRuntime gone in namespace serving and no ClusterServingRuntime gone",
      ),
    });
    expect(chooseRuntime(undefined, NS, { name: "sklearn" }, undefined, undefined).state).toBe(
      "unknown",
    );
  });

  it("transformer and explainer are roles of their own; an explainer's built-in (art) container is said not judged", () => {
    const obj = isvc({
      predictor: { containers: [{ name: "p", image: "ghcr.io/org/p:1" }] },
      transformer: { minReplicas: 2, containers: [{ name: "t", image: "ghcr.io/org/t:1" }] },
      explainer: { art: { type: "SquareAttack" } },
    });
    const roles = rolesOf(obj);
    expect(roles.map(r => [r.name, r.pods, r.template.path])).toEqual([
      ["predictor", 1, "spec.predictor"],
      ["transformer", 2, "spec.transformer"],
      ["explainer", 1, "spec.explainer"],
    ]);
    expect(roles[2].notes?.join()).toContain(
      "spec.explainer.art's container comes from KServe's configuration",
    );
  });

  it("a malformed InferenceService gives fewer roles, never a throw", () => {
    for (const spec of [
      null,
      7,
      { predictor: "x" },
      { predictor: { containers: "no", model: { modelFormat: 3 } } },
    ])
      expect(() => rolesOf({ ...isvc({}), spec } as KubeObject, snapshot())).not.toThrow();
    expect(rolesOf({ ...isvc({}), spec: null } as unknown as KubeObject)).toEqual([]);
  });
});

describe("judged at apply, every area", () => {
  const gpuModel = (minReplicas: number, maxReplicas?: number) =>
    isvc({
      predictor: {
        minReplicas,
        ...(maxReplicas ? { maxReplicas } : {}),
        ...sklearnModel({ resources: { limits: { "nvidia.com/gpu": "4" } } }),
      },
      transformer: {
        containers: [{ name: "t", image: "ghcr.io/org/t:1", resources: { limits: { cpu: "1" } } }],
      },
    });

  it("over quota: denied with the per-role totals, minReplicas named as the field to lower", async () => {
    const r = await judge(
      gpuModel(3),
      snapshot(
        sklearnRuntime("sk", "ghcr.io/kserve/sk:1"),
        quota({ "requests.nvidia.com/gpu": "8" }),
      ),
    );
    expect(r.allowed).toBe(false);
    const denial = r.denials.join("\n");
    expect(denial).toContain("InferenceService serving/iris exceeds the namespace quota");
    expect(denial).toContain("its pods ask 12 at once (predictor: 3 × 4)");
    expect(denial).toContain("lower spec.predictor.minReplicas from 3 to at most 2");
    // Its components scale apart: no gang to start together, nothing for Kueue to queue whole.
    expect(denial).toContain("its components' pods are created when it is applied");
    expect(denial).not.toContain("start together");
    expect(denial).not.toContain("Kueue");
  });

  it("within quota at minReplicas but not at maxReplicas: admitted with the growth warning", async () => {
    const r = await judge(
      gpuModel(2, 4),
      snapshot(
        sklearnRuntime("sk", "ghcr.io/kserve/sk:1"),
        quota({ "requests.nvidia.com/gpu": "8" }),
      ),
    );
    expect(r.allowed).toBe(true);
    expect(r.warnings.join("\n")).toMatch(
      /can outgrow quota compute when it scales: requests\.nvidia\.com\/gpu up to 16 at maxReplicas, 8 left/,
    );
  });

  it("no runtime known: no false denial, the model's GPUs not counted, the warning says so", async () => {
    const r = await judge(gpuModel(3), snapshot(quota({ "requests.nvidia.com/gpu": "8" })));
    expect(r.allowed).toBe(true);
    expect(r.warnings.join("\n")).toContain(
      "admission-guard/workloads: InferenceService serving/iris: the model's container (spec.predictor.model",
    );
  });

  it("the runtime's image from a registry not allowed: denied, the model's image field named as the fix", async () => {
    const settings = parseSettings({ registries: { allowed: ["ghcr.io"] } });
    const r = await judge(
      isvc({ predictor: sklearnModel() }),
      snapshot(sklearnRuntime("sk", "quay.io/kserve/sk:1")),
      settings,
    );
    expect(r.allowed).toBe(false);
    const v = r.violations.find(v => v.capability === "image-registry")!;
    expect(v.message).toContain('container "kserve-container" image "quay.io/kserve/sk:1"');
    expect(v.fix).toContain("in spec.predictor.model.image");
    expect(v.fix).not.toContain("spec.predictor.spec.");
  });

  it("a runtime's other container named as the runtime's; a transformer's inline container as its own field", async () => {
    const settings = parseSettings({ registries: { allowed: ["ghcr.io"] } });
    const rt = runtime("sk", {
      supportedModelFormats: [{ name: "sklearn", autoSelect: true }],
      containers: [
        serverContainer("ghcr.io/kserve/sk:1"),
        { name: "agent", image: "quay.io/x/agent:1" },
      ],
    });
    const obj = isvc({
      predictor: sklearnModel(),
      transformer: { containers: [{ name: "t", image: "docker.io/x/t:1" }] },
    });
    const r = await judge(obj, snapshot(rt), settings);
    const messages = r.violations
      .filter(v => v.capability === "image-registry")
      .map(v => v.fix)
      .join("\n");
    expect(messages).toContain("spec.predictor runtime ServingRuntime/sk spec.containers[1].image");
    expect(messages).toContain("spec.transformer.containers[0].image");
  });

  it("the securityContext fix is simulated on the built pods and said as what they will get, at the InferenceService's fields; the object is not changed", async () => {
    const obj = isvc({ predictor: sklearnModel() });
    const r = await judge(obj, snapshot(sklearnRuntime("sk", "ghcr.io/kserve/sk:1")));
    expect(r.allowed).toBe(true);
    const pending = r.warnings.find(w =>
      w.startsWith("admission-guard/security-context: its pods will get"),
    )!;
    expect(pending).toContain("spec.predictor.securityContext.runAsNonRoot=true");
    expect(pending).toContain(
      "spec.predictor.model.securityContext.allowPrivilegeEscalation=false",
    );
    expect(pending).toContain("(when InferenceService creates them)");
    expect(r.object).toEqual(obj);
  });

  it("a privileged inline predictor is denied, its field named", async () => {
    const obj = isvc({
      predictor: {
        containers: [
          { name: "p", image: "ghcr.io/org/p:1", securityContext: { privileged: true } },
        ],
      },
    });
    const r = await judge(obj, snapshot());
    expect(r.allowed).toBe(false);
    expect(r.violations.find(v => v.rule === "privileged")?.fix).toContain(
      "spec.predictor.containers[0].securityContext.privileged",
    );
  });

  it("with workloads.mutate the InferenceService is still not changed in place: its pods get the fixes when created", async () => {
    const settings = parseSettings({ workloads: { mutate: true } });
    const obj = isvc({ predictor: { containers: [{ name: "p", image: "ghcr.io/org/p:1" }] } });
    const r = await judge(obj, snapshot(), settings);
    expect(r.object).toEqual(obj);
    expect(r.warnings.join("\n")).toContain("(when InferenceService creates them)");
  });

  it("an UPDATE is judged on what it adds: one more replica over a full quota denied, a scale-down allowed", async () => {
    const cluster = snapshot(
      sklearnRuntime("sk", "ghcr.io/kserve/sk:1"),
      quota({ "requests.nvidia.com/gpu": "8" }, { "requests.nvidia.com/gpu": "8" }),
    );
    const stored = gpuModel(2);
    const up = await judge(gpuModel(3), cluster, defaultSettings(), {
      operation: "UPDATE",
      oldObject: stored,
    });
    expect(up.allowed).toBe(false);
    expect(up.denials.join()).toContain("the update adds 4");
    const down = await judge(gpuModel(1), cluster, defaultSettings(), {
      operation: "UPDATE",
      oldObject: stored,
    });
    expect(down.allowed).toBe(true);
  });

  it("the fixture pair (an InferenceService and its ServingRuntime) as check reads them", async () => {
    const r = await judge(
      fixture("inferenceservice.yaml"),
      new SnapshotCluster([
        { apiVersion: "v1", kind: "Namespace", metadata: { name: "ml-gang" } },
        fixture("servingruntime.yaml"),
        {
          ...quota({ "requests.nvidia.com/gpu": "8" }),
          metadata: { name: "gpus", namespace: "ml-gang" },
        },
      ]),
    );
    expect(r.allowed).toBe(false);
    expect(r.denials.join()).toContain("(predictor: 2 × 8)");
  });
});

describe("the runtimes as cached", () => {
  it("the projection keeps what the pod build reads, not status or bookkeeping", () => {
    const full = {
      ...sklearnRuntime("sk", "r:1"),
      metadata: {
        name: "sk",
        namespace: NS,
        managedFields: [{ manager: "kubectl" }],
        annotations: { big: "x".repeat(1000) },
      },
      spec: {
        ...(sklearnRuntime("sk", "r:1").spec as object),
        builtInAdapter: { serverType: "mlserver" },
        grpcEndpoint: "port:8085",
      },
      status: { anything: true },
    };
    const kept = servingRuntimeAsRead(full as never) as KubeObject;
    expect(kept.metadata).toEqual({ name: "sk", namespace: NS });
    expect(Object.keys(kept.spec as object).sort()).toEqual([
      "containers",
      "supportedModelFormats",
    ]);
    expect(kept).not.toHaveProperty("status");
  });

  it("a cluster without KServe: not served is quiet and unknown, probed again; forbidden is said once", async () => {
    jest.useFakeTimers();
    try {
      const warnings: string[] = [];
      const log = { info: () => undefined, warn: (_: object, m: string) => void warnings.push(m) };
      let probes = 0;
      const caches = new ServingRuntimeCaches(log, {
        probe: async () => (probes++, false),
        probeEveryMs: 1000,
      });
      caches.start();
      await jest.advanceTimersByTimeAsync(2500);
      expect(probes).toBe(6); // two kinds, now and after 1 s and 2 s
      expect(warnings).toEqual([]);
      expect(caches.servingRuntimes(NS)).toBeUndefined();
      expect(caches.clusterServingRuntimes()).toBeUndefined();
      // No cache of it on /metrics: a cluster without KServe has none failing.
      expect(await valueOf(cacheSynced, { cache: "servingruntimes" })).toBeUndefined();
      caches.stop();
      const forbidden = new ServingRuntimeCaches(log, {
        probe: async () => {
          throw Object.assign(new Error("forbidden"), { status: 403 });
        },
        probeEveryMs: 1000,
      });
      forbidden.start();
      await jest.advanceTimersByTimeAsync(3500);
      expect(warnings).toHaveLength(2); // once per kind
      expect(warnings[0]).toContain("an InferenceService's model container is not judged at apply");
      forbidden.stop();
    } finally {
      jest.useRealTimers();
    }
  });

  it("a cluster with KServe: each kind served is watched, and on /metrics from then on", async () => {
    const caches = new ServingRuntimeCaches(undefined, {
      probe: async k => k === "ServingRuntime",
    });
    const started = jest.spyOn(caches.namespaced, "start").mockResolvedValue(undefined);
    caches.start();
    await new Promise(done => setImmediate(done));
    expect(started).toHaveBeenCalledTimes(1);
    expect(await valueOf(cacheSynced, { cache: "servingruntimes" })).toBe(0); // not listed yet
    caches.namespaced.synced = true;
    expect(await valueOf(cacheSynced, { cache: "servingruntimes" })).toBe(1);
    expect(await valueOf(cacheSynced, { cache: "clusterservingruntimes" })).toBeUndefined();
    caches.stop();
  });

  it("package.json pepr.rbac lets the module list and watch both kinds of runtime", async () => {
    const { pepr } = (await import("../../../package.json")).default as {
      pepr: { rbac: { apiGroups: string[]; resources: string[]; verbs: string[] }[] };
    };
    for (const resource of ["servingruntimes", "clusterservingruntimes"])
      for (const verb of ["list", "watch"])
        expect(
          pepr.rbac.some(
            r =>
              r.apiGroups.includes("serving.kserve.io") &&
              r.resources.includes(resource) &&
              r.verbs.includes(verb),
          ),
        ).toBe(true);
  });

  it("once listed, the cached projections are what the build reads", () => {
    const caches = new ServingRuntimeCaches(undefined, { probe: async () => false });
    caches.namespaced.apply(sklearnRuntime("sk", "r/sk:1") as never, "ADDED");
    expect(caches.servingRuntimes(NS)).toBeUndefined(); // not listed yet: not known
    caches.namespaced.synced = true;
    caches.clusterWide.synced = true;
    const view = {
      source: "live" as const,
      servingRuntimes: (ns: string) => caches.servingRuntimes(ns),
      clusterServingRuntimes: () => caches.clusterServingRuntimes(),
    };
    const [main] = inferenceServiceRoles(isvc({ predictor: sklearnModel() }), view, NS)[0].template
      .spec.containers;
    expect(main.image).toBe("r/sk:1");
  });
});

describe("a view that knows one kind of runtime only (ClusterServingRuntimes not served)", () => {
  const view = (runtimes: KubeObject[]) => ({
    source: "live" as const,
    servingRuntimes: () => runtimes,
    clusterServingRuntimes: () => undefined,
  });
  it("a namespace runtime decides when it is named or matches; else it is not known", () => {
    const rt = sklearnRuntime("sk", "r/sk:1");
    expect(chooseRuntime(view([rt]), NS, { name: "sklearn" }, "sk", undefined).state).toBe("found");
    expect(chooseRuntime(view([rt]), NS, { name: "sklearn" }, undefined, undefined).state).toBe(
      "found",
    );
    expect(chooseRuntime(view([rt]), NS, { name: "sklearn" }, "other", undefined).state).toBe(
      "unknown",
    );
    expect(chooseRuntime(view([]), NS, { name: "sklearn" }, undefined, undefined)).toMatchObject({
      state: "unknown",
      reason: expect.stringContaining(
        "the controller does not know the cluster's ServingRuntimes yet",
      ),
    });
  });
});

describe("check", () => {
  it("builds the model's container from a ServingRuntime in the manifests given, and from one in --cluster", async () => {
    const { readFileSync } = await import("node:fs");
    const { run, tempTree } = await import("../cli/check-helpers");
    const read = (f: string) => readFileSync(join(__dirname, "../../fixtures/ml", f), "utf8");
    const quotaYaml = [
      "apiVersion: v1",
      "kind: ResourceQuota",
      "metadata: {name: gpus, namespace: ml-gang}",
      'spec: {hard: {requests.nvidia.com/gpu: "32"}}',
      'status: {hard: {requests.nvidia.com/gpu: "32"}, used: {requests.nvidia.com/gpu: "0"}}',
    ].join("\n");
    const dir = tempTree({
      "apply/all.yaml": `${read("servingruntime.yaml")}\n---\n${read("inferenceservice.yaml")}`,
      "apply/isvc.yaml": read("inferenceservice.yaml"),
      "cluster/runtime.yaml": `${read("servingruntime.yaml")}\n---\n${quotaYaml}`,
      "cluster/quota.yaml": quotaYaml,
    });
    const argv = (input: string, cluster: string) => [
      "check",
      "-n",
      "ml-gang",
      "-o",
      "json",
      "--cluster",
      cluster,
      input,
    ];
    const notJudged = /the model's container \(spec\.predictor\.model/;
    // The runtime beside the InferenceService: its image is judged (the runtime's kserve-container).
    const together = await run(argv("apply/all.yaml", "cluster/quota.yaml"), {
      cwd: dir,
      policies,
    });
    const isvcOf = (r: { json: Record<string, unknown>[] }) =>
      r.json.find(j => j.kind === "InferenceService")!;
    expect(JSON.stringify(isvcOf(together))).toContain("vllm-server");
    expect(JSON.stringify(isvcOf(together))).not.toMatch(notJudged);
    // The runtime in the cluster snapshot.
    const fromCluster = await run(argv("apply/isvc.yaml", "cluster/runtime.yaml"), {
      cwd: dir,
      policies,
    });
    expect(JSON.stringify(isvcOf(fromCluster))).toContain("vllm-server");
    // Neither: said plainly.
    const alone = await run(argv("apply/isvc.yaml", "cluster/quota.yaml"), { cwd: dir, policies });
    expect(JSON.stringify(isvcOf(alone))).toMatch(notJudged);
    expect(alone.code).toBe(0);
  });
});
