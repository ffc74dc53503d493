// The payload-size rules' core conditions, one behaviour per group: where a limit starts to deny,
// what switches a check off, how an UPDATE compares with the stored version, what bytes are
// counted, and which parts a denial names.
import { SnapshotCluster } from "../../../lib/cluster/view";
import { answer, contextFor, review } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import { podTemplateOf } from "../../../lib/workload-kinds/built-in";
import { parseSettings, type SettingsInput } from "../../../lib/settings";
import { kindsInForce } from "../../../lib/workload-kinds/in-force";
import { workloadTargets } from "../../../lib/engine/targets";
import { helloPeprPolicy } from "../../../hello-pepr";
import { payloadSizePolicy } from "../../../capabilities/payload-size";
import { checkGangPayload, checkPayload } from "../../../capabilities/payload-size/rules";
import {
  annotationBytes,
  jsonBytes,
  storedForm,
  withoutPeprAnnotations,
} from "../../../capabilities/payload-size/measure";

const cluster = new SnapshotCluster([
  { kind: "Namespace", metadata: { name: "ml" } },
  { kind: "Namespace", metadata: { name: "pepr-demo" } },
]);
const settings = (payload: SettingsInput["payload"] = {}) => parseSettings({ payload });

type Extra = { operation?: "CREATE" | "UPDATE"; oldObject?: KubeObject };
const run = (obj: KubeObject, payload: SettingsInput["payload"] = {}, extra: Extra = {}) =>
  review([payloadSizePolicy], obj, { settings: settings(payload), cluster, ...extra });

/** The rule's own check on a Pod, as the engine calls it, without the engine's comparison. */
const checkPod = (pod: KubeObject, payload: SettingsInput["payload"], extra: Extra = {}) => {
  const s = settings(payload);
  const ctx = contextFor(pod, { settings: s, cluster, ...extra });
  return checkPayload(pod, { object: pod, template: podTemplateOf(pod)!, isTemplate: false }, ctx)
    .violations;
};

/** Bytes of the JSON text, counted here independently of the code under test. */
const textBytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value), "utf8");
const only = <V extends { rule: string }>(r: { violations: V[] }, rule: string) =>
  r.violations.filter(v => v.rule === rule);

/** The module's own Pepr annotations, as its mutating webhook adds them. */
const PEPR_UUID = "4473f691-a31f-4e7a-acc9-f7166d266bae";
const peprAnnotations = {
  [`${PEPR_UUID}.pepr.dev/payload-size`]: "succeeded",
  [`${PEPR_UUID}.pepr.dev/labels`]: "succeeded",
};

const configMap = (
  data: Record<string, string>,
  metadata: Record<string, unknown> = {},
): KubeObject => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name: "cfg", namespace: "ml", ...metadata },
  data,
});

const pod = (
  containers: Record<string, unknown>[],
  spec: Record<string, unknown> = {},
  metadata: Record<string, unknown> = {},
): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "trainer", namespace: "ml", ...metadata },
  spec: { containers, ...spec },
});

const deployment = (
  containers: Record<string, unknown>[],
  spec: Record<string, unknown> = {},
  annotations?: Record<string, string>,
): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "serve", namespace: "ml" },
  spec: {
    replicas: 1,
    selector: { matchLabels: { app: "serve" } },
    template: {
      metadata: { labels: { app: "serve" }, ...(annotations ? { annotations } : {}) },
      spec: { containers, ...spec },
    },
  },
});

const env = (n: number, valueBytes = 10) =>
  Array.from({ length: n }, (_, i) => ({ name: `VAR_${i}`, value: "v".repeat(valueBytes) }));
const envFrom = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ configMapRef: { name: `cfg-${i}` } }));
const mounts = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ name: `vol-${i}`, mountPath: `/etc/cfg-${i}` }));
const volumes = (n: number, nameBytes = 5) =>
  Array.from({ length: n }, (_, i) => ({
    name: `vol-${i}`,
    configMap: { name: `cfg-${i}-${"n".repeat(nameBytes)}` },
  }));

