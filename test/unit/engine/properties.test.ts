// Properties of every capability together (capabilities/index.ts `policies`), through the one
// engine (lib/engine review(), what the webhook and `check` run), over generated pods and
// workloads in namespaces of every mode: review never throws; a second review changes nothing;
// no field the user set is changed; the result is an object the Kubernetes schema of its kind
// accepts (kubernetes-models validators, plus unknown fields from the API's model metadata).
import fc from "fast-check";
import { CronJob, Job } from "kubernetes-models/batch/v1";
import { DaemonSet, Deployment, StatefulSet } from "kubernetes-models/apps/v1";
import { policies } from "../../../capabilities";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { review, type Review } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import { podTemplateOf } from "../../../lib/workload-kinds/built-in";
import { defaultSettings, NS_KEYS } from "../../../lib/settings";
import { assertValidPod, unknownFields } from "../security-context/support";

type Obj = Record<string, unknown>;

const NAMESPACES = ["ml-enforce", "ml-warn", "ml-audit", "ml-off", "ml-component"];
const namespace = (name: string, labels: Record<string, string>): KubeObject => ({
  apiVersion: "v1",
  kind: "Namespace",
  metadata: { name, labels },
});
const cluster = new SnapshotCluster([
  namespace("ml-enforce", {}),
  namespace("ml-warn", { [NS_KEYS.mode]: "warn" }),
  namespace("ml-audit", { [NS_KEYS.mode]: "audit" }),
  namespace("ml-off", { [NS_KEYS.mode]: "off" }),
  namespace("ml-component", { [NS_KEYS.requireComponent]: "trainer" }),
  {
    apiVersion: "v1",
    kind: "ResourceQuota",
    metadata: { name: "compute", namespace: "ml-enforce" },
    spec: { hard: { "requests.cpu": "8", "requests.memory": "16Gi", "limits.memory": "32Gi" } },
    status: { used: { "requests.cpu": "2", "requests.memory": "4Gi" } },
  } as KubeObject,
  {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name: "gpu-1" },
    status: { allocatable: { cpu: "16", memory: "64Gi", pods: "110" } },
  } as KubeObject,
]);
const ctx = { settings: defaultSettings(), cluster, operation: "CREATE" as const };

const opt = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
const quantity = fc.constantFrom("100m", "500m", "1", "2", "4", "16");
const memory = fc.constantFrom("128Mi", "1Gi", "8Gi", "64Gi");
const resources = fc.record(
  {
    requests: fc.record({ cpu: quantity, memory }, { requiredKeys: [] }),
    limits: fc.record({ cpu: quantity, memory }, { requiredKeys: [] }),
  },
  { requiredKeys: [] },
);
const securityContext = fc.record(
  {
    allowPrivilegeEscalation: fc.boolean(),
    privileged: fc.boolean(),
    readOnlyRootFilesystem: fc.boolean(),
    runAsNonRoot: fc.boolean(),
    runAsUser: fc.integer({ min: 0, max: 70000 }),
    capabilities: fc.record(
      { add: fc.subarray(["NET_BIND_SERVICE", "SYS_ADMIN"]), drop: fc.subarray(["ALL"]) },
      { requiredKeys: [] },
    ),
    seccompProfile: fc.constantFrom({ type: "RuntimeDefault" }, { type: "Unconfined" }),
  },
  { requiredKeys: [] },
);
const image = fc.constantFrom(
  "ghcr.io/run-llama/llama-index:latest",
  "openai/gpt4-inference:1.0",
  "private-registry.com/mlflow-train:latest",
  "nginx",
  "registry.k8s.io/pause@sha256:" + "a".repeat(64),
);
const env = fc.subarray([
  { name: "MODEL", value: "llama-3" },
  { name: "TOKEN", valueFrom: { secretKeyRef: { name: "hf-token", key: "token" } } },
]);
const container = fc.record(
  {
    image,
    resources: opt(resources),
    securityContext: opt(securityContext),
    env: opt(env),
    volumeMounts: opt(fc.subarray([{ name: "data", mountPath: "/data" }])),
  },
  { requiredKeys: ["image"] },
);
const labels = fc.dictionary(
  fc.constantFrom("app", "app.kubernetes.io/name", "app.kubernetes.io/component", "tier"),
  fc.constantFrom("gpt4", "trainer", "canary"),
);
const podSpec = fc.record(
  {
    containers: fc.array(container, { minLength: 1, maxLength: 3 }),
    initContainers: opt(fc.array(container, { minLength: 1, maxLength: 2 })),
    serviceAccountName: opt(fc.constantFrom("trainer", "inference")),
    automountServiceAccountToken: opt(fc.boolean()),
    securityContext: opt(
      fc.record(
        { runAsNonRoot: fc.boolean(), runAsUser: fc.integer({ min: 0, max: 70000 }) },
        { requiredKeys: [] },
      ),
    ),
    volumes: opt(fc.constant([{ name: "data", emptyDir: {} }])),
  },
  { requiredKeys: ["containers"] },
);

