import { SnapshotCluster } from "../../../lib/cluster/view";
import { review } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import { parseSettings, type SettingsInput } from "../../../lib/settings";
import { formatViolation } from "../../../lib/objects/verdict";
import { payloadSizePolicy } from "../../../capabilities/payload-size";
import {
  annotationBytes,
  formatBytes,
  jsonBytes,
  storedForm,
  withThousands,
} from "../../../capabilities/payload-size/measure";

const cluster = new SnapshotCluster([{ kind: "Namespace", metadata: { name: "ml" } }]);
const settings = (payload: SettingsInput["payload"] = {}) => parseSettings({ payload });

const run = (
  obj: KubeObject,
  payload: SettingsInput["payload"] = {},
  extra: { operation?: "CREATE" | "UPDATE"; oldObject?: KubeObject } = {},
) => review([payloadSizePolicy], obj, { settings: settings(payload), cluster, ...extra });

const envOf = (n: number, valueBytes = 200) =>
  Array.from({ length: n }, (_, i) => ({ name: `VAR_${i}`, value: "x".repeat(valueBytes) }));

const pod = (containers: Record<string, unknown>[], spec: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "trainer", namespace: "ml" },
  spec: { containers, ...spec },
});

describe("sizes and numbers are printed for people", () => {
  it.each([
    [0, "0 B"],
    [812, "812 B"],
    [1024, "1 KiB"],
    [5300, "5.1 KiB"],
    [1024 * 1024, "1 MiB"],
    [1363149, "1.3 MiB"],
    [1.9 * 1024 * 1024, "1.9 MiB"],
    [1024 * 1024 + 1, "1 MiB"],
    [2000 * 1024 * 1024, "2,000 MiB"],
    [2 * 1024 * 1024 - 1, "1.9 MiB"],
  ])("%d bytes → %s", (n, text) => {
    // One decimal, truncated.
    expect(formatBytes(n)).toBe(text);
  });

  it("thousands separators", () => {
    expect(withThousands(4812)).toBe("4,812");
    expect(withThousands(1234567)).toBe("1,234,567");
    expect(withThousands(999)).toBe("999");
  });
});

describe("size accounting", () => {
  it("counts annotations as Kubernetes does: bytes of keys and values", () => {
    expect(annotationBytes({ a: "bc", é: "x" })).toBe(1 + 2 + 2 + 1);
    expect(annotationBytes(undefined)).toBe(0);
  });

  it("counts a Secret's stringData as the base64 data it becomes", () => {
    const raw = "y".repeat(3000);
    const secret = { kind: "Secret", metadata: { name: "s" }, stringData: { k: raw } };
    const stored = storedForm(secret);
    expect(stored.stringData).toBeUndefined();
    expect((stored.data as Record<string, string>).k).toBe(Buffer.from(raw).toString("base64"));
    expect(jsonBytes(stored)).toBeGreaterThan(4000);
    expect(secret.stringData.k).toBe(raw); // the input is not changed
  });

  it("jsonBytes counts UTF-8 bytes, not characters", () => {
    expect(jsonBytes("é")).toBe(4); // quotes + 2 bytes
  });
});

describe("object size", () => {
  it("denies a pod with 5,000 env entries, naming the container with its count and size", async () => {
    const obj = pod([
      { name: "trainer", image: "ghcr.io/ml/train:1", env: envOf(5000, 220) },
      { name: "sidecar", image: "ghcr.io/ml/side:1" },
    ]);
    expect(jsonBytes(obj)).toBeGreaterThan(1.1 * 1024 * 1024);
    const r = await run(obj);
    expect(r.allowed).toBe(false);
    const lines = r.violations.map(formatViolation);
    const size = lines.find(l => l.includes("object-too-large") || l.includes("serialized"))!;
    expect(size).toMatch(
      /^admission-guard\/payload-size: Pod ml\/trainer is 1\.\d MiB \([\d,]+ bytes\) serialized, over the limit of 1 MiB/,
    );
    expect(size).toMatch(/biggest parts: container "trainer": 5,000 env entries, 1\.\d MiB/);
    expect(size).toMatch(/Fix: move configuration into a ConfigMap referenced by envFrom/);
    const env = lines.find(l => l.includes("env entries ("))!;
    expect(env).toContain('container "trainer" has 5,000 env entries');
    expect(env).toContain("over the limit of 1,000");
    expect(env).toContain("spec.containers[0].envFrom[].configMapRef");
    expect(env).toContain("ADMISSION_GUARD_PAYLOAD_MAX_ENV_PER_CONTAINER");
  });

  it("denies a 1.9 MB ConfigMap naming its biggest keys", async () => {
    const cm: KubeObject = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "model", namespace: "ml" },
      data: { "weights.txt": "w".repeat(1_800_000), "small.txt": "s".repeat(100_000), x: "1" },
    };
    const r = await run(cm);
    expect(r.handled).toBe(true);
    expect(r.allowed).toBe(false);
    const line = formatViolation(r.violations[0]);
    expect(line).toContain("ConfigMap ml/model is 1.8 MiB (1,900,");
    expect(line).toMatch(
      /biggest parts: data key "weights\.txt", 1\.7 MiB; data key "small\.txt", 97\.\d KiB/,
    );
    expect(line).toMatch(/Fix: split the data across several ConfigMaps/);
  });

  it("denies a Secret counted in base64, and admits a small one", async () => {
    const big = Buffer.alloc(900_000, 1).toString("base64"); // 1.2 MB once encoded
    const r = await run({
      kind: "Secret",
      metadata: { name: "s", namespace: "ml" },
      data: { k: big },
    });
    expect(r.allowed).toBe(false);
    expect(r.violations[0].message).toContain('data key "k"');
    const ok = await run({
      kind: "Secret",
      metadata: { name: "s", namespace: "ml" },
      data: { k: "eA==" },
    });
    expect(ok.allowed).toBe(true);
  });

  it("names the last-applied annotation and suggests server-side apply", async () => {
    const cm: KubeObject = {
      kind: "ConfigMap",
      metadata: {
        name: "c",
        namespace: "ml",
        annotations: { "kubectl.kubernetes.io/last-applied-configuration": "z".repeat(600_000) },
      },
      data: { a: "z".repeat(600_000) },
    };
    const r = await run(cm);
    const size = r.violations.find(v => v.rule === "object-too-large")!;
    expect(size.fix).toContain("kubectl apply --server-side");
    const ann = r.violations.find(v => v.rule === "annotations-too-large")!;
    expect(ann.message).toContain("over the limit of 256 KiB");
  });

  it("an UPDATE that does not grow an oversize object only warns", async () => {
    const data = (n: number) => ({
      kind: "ConfigMap",
      metadata: { name: "c", namespace: "ml" },
      data: { a: "q".repeat(n) },
    });
    const smaller = await run(
      data(1_200_000),
      {},
      { operation: "UPDATE", oldObject: data(1_300_000) },
    );
    expect(smaller.allowed).toBe(true);
    expect(smaller.warnings.join("\n")).toContain("no bigger than the stored version");
    const bigger = await run(
      data(1_300_000),
      {},
      { operation: "UPDATE", oldObject: data(1_200_000) },
    );
    expect(bigger.allowed).toBe(false);
  });

  it("respects the setting, and 0 turns a limit off", async () => {
    const obj = pod([{ name: "c", image: "x", env: envOf(10, 2000) }]);
    expect((await run(obj, { maxObjectBytes: 10_000 })).allowed).toBe(false);
    expect((await run(obj, { maxObjectBytes: 0 })).allowed).toBe(true);
    expect((await run(obj, { enabled: false, maxObjectBytes: 10_000 })).allowed).toBe(true);
  });
});