describe("limit boundaries: exactly at the limit is allowed, one over is denied", () => {
  it("object size: a ConfigMap of exactly maxObjectBytes passes, one byte smaller a limit denies", async () => {
    const cm = configMap({ "model.json": "m".repeat(5000) });
    const size = textBytes(cm);
    const at = await run(cm, { maxObjectBytes: size });
    expect(at.allowed).toBe(true);
    expect(at.violations).toEqual([]);

    const over = await run(cm, { maxObjectBytes: size - 1 });
    expect(over.allowed).toBe(false);
    const [v] = only(over, "object-too-large");
    expect(v.severity).toBeUndefined();
    expect(v.message).toContain(
      `ConfigMap ml/cfg is 4.9 KiB (${size.toLocaleString("en-US")} bytes)`,
    );
    expect(v.fix).toContain(
      "Admins: payload.maxObjectBytes (env ADMISSION_GUARD_PAYLOAD_MAX_OBJECT_BYTES)",
    );
  });

  it("annotations: a total of exactly maxAnnotationBytes passes, one byte over names the biggest first", async () => {
    // Kubernetes' count: bytes of keys plus values. "a": 1 + 1,000; "b": 1 + 3,000.
    const cm = configMap({}, { annotations: { a: "x".repeat(1000), b: "y".repeat(3000) } });
    const at = await run(cm, { maxAnnotationBytes: 4002, maxObjectBytes: 0 });
    expect(at.violations).toEqual([]);

    const over = await run(cm, { maxAnnotationBytes: 4001, maxObjectBytes: 0 });
    expect(over.allowed).toBe(false);
    const [v] = only(over, "annotations-too-large");
    expect(v.message).toContain(
      "metadata.annotations total 3.9 KiB (4,002 bytes of keys and values), over the limit of 3.9 KiB",
    );
    expect(v.message).toMatch(/biggest: "b", 2\.9 KiB; "a", 1,001 B$/);
    expect(v.fix).toContain("move large values out of metadata.annotations into a ConfigMap");
    expect(v.fix).toContain("Admins: payload.maxAnnotationBytes");
  });

  it("counts: as many env, envFrom, volumeMounts and volumes as the limit pass, one more of each is denied", async () => {
    const obj = (n: number) =>
      pod(
        [{ name: "app", image: "x", env: env(n), envFrom: envFrom(n), volumeMounts: mounts(n) }],
        {
          volumes: volumes(n),
        },
      );
    const limits = {
      maxEnvPerContainer: 3,
      maxEnvFromPerContainer: 3,
      maxVolumeMountsPerContainer: 3,
      maxVolumes: 3,
    };
    const at = await run(obj(3), limits);
    expect(at.violations).toEqual([]);

    const over = await run(obj(4), limits);
    expect(over.allowed).toBe(false);
    const byRule = Object.fromEntries(over.violations.map(v => [v.rule, v]));
    expect(Object.keys(byRule).sort()).toEqual([
      "too-many-env",
      "too-many-env-from",
      "too-many-volume-mounts",
      "too-many-volumes",
    ]);
    const envBytes = textBytes(env(4));
    expect(byRule["too-many-env"].message).toBe(
      `container "app" has 4 env entries (${envBytes} B), over the limit of 3`,
    );
    expect(byRule["too-many-env"].fix).toContain("payload.maxEnvPerContainer");
    expect(byRule["too-many-env-from"].message).toBe(
      'container "app" has 4 envFrom sources, over the limit of 3',
    );
    expect(byRule["too-many-env-from"].fix).toContain(
      "merge the ConfigMaps and Secrets in spec.containers[0].envFrom into fewer ones",
    );
    expect(byRule["too-many-env-from"].fix).toContain("payload.maxEnvFromPerContainer");
    expect(byRule["too-many-volume-mounts"].message).toBe(
      'container "app" has 4 volumeMounts, over the limit of 3',
    );
    expect(byRule["too-many-volume-mounts"].fix).toContain(
      "instead of many single files in spec.containers[0].volumeMounts",
    );
    expect(byRule["too-many-volume-mounts"].fix).toContain("payload.maxVolumeMountsPerContainer");
    expect(byRule["too-many-volumes"].message).toBe(
      `spec.volumes has 4 volumes (${textBytes(volumes(4))} B), over the limit of 3`,
    );
    expect(byRule["too-many-volumes"].fix).toContain(
      "one projected volume (spec.volumes[].projected.sources)",
    );
    expect(byRule["too-many-volumes"].fix).toContain(
      "payload.maxVolumes (env ADMISSION_GUARD_PAYLOAD_MAX_VOLUMES)",
    );
  });
});

