// The security-context mutation: fills what restricted needs and the user left unset, nothing else.
import { securityContextPolicy } from "../../../capabilities/security-context";
import { evaluatePod } from "../../../capabilities/security-context/checks";
import { fixPodSecurity, scratchVolumeName } from "../../../capabilities/security-context/fix";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { review } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import { podTemplateOf } from "../../../lib/workload-kinds/built-in";
import { defaultSettings, parseSettings, type Settings } from "../../../lib/settings";
import { assertValidPod, unknownFields } from "./support";

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const settings = defaultSettings();
/** readOnlyRootFilesystem filled (off by default: Pod Security does not ask for it). */
const FILL = parseSettings({ securityContext: { readOnlyRootFilesystem: "fill" } });
const pod = (spec: Obj, metadata: Obj = { name: "p", namespace: "ml" }): Obj => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata,
  spec,
});
const fix = (p: Obj, s: Settings["securityContext"] = settings.securityContext) =>
  fixPodSecurity(podTemplateOf(p as KubeObject)!, s);
const violations = (p: Obj) =>
  evaluatePod(podTemplateOf(p as KubeObject)!)
    .filter(r => !r.allowed)
    .map(r => r.id);

/** Seed 002's minimal pod: nothing set. */
const seedPod = () =>
  pod({ containers: [{ name: "inference", image: "openai/gpt4-inference:latest" }] });

describe("fixing a pod with nothing set (seed 002)", () => {
  it("fills the pod and container fields, with the field path and value of each change", () => {
    const p = seedPod();
    const changes = fix(p);
    expect(changes.map(c => c.message)).toEqual([
      "spec.securityContext.runAsNonRoot=true",
      "spec.securityContext.runAsUser=1000",
      "spec.securityContext.runAsGroup=3000",
      'spec.securityContext.seccompProfile={"type":"RuntimeDefault"}',
      "spec.containers[0].securityContext.allowPrivilegeEscalation=false",
      'spec.containers[0].securityContext.capabilities.drop=["ALL"]',
    ]);
    // The rule says what it changed; the engine stamps the capability
    // (test/unit/engine/engine.test.ts).
    expect(changes.every(c => !("capability" in c))).toBe(true);
    expect(violations(p)).toEqual([]);
    expect(() => assertValidPod(p)).not.toThrow();
  });

  it("changes nothing the second time", () => {
    const p = seedPod();
    fix(p);
    const once = structuredClone(p);
    expect(fix(p)).toEqual([]);
    expect(p).toEqual(once);
  });

  it("puts readOnlyRootFilesystem on the container: seed 002's pod-level one is a field Kubernetes does not know", () => {
    const seedAfter = pod({
      securityContext: {
        runAsNonRoot: true,
        runAsUser: 1000,
        runAsGroup: 3000,
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
      },
      containers: [
        { name: "inference", image: "x", securityContext: { capabilities: { drop: ["ALL"] } } },
      ],
    });
    expect(unknownFields(seedAfter)).toEqual([
      "spec.securityContext.readOnlyRootFilesystem",
      "spec.securityContext.allowPrivilegeEscalation",
    ]);
    expect(() => assertValidPod(seedAfter)).toThrow(/readOnlyRootFilesystem/);
    fix(seedAfter, FILL.securityContext);
    // we never add unknown fields, and never remove the user's (validation is the API server's job)
    expect(unknownFields(seedAfter)).toHaveLength(2);
    expect(seedAfter.spec.containers[0].securityContext.readOnlyRootFilesystem).toBe(true);
  });
});