describe("count limits", () => {
  it("envFrom, volumes and volumeMounts", async () => {
    const obj = pod(
      [
        {
          name: "app",
          image: "x",
          envFrom: Array.from({ length: 3 }, (_, i) => ({ configMapRef: { name: `c${i}` } })),
          volumeMounts: Array.from({ length: 3 }, (_, i) => ({
            name: `v${i}`,
            mountPath: `/m${i}`,
          })),
        },
      ],
      { volumes: Array.from({ length: 3 }, (_, i) => ({ name: `v${i}`, emptyDir: {} })) },
    );
    const r = await run(obj, {
      maxEnvFromPerContainer: 2,
      maxVolumes: 2,
      maxVolumeMountsPerContainer: 2,
    });
    expect(r.violations.map(v => v.rule).sort()).toEqual([
      "too-many-env-from",
      "too-many-volume-mounts",
      "too-many-volumes",
    ]);
    expect(r.violations.find(v => v.rule === "too-many-volumes")!.fix).toContain("projected");
    expect((await run(obj)).allowed).toBe(true);
  });

  it("checks workload templates with their field paths, and their pod annotations", async () => {
    const deploy: KubeObject = {
      kind: "Deployment",
      metadata: { name: "d", namespace: "ml" },
      spec: {
        template: {
          metadata: { annotations: { big: "b".repeat(300 * 1024) } },
          spec: { containers: [{ name: "w", image: "x", env: envOf(1200, 5) }] },
        },
      },
    };
    const r = await run(deploy);
    const rules = r.violations.map(v => v.rule).sort();
    expect(rules).toEqual(["annotations-too-large", "too-many-env"]);
    expect(r.violations.find(v => v.rule === "too-many-env")!.fix).toContain(
      "spec.template.spec.containers[0].envFrom",
    );
    expect(r.violations.find(v => v.rule === "annotations-too-large")!.message).toContain(
      "spec.template.metadata.annotations total 300",
    );
  });

  it("an UPDATE of a workload that does not add env entries only warns", async () => {
    const deploy = (n: number): KubeObject => ({
      kind: "Deployment",
      metadata: { name: "d", namespace: "ml" },
      spec: { template: { spec: { containers: [{ name: "w", image: "x", env: envOf(n, 5) }] } } },
    });
    const same = await run(deploy(1200), {}, { operation: "UPDATE", oldObject: deploy(1200) });
    expect(same.allowed).toBe(true);
    const more = await run(deploy(1300), {}, { operation: "UPDATE", oldObject: deploy(1200) });
    expect(more.allowed).toBe(false);
  });

  it("does not throw on malformed objects", async () => {
    for (const obj of [
      {
        kind: "Pod",
        metadata: { name: "p", namespace: "ml" },
        spec: { containers: "nope", volumes: 5 },
      },
      { kind: "ConfigMap", metadata: { name: "c", namespace: "ml", annotations: "x" }, data: [1] },
      { kind: "Secret", metadata: { name: "s", namespace: "ml" }, stringData: { a: 1 } },
    ] as KubeObject[]) {
      const r = await run(obj);
      expect(r.violations.filter(v => v.rule === "internal-error")).toEqual([]);
    }
  });
});