describe("a limit of 0 turns its check off; payload.enabled: false turns them all off", () => {
  const huge = () =>
    pod(
      [
        {
          name: "app",
          image: "x",
          env: env(40, 100),
          envFrom: envFrom(40),
          volumeMounts: mounts(40),
        },
      ],
      {
        volumes: [
          ...volumes(40),
          {
            name: "merged",
            projected: { sources: [{ secret: { name: "a" } }, { configMap: { name: "b" } }] },
          },
        ],
      },
      { annotations: { note: "n".repeat(5000) } },
    );

  it("every limit at 0: nothing is measured against it", async () => {
    const r = await run(huge(), {
      maxObjectBytes: 0,
      maxAnnotationBytes: 0,
      maxEnvPerContainer: 0,
      maxEnvFromPerContainer: 0,
      maxVolumeMountsPerContainer: 0,
      maxVolumes: 0,
      maxProjectedSources: 0,
    });
    expect(r.allowed).toBe(true);
    expect(r.violations).toEqual([]);
    // The same pod against limits of 1 (the test above could fail).
    const one = await run(huge(), {
      maxObjectBytes: 1,
      maxAnnotationBytes: 1,
      maxEnvPerContainer: 1,
      maxEnvFromPerContainer: 1,
      maxVolumeMountsPerContainer: 1,
      maxVolumes: 1,
      maxProjectedSources: 1,
    });
    expect(one.violations.map(v => v.rule).sort()).toEqual([...payloadSizePolicy.rules].sort());
  });

  it("switched off, each of its seven rules is reported as not evaluated, naming the setting", async () => {
    const p = { ...huge(), metadata: { name: "p", namespace: "pepr-demo" } };
    const off = settings({ enabled: false, maxObjectBytes: 1 });
    const policies = [payloadSizePolicy, helloPeprPolicy];
    const r = await answer(
      { object: p, operation: "CREATE", dryRun: false },
      { settings: off, cluster, policies },
      policies,
    );
    expect(r.violations).toEqual([]);
    expect(r.judgedBy.map(x => x.name)).toEqual([helloPeprPolicy.name]);
    const reason = "payload-size is switched off (settings payload.enabled: false)";
    expect(r.skipped).toEqual(
      [
        "object-too-large",
        "annotations-too-large",
        "too-many-env",
        "too-many-env-from",
        "too-many-volumes",
        "too-many-projected-sources",
        "too-many-volume-mounts",
      ].map(rule => ({ capability: "payload-size", rule, reason })),
    );
  });

  it("switched off, the engine runs none of its checks, on a Pod and on a gang", async () => {
    const off = { enabled: false, maxObjectBytes: 1, maxEnvPerContainer: 1, maxVolumes: 1 };
    for (const object of [huge(), pytorchJob(100)]) {
      const r = await review([payloadSizePolicy], object, { settings: settings(off), cluster });
      expect([r.allowed, r.violations, r.judgedBy, r.handled]).toEqual([true, [], [], false]);
    }
    expect(checkPod(huge(), { ...off, enabled: true }).length).toBeGreaterThan(0);

    const job = pytorchJob(100);
    const s = settings(off);
    const roles = workloadTargets(job, kindsInForce(s.workloads));
    expect(roles).toHaveLength(2);
    const on = settings({ ...off, enabled: true });
    expect(
      checkGangPayload(job, roles, contextFor(job, { settings: on, cluster })).violations.map(
        v => v.rule,
      ),
    ).toEqual(["object-too-large"]);
  });
});