describe("explicit user values are left alone", () => {
  it("readOnlyRootFilesystem: false stays false, and no scratch volume is added", () => {
    const p = pod({
      containers: [{ name: "a", image: "x", securityContext: { readOnlyRootFilesystem: false } }],
    });
    fix(p, FILL.securityContext);
    expect(p.spec.containers[0].securityContext.readOnlyRootFilesystem).toBe(false);
    expect(p.spec.containers[0].volumeMounts).toBeUndefined();
    expect(p.spec.volumes).toBeUndefined();
  });

  it("runAsNonRoot: false and runAsUser: 0 stay, and validation denies them; a user chosen by the pod gets no group of ours", () => {
    const p = pod({
      securityContext: { runAsNonRoot: false, runAsUser: 0 },
      containers: [{ name: "a", image: "x" }],
    });
    fix(p);
    expect(p.spec.securityContext).toEqual({
      runAsNonRoot: false,
      runAsUser: 0,
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(violations(p)).toEqual(["runAsNonRoot", "runAsUser"]);
  });

  it("a privileged container, or one adding SYS_ADMIN, gets no allowPrivilegeEscalation (the API would reject the pair)", () => {
    const p = pod({
      containers: [
        { name: "priv", image: "x", securityContext: { privileged: true } },
        {
          name: "admin",
          image: "x",
          securityContext: { capabilities: { add: ["CAP_SYS_ADMIN"] } },
        },
        { name: "admin2", image: "x", securityContext: { capabilities: { add: ["SYS_ADMIN"] } } },
      ],
    });
    fix(p);
    for (const c of p.spec.containers)
      expect(c.securityContext.allowPrivilegeEscalation).toBeUndefined();
    expect(violations(p)).toEqual([
      "privileged",
      "allowPrivilegeEscalation",
      "capabilities_restricted",
    ]);
  });

  it("drop gains ALL next to what the user dropped; an add of NET_BIND_SERVICE is kept", () => {
    const p = pod({
      containers: [
        {
          name: "web",
          image: "x",
          securityContext: { capabilities: { add: ["NET_BIND_SERVICE"], drop: ["NET_RAW"] } },
        },
      ],
    });
    fix(p);
    expect(p.spec.containers[0].securityContext.capabilities).toEqual({
      add: ["NET_BIND_SERVICE"],
      drop: ["NET_RAW", "ALL"],
    });
    expect(violations(p)).toEqual([]);
  });

  it("no pod seccompProfile when every container sets its own; an explicit Unconfined is kept", () => {
    const own = pod({
      containers: [
        {
          name: "a",
          image: "x",
          securityContext: { seccompProfile: { type: "Localhost", localhostProfile: "a.json" } },
        },
      ],
    });
    fix(own);
    expect(own.spec.securityContext.seccompProfile).toBeUndefined();
    const unconfined = pod({
      containers: [
        { name: "a", image: "x", securityContext: { seccompProfile: { type: "Unconfined" } } },
        { name: "b", image: "x" },
      ],
    });
    fix(unconfined);
    expect(unconfined.spec.securityContext.seccompProfile).toEqual({ type: "RuntimeDefault" });
    expect(unconfined.spec.containers[0].securityContext.seccompProfile).toEqual({
      type: "Unconfined",
    });
    expect(violations(unconfined)).toEqual(["seccompProfile_restricted"]);
  });
});

describe("writable paths", () => {
  it("shares one volume across containers of every kind and skips paths a container already mounts", () => {
    const p = pod({
      initContainers: [{ name: "init", image: "x" }],
      containers: [
        { name: "a", image: "x" },
        { name: "b", image: "x", volumeMounts: [{ name: "mine", mountPath: "/tmp/" }] },
        { name: "c", image: "x", volumeMounts: [{ name: "mine", mountPath: "/var" }] },
      ],
      volumes: [{ name: "mine", emptyDir: {} }],
    });
    const s = parseSettings({
      securityContext: {
        readOnlyRootFilesystem: "fill",
        writablePaths: ["/tmp", "/var/cache/nginx/"],
      },
    });
    fix(p, s.securityContext);
    expect(p.spec.volumes.map((v: Obj) => v.name)).toEqual([
      "mine",
      "ag-writable-tmp",
      "ag-writable-var-cache-nginx",
    ]);
    const mounts = (c: Obj) => (c.volumeMounts ?? []).map((m: Obj) => `${m.name}:${m.mountPath}`);
    expect(mounts(p.spec.initContainers[0])).toEqual([
      "ag-writable-tmp:/tmp",
      "ag-writable-var-cache-nginx:/var/cache/nginx",
    ]);
    expect(mounts(p.spec.containers[1])).toEqual([
      "mine:/tmp/",
      "ag-writable-var-cache-nginx:/var/cache/nginx",
    ]);
    expect(mounts(p.spec.containers[2])).toEqual(["mine:/var", "ag-writable-tmp:/tmp"]);
    expect(() => assertValidPod(p)).not.toThrow();
  });

  it("never reuses a user's volume of another type that happens to have our name", () => {
    const p = pod({
      containers: [{ name: "a", image: "x" }],
      volumes: [{ name: "ag-writable-tmp", configMap: { name: "cm" } }],
    });
    fix(p, FILL.securityContext);
    expect(p.spec.volumes[1]).toEqual({ name: "ag-writable-tmp-2", emptyDir: {} });
    expect(p.spec.containers[0].volumeMounts).toEqual([
      { name: "ag-writable-tmp-2", mountPath: "/tmp" },
    ]);
  });

  it("a pod's volumes are read once however many of our names it takes and containers it has (hostile: linear, not quadratic)", () => {
    // Every candidate name taken by a user's volume of another type, and many containers to mount
    // into: the search used to read every volume for every name for every container.
    const taken = 300;
    let nameReads = 0;
    const volumes = Array.from({ length: taken }, (_, i) => {
      const volume = { configMap: { name: "cm" } } as Obj;
      const name = i === 0 ? "ag-writable-tmp" : `ag-writable-tmp-${i + 1}`;
      Object.defineProperty(volume, "name", {
        enumerable: true,
        get: () => (nameReads++, name),
      });
      return volume;
    });
    const containers = Array.from({ length: 300 }, (_, i) => ({ name: `c${i}`, image: "x" }));
    const p = pod({ containers, volumes });
    fix(p, FILL.securityContext);
    const ours = `ag-writable-tmp-${taken + 1}`;
    expect(p.spec.volumes.slice(taken)).toEqual([{ name: ours, emptyDir: {} }]);
    expect(
      p.spec.containers.every((c: Obj) => c.volumeMounts?.some((m: Obj) => m.name === ours)),
    ).toBe(true);
    // Read once each to index them (the old search read them ~27 million times).
    expect(nameReads).toBeLessThan(10 * taken);
  });

  it("makes volume names valid DNS labels, also for long or odd paths", () => {
    for (const path of ["/tmp", "/", "/Var/Log_Files", `/${"deep/".repeat(30)}x`]) {
      const name = scratchVolumeName(path);
      expect(name).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
      expect(name.length).toBeLessThanOrEqual(63);
    }
    expect(scratchVolumeName(`/${"a".repeat(80)}`)).not.toBe(
      scratchVolumeName(`/${"a".repeat(81)}`),
    );
  });
});

describe("pods the Linux fields do not apply to", () => {
  it("a Windows pod gets runAsNonRoot only: the API forbids the rest for spec.os.name=windows", () => {
    const p = pod({ os: { name: "windows" }, containers: [{ name: "iis", image: "x" }] });
    const changes = fix(p);
    expect(changes.map(c => c.message)).toEqual(["spec.securityContext.runAsNonRoot=true"]);
    expect(p.spec.containers[0]).toEqual({ name: "iis", image: "x" });
    expect(violations(p)).toEqual([]);
  });

  it("a pod in its own user namespace (hostUsers: false) is not forced to a UID: PSA exempts it", () => {
    const p = pod({ hostUsers: false, containers: [{ name: "a", image: "x" }] });
    fix(p);
    expect(p.spec.securityContext).toEqual({ seccompProfile: { type: "RuntimeDefault" } });
    expect(violations(p)).toEqual([]);
  });

  it("malformed pods are left alone, not crashed on", () => {
    for (const spec of [
      { containers: "x" },
      { securityContext: "x", containers: [{ name: "a", securityContext: 3, volumeMounts: "x" }] },
      {
        containers: [{ name: "a", securityContext: { capabilities: { drop: "ALL" } } }],
        volumes: {},
      },
    ]) {
      const p = pod(spec);
      expect(() => fix(p)).not.toThrow();
      expect(p.spec.securityContext === "x" || typeof p.spec.securityContext === "object").toBe(
        true,
      );
    }
    const p = pod({
      containers: [{ name: "a", securityContext: { capabilities: { drop: "ALL" } } }],
    });
    fix(p);
    expect(p.spec.containers[0].securityContext.capabilities.drop).toBe("ALL");
  });
});

describe("settings", () => {
  const cluster = new SnapshotCluster([]);
  it("mutate=false: no fix at all, and the unset fields are violations", async () => {
    const s = parseSettings({ securityContext: { mutate: false } });
    const r = await review([securityContextPolicy], seedPod(), { settings: s, cluster });
    expect(r.changes).toEqual([]);
    expect(r.allowed).toBe(false);
    expect(r.violations.map(v => v.rule)).toEqual([
      "allowPrivilegeEscalation",
      "runAsNonRoot",
      "seccompProfile_restricted",
      "capabilities_restricted",
    ]);
    expect(r.violations[0].message).toContain('container "inference"');
    expect(r.violations[0].fix).toContain(
      "spec.containers[0].securityContext.allowPrivilegeEscalation",
    );
  });

  it("enabled=false: neither fixes nor checks", async () => {
    const s = parseSettings({ securityContext: { enabled: false } });
    const p = seedPod();
    const r = await review([securityContextPolicy], p, { settings: s, cluster });
    expect(r.allowed).toBe(true);
    expect([r.changes, r.violations, r.judgedBy]).toEqual([[], [], []]);
    expect(r.object).toEqual(p);
    // Switched on, the same pod is fixed: the engine's switch, not the pod, made the difference.
    const on = await review([securityContextPolicy], p, { settings: parseSettings({}), cluster });
    expect(on.changes.length).toBeGreaterThan(0);
  });

  it("runAsUser and runAsGroup come from the settings", () => {
    const s = parseSettings({ securityContext: { runAsUser: 2000, runAsGroup: 0 } });
    const p = seedPod();
    fix(p, s.securityContext);
    expect(p.spec.securityContext).toMatchObject({ runAsUser: 2000, runAsGroup: 0 });
  });

  it("a Pod UPDATE that leaves the spec alone is not re-judged", async () => {
    const old = seedPod();
    const updated = { ...structuredClone(old), metadata: { ...old.metadata, labels: { a: "b" } } };
    const r = await review([securityContextPolicy], updated, {
      settings,
      cluster,
      operation: "UPDATE",
      oldObject: old as KubeObject,
    });
    expect(r.violations).toEqual([]);
  });
});