/** Drops undefined keys and names containers uniquely: what a user would send. */
function clean(x: unknown): unknown {
  if (Array.isArray(x)) return x.map(clean);
  if (x && typeof x === "object")
    return Object.fromEntries(
      Object.entries(x)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => [k, clean(v)]),
    );
  return x;
}
function named(spec: Obj): Obj {
  const out = clean(spec) as Obj;
  for (const key of ["initContainers", "containers"])
    out[key] = (out[key] as Obj[] | undefined)?.map((c, i) => ({ name: `${key[0]}${i}`, ...c }));
  if (!out.initContainers) delete out.initContainers;
  // A mount needs its volume.
  const mounts = [...(out.containers as Obj[]), ...((out.initContainers as Obj[]) ?? [])].some(
    c => c.volumeMounts,
  );
  if (mounts) out.volumes = [{ name: "data", emptyDir: {} }];
  return out;
}

const pod = fc.record({ ns: fc.constantFrom(...NAMESPACES), labels, spec: podSpec }).map(
  ({ ns, labels, spec }): KubeObject => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "p", namespace: ns, labels },
    spec: named(spec),
  }),
);

const WORKLOADS: Record<string, { apiVersion: string; validate: (o: KubeObject) => void }> = {
  Deployment: { apiVersion: "apps/v1", validate: o => new Deployment(o as never).validate() },
  StatefulSet: { apiVersion: "apps/v1", validate: o => new StatefulSet(o as never).validate() },
  DaemonSet: { apiVersion: "apps/v1", validate: o => new DaemonSet(o as never).validate() },
  Job: { apiVersion: "batch/v1", validate: o => new Job(o as never).validate() },
  CronJob: { apiVersion: "batch/v1", validate: o => new CronJob(o as never).validate() },
};

const workload = fc
  .record({
    kind: fc.constantFrom(...Object.keys(WORKLOADS)),
    ns: fc.constantFrom(...NAMESPACES),
    labels,
    spec: podSpec,
  })
  .map(({ kind, ns, labels, spec }): KubeObject => {
    const selectorLabels = { ...labels, "workload-id": "w" };
    const template = {
      metadata: { labels: selectorLabels },
      spec: {
        ...named(spec),
        ...(kind === "Job" || kind === "CronJob" ? { restartPolicy: "Never" } : {}),
      },
    };
    const selector = { matchLabels: { "workload-id": "w" } };
    const specOf: Record<string, Obj> = {
      Deployment: { selector, template },
      StatefulSet: { selector, template, serviceName: "w" },
      DaemonSet: { selector, template },
      Job: { template },
      CronJob: { schedule: "0 * * * *", jobTemplate: { spec: { template } } },
    };
    return {
      apiVersion: WORKLOADS[kind].apiVersion,
      kind,
      metadata: { name: "w", namespace: ns, labels },
      spec: specOf[kind],
    };
  });

/**
 * Every value the user set, by path. Lists of named things (containers, volumes, env, mounts) are
 * keyed by name, so that an entry added by a fix does not shift what the user wrote.
 */
function leaves(x: unknown, path = "", out = new Map<string, unknown>()): Map<string, unknown> {
  if (Array.isArray(x)) {
    const byName = x.every(e => e && typeof e === "object" && ("name" in e || "mountPath" in e));
    x.forEach((e, i) => {
      const key = byName ? String((e as Obj).name ?? (e as Obj).mountPath) : String(i);
      leaves(e, `${path}[${key}]`, out);
    });
  } else if (x && typeof x === "object") {
    for (const [k, v] of Object.entries(x)) leaves(v, `${path}.${k}`, out);
  } else {
    out.set(path, x);
  }
  return out;
}

function expectUserFieldsKept(input: KubeObject, output: KubeObject) {
  const after = leaves(output);
  const changed = [...leaves(input)].filter(([path, value]) => after.get(path) !== value);
  expect(changed).toEqual([]);
}

function expectValid(result: Review) {
  const obj = result.object;
  if (obj.kind === "Pod") return assertValidPod(obj);
  WORKLOADS[obj.kind!].validate(obj);
  const template = podTemplateOf(obj)!;
  const unknown = unknownFields(template.spec, "V1PodSpec", "template.spec");
  expect(unknown).toEqual([]);
}

const RUNS = { numRuns: 150 };

describe.each([
  ["pods", pod],
  ["workloads", workload],
] as const)("every capability on generated %s (review, all policies)", (_what, objects) => {
  it("never fails inside: no rule throws on them (an internal error would deny)", async () => {
    await fc.assert(
      fc.asyncProperty(objects, async obj => {
        const result = await review(policies, obj, ctx);
        expect(result.violations.filter(v => v.rule === "internal-error")).toEqual([]);
      }),
      RUNS,
    );
  });

  it("is idempotent: reviewing the result again changes nothing", async () => {
    await fc.assert(
      fc.asyncProperty(objects, async obj => {
        const first = await review(policies, obj, ctx);
        const second = await review(policies, first.object, ctx);
        expect(second.changes).toEqual([]);
        expect(second.object).toEqual(first.object);
      }),
      RUNS,
    );
  });

  it("never changes a field the user set, and leaves the input untouched", async () => {
    await fc.assert(
      fc.asyncProperty(objects, async obj => {
        const copy = structuredClone(obj);
        const result = await review(policies, obj, ctx);
        expect(obj).toEqual(copy);
        expectUserFieldsKept(obj, result.object);
      }),
      RUNS,
    );
  });

  it("answers an object the Kubernetes schema of its kind accepts", async () => {
    await fc.assert(
      fc.asyncProperty(objects, async obj => {
        expectValid(await review(policies, obj, ctx));
      }),
      RUNS,
    );
  });
});