function pytorchJob(envValueBytes: number): KubeObject {
  const template = (name: string, bytes: number) => ({
    metadata: { labels: { app: "llama" } },
    spec: {
      containers: [
        { name, image: "ghcr.io/org/train:1", env: [{ name: "CONFIG", value: "c".repeat(bytes) }] },
      ],
    },
  });
  return {
    apiVersion: "kubeflow.org/v1",
    kind: "PyTorchJob",
    metadata: { name: "llama", namespace: "ml" },
    spec: {
      pytorchReplicaSpecs: {
        Master: { replicas: 1, template: template("master", envValueBytes) },
        Worker: { replicas: 4, template: template("worker", envValueBytes * 3) },
      },
    },
  };
}

describe("an UPDATE that did not grow only warns, one that grew denies", () => {
  it("object size: the same number of bytes warns, one byte more denies (a ConfigMap)", async () => {
    const stored = configMap({ weights: "a".repeat(3000) });
    const limit = { maxObjectBytes: 2000 };
    const same = await run(configMap({ weights: "b".repeat(3000) }), limit, {
      operation: "UPDATE",
      oldObject: stored,
    });
    expect(same.allowed).toBe(true);
    const [warned] = only(same, "object-too-large");
    expect(warned.severity).toBe("warn");
    expect(warned.message).toContain("(no bigger than the stored version, so allowed)");

    const grown = await run(configMap({ weights: "b".repeat(3001) }), limit, {
      operation: "UPDATE",
      oldObject: stored,
    });
    expect(grown.allowed).toBe(false);
    expect(only(grown, "object-too-large")[0].severity).toBeUndefined();
  });

  it("annotations: growth is seen when both versions carry Pepr's annotations, which neither counts", async () => {
    const limit = { maxAnnotationBytes: 1000, maxObjectBytes: 0 };
    const stored = configMap({}, { annotations: { ...peprAnnotations, note: "a".repeat(2000) } });
    const grown = await run(
      configMap({}, { annotations: { ...peprAnnotations, note: "a".repeat(2030) } }),
      limit,
      { operation: "UPDATE", oldObject: stored },
    );
    expect(grown.allowed).toBe(false);
    expect(only(grown, "annotations-too-large")[0].severity).toBeUndefined();
    const same = await run(
      configMap({}, { annotations: { ...peprAnnotations, note: "b".repeat(2000) } }),
      limit,
      { operation: "UPDATE", oldObject: stored },
    );
    expect(same.allowed).toBe(true);
    expect(only(same, "annotations-too-large")[0].severity).toBe("warn");
  });

  it("a workload's env and volumes: the same counts with bigger values warn, one more denies", async () => {
    const limits = { maxEnvPerContainer: 3, maxVolumes: 3, maxObjectBytes: 0 };
    const stored = deployment([{ name: "web", image: "x:1", env: env(4, 10) }], {
      volumes: volumes(4, 5),
    });
    // Same counts, longer values: the messages differ from the stored version's, so they stand.
    const same = await run(
      deployment([{ name: "web", image: "x:2", env: env(4, 20) }], { volumes: volumes(4, 50) }),
      limits,
      { operation: "UPDATE", oldObject: stored },
    );
    expect(same.allowed).toBe(true);
    expect(same.violations.map(v => [v.rule, v.severity]).sort()).toEqual([
      ["too-many-env", "warn"],
      ["too-many-volumes", "warn"],
    ]);

    const more = await run(
      deployment([{ name: "web", image: "x:2", env: env(5, 10) }], { volumes: volumes(5, 5) }),
      limits,
      { operation: "UPDATE", oldObject: stored },
    );
    expect(more.allowed).toBe(false);
    expect(more.violations.map(v => [v.rule, v.severity]).sort()).toEqual([
      ["too-many-env", undefined],
      ["too-many-volumes", undefined],
    ]);

    // A container the stored version did not have starts from none.
    const renamed = await run(
      deployment([{ name: "api", image: "x:2", env: env(4, 10) }], { volumes: volumes(4, 5) }),
      limits,
      { operation: "UPDATE", oldObject: stored },
    );
    expect(only(renamed, "too-many-env").map(v => v.severity)).toEqual([undefined]);
    expect(renamed.allowed).toBe(false);
  });

  it("per-container counts compare with the container of the same name, init containers too", () => {
    const limits = { maxEnvFromPerContainer: 2, maxVolumeMountsPerContainer: 2, maxObjectBytes: 0 };
    const spec = (n: number) =>
      pod([{ name: "app", image: "x", envFrom: envFrom(n), volumeMounts: mounts(n) }], {
        initContainers: [{ name: "fetch", image: "x", envFrom: envFrom(3) }],
      });
    const severities = (found: { rule: string; severity?: string; message: string }[]) =>
      found.map(v => `${v.rule} ${v.message.split(" has ")[0]} ${v.severity ?? "deny"}`).sort();

    const created = checkPod(spec(3), limits);
    expect(severities(created)).toEqual([
      'too-many-env-from container "app" deny',
      'too-many-env-from init container "fetch" deny',
      'too-many-volume-mounts container "app" deny',
    ]);
    const same = checkPod(spec(3), limits, { operation: "UPDATE", oldObject: spec(3) });
    expect(severities(same)).toEqual([
      'too-many-env-from container "app" warn',
      'too-many-env-from init container "fetch" warn',
      'too-many-volume-mounts container "app" warn',
    ]);
    const grown = checkPod(spec(4), limits, { operation: "UPDATE", oldObject: spec(3) });
    expect(severities(grown)).toEqual([
      'too-many-env-from container "app" deny',
      'too-many-env-from init container "fetch" warn',
      'too-many-volume-mounts container "app" deny',
    ]);
  });
});

describe("the stored form is measured without Pepr's annotations", () => {
  it("drops only the module's <uuid>.pepr.dev/ keys, and the map when Pepr made it", () => {
    const mixed = configMap({}, { annotations: { team: "ml", ...peprAnnotations } });
    expect(withoutPeprAnnotations(mixed).metadata).toEqual({
      name: "cfg",
      namespace: "ml",
      annotations: { team: "ml" },
    });
    expect(Object.keys(mixed.metadata!.annotations!)).toHaveLength(3); // the input is not changed

    const onlyPepr = configMap({}, { annotations: { ...peprAnnotations } });
    expect(withoutPeprAnnotations(onlyPepr).metadata).toEqual({ name: "cfg", namespace: "ml" });

    // Keys that merely contain a uuid, or are not Pepr's, are the user's and stay.
    const lookalike = configMap(
      {},
      { annotations: { [`example.com/${PEPR_UUID}.pepr.dev/x`]: "1", "pepr.dev/owner": "me" } },
    );
    expect(withoutPeprAnnotations(lookalike)).toBe(lookalike);
    const noMetadata = { kind: "ConfigMap", data: { a: "b" } } as KubeObject;
    expect(withoutPeprAnnotations(noMetadata)).toBe(noMetadata);
  });

  it("an object exactly at the limits stays allowed once Pepr has annotated it", async () => {
    const own = configMap({ a: "x".repeat(3000) }, { annotations: { team: "ml" } });
    const bare = configMap({ a: "x".repeat(3000) });
    const limits = (obj: KubeObject) => ({
      maxObjectBytes: textBytes(obj),
      maxAnnotationBytes: annotationBytes(obj.metadata!.annotations),
    });
    for (const obj of [own, bare]) {
      const annotated = {
        ...obj,
        metadata: {
          ...obj.metadata,
          annotations: { ...obj.metadata!.annotations, ...peprAnnotations },
        },
      };
      const r = await run(annotated, limits(obj));
      expect(r.violations).toEqual([]);
      // One byte less and the same object is denied (the test above could fail).
      const under = await run(annotated, { ...limits(obj), maxObjectBytes: textBytes(obj) - 1 });
      expect(under.violations.map(v => v.rule)).toEqual(["object-too-large"]);
      expect(under.violations[0].message).toContain(
        `(${textBytes(obj).toLocaleString("en-US")} bytes)`,
      );
    }
  });

  it("a Pod's annotations are counted once, without Pepr's", async () => {
    const annotations = { note: "n".repeat(2000), ...peprAnnotations };
    const r = await run(pod([{ name: "app", image: "x" }], {}, { annotations }), {
      maxAnnotationBytes: 1000,
      maxObjectBytes: 0,
    });
    const found = only(r, "annotations-too-large");
    expect(found).toHaveLength(1);
    expect(found[0].message).toContain("metadata.annotations total 1.9 KiB (2,004 bytes");
  });
});

describe("a Secret's data is measured as stored", () => {
  it("stringData joins data in base64, keeping the data keys; only for a Secret", () => {
    const secret: KubeObject = {
      kind: "Secret",
      metadata: { name: "s", namespace: "ml" },
      data: { cert: "Y2VydA==" },
      stringData: { token: "tok-é" },
    };
    expect(storedForm(secret)).toEqual({
      kind: "Secret",
      metadata: { name: "s", namespace: "ml" },
      data: { cert: "Y2VydA==", token: Buffer.from("tok-é", "utf8").toString("base64") },
    });
    // A stray stringData on another kind is not the API server's to merge: counted as sent.
    const cm = { ...configMap({ a: "b" }), stringData: { c: "d" } };
    expect(storedForm(cm)).toBe(cm);
    const noMetadata = { kind: "Secret", stringData: { k: "v" } } as KubeObject;
    expect(storedForm(noMetadata)).toEqual({ kind: "Secret", data: { k: "dg==" } });
  });

  it("a Secret at the limit in base64 passes, over it is denied with the Secret's own fix", async () => {
    const secret: KubeObject = {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "creds", namespace: "ml" },
      stringData: { "key.pem": "k".repeat(3000) },
    };
    const stored = textBytes({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "creds", namespace: "ml" },
      data: { "key.pem": Buffer.from("k".repeat(3000)).toString("base64") },
    });
    expect((await run(secret, { maxObjectBytes: stored })).violations).toEqual([]);
    const over = await run(secret, { maxObjectBytes: stored - 1 });
    const [v] = only(over, "object-too-large");
    expect(v.message).toContain(`(${stored.toLocaleString("en-US")} bytes)`);
    expect(v.message).toContain('biggest parts: data key "key.pem", 3.9 KiB');
    expect(v.fix).toContain("split the data across several Secrets");
  });

  it("annotation bytes count an empty value as nothing; JSON that cannot be written counts 0", () => {
    expect(annotationBytes({ flag: null, k: "" })).toBe(4 + 1);
    const loop: Record<string, unknown> = {};
    loop.self = loop;
    expect(jsonBytes(loop)).toBe(0);
    expect(jsonBytes(undefined)).toBe(0);
  });
});

describe("the biggest parts are named in order, at most three", () => {
  const partsOf = (message: string) => message.split("; biggest parts: ")[1];

  it("annotations, data and binaryData keys, biggest first, the fourth left out", async () => {
    const cm = configMap(
      { small: "s".repeat(500), big: "b".repeat(3000), tiny: "t" },
      { annotations: { note: "n".repeat(2000) } },
    );
    cm.binaryData = { "model.bin": "A".repeat(1500) };
    const r = await run(cm, { maxObjectBytes: 1000 });
    const [v] = only(r, "object-too-large");
    // Each part: its key and value as JSON ("big": 5 + 3,002 bytes).
    expect(partsOf(v.message)).toBe(
      'data key "big", 2.9 KiB; annotation "note", 1.9 KiB; binaryData key "model.bin", 1.4 KiB',
    );
  });

  it("a lone part is named alone: no managedFields or volumes that are not there", async () => {
    const r = await run(configMap({ blob: "b".repeat(2000) }), { maxObjectBytes: 1000 });
    expect(partsOf(only(r, "object-too-large")[0].message)).toBe('data key "blob", 1.9 KiB');

    const p = pod([
      { name: "app", image: "x", env: [{ name: "CONFIG", value: "c".repeat(3000) }] },
    ]);
    const single = await run(p, { maxObjectBytes: 1000 });
    expect(partsOf(only(single, "object-too-large")[0].message)).toMatch(
      /^container "app": 1 env entry, 2\.9 KiB$/,
    );
  });

  it("managedFields, containers without env and the pod's volumes are named with their sizes", async () => {
    const managedFields = [
      { manager: "kubectl", operation: "Update", fieldsV1: { f: "x".repeat(4000) } },
    ];
    const p = pod(
      [
        { name: "app", image: "x", args: ["a".repeat(2500)] },
        { name: "side", image: "y", env: env(2, 10) },
      ],
      { volumes: volumes(40, 50) },
      { managedFields },
    );
    const r = await run(p, { maxObjectBytes: 1000 });
    expect(partsOf(only(r, "object-too-large")[0].message)).toMatch(
      /^metadata\.managedFields, 3\.9 KiB; spec\.volumes: 40 volumes, 3\.\d KiB; container "app", 2\.4 KiB$/,
    );
  });

  it("a workload names its pod template's annotations, not the workload's as the pod's", async () => {
    const d = deployment([{ name: "web", image: "x" }], {}, { checksum: "c".repeat(3000) });
    const r = await run(d, { maxObjectBytes: 1000, maxAnnotationBytes: 0 });
    expect(partsOf(only(r, "object-too-large")[0].message)).toMatch(
      /^pod template annotation "checksum", 2\.9 KiB; container "web", \d+ B$/,
    );
    const p = pod(
      [{ name: "app", image: "x" }],
      {},
      { annotations: { checksum: "c".repeat(3000) } },
    );
    const own = await run(p, { maxObjectBytes: 1000, maxAnnotationBytes: 0 });
    expect(partsOf(only(own, "object-too-large")[0].message)).toMatch(
      /^annotation "checksum", 2\.9 KiB; container "app", \d+ B$/,
    );
  });

  it("server-side apply is suggested only when last-applied is among the three named", async () => {
    const lastApplied = "kubectl.kubernetes.io/last-applied-configuration";
    const withLastApplied = (bytes: number) =>
      configMap(
        { a: "a".repeat(3000), b: "b".repeat(2000), c: "c".repeat(1000) },
        { annotations: { [lastApplied]: "l".repeat(bytes) } },
      );
    const named = only(
      await run(withLastApplied(5000), { maxObjectBytes: 1000 }),
      "object-too-large",
    )[0];
    expect(named.fix).toContain(
      `apply with kubectl apply --server-side, which does not copy the object into the ${lastApplied} annotation; split the data across several ConfigMaps`,
    );
    const fourth = only(
      await run(withLastApplied(100), { maxObjectBytes: 1000 }),
      "object-too-large",
    )[0];
    expect(fourth.message).not.toContain(lastApplied);
    expect(fourth.fix).not.toContain("--server-side");
    expect(fourth.fix).toMatch(/^split the data across several ConfigMaps/);
  });

  it("a gang is measured once, as a whole, naming its role templates, not one role's containers", async () => {
    const r = await run(pytorchJob(300), { maxObjectBytes: 1000 });
    const found = only(r, "object-too-large");
    expect(found).toHaveLength(1);
    expect(found[0].message).toMatch(/^PyTorchJob ml\/llama is 1\.\d KiB/);
    expect(partsOf(found[0].message)).toMatch(
      /^role Worker \(spec\.pytorchReplicaSpecs\.Worker\.template\), 1(\.\d)? KiB; role Master \(spec\.pytorchReplicaSpecs\.Master\.template\), \d{3} B$/,
    );
  });

  it("an object without metadata is measured, not crashed on", () => {
    const cm = { apiVersion: "v1", kind: "ConfigMap", data: { a: "x".repeat(2000) } } as KubeObject;
    const ctx = contextFor(cm, { settings: settings({ maxObjectBytes: 1000 }), cluster });
    const found = checkPayload(cm, undefined, ctx).violations;
    expect(found.map(v => v.rule)).toEqual(["object-too-large"]);
    expect(partsOf(found[0].message)).toBe('data key "a", 1.9 KiB');
  });
});
