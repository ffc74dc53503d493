// The securityContext fix follows the image it fixes (capabilities/security-context/image-user.ts):
// the decision table (image user × HOME × volumes), several containers, idempotence, Windows,
// readOnlyRootFilesystem on request, and the warnings the check gives, through the one engine.
import { policies } from "../../../capabilities";
import { fixPodSecurity } from "../../../capabilities/security-context/fix";
import {
  identityFor,
  imageUserOf,
  type ImageUser,
} from "../../../capabilities/security-context/image-user";
import { imageWarning } from "../../../capabilities/security-context/policy";
import {
  SnapshotCluster,
  type ImageLookup,
  type Platform,
  type PullSecrets,
} from "../../../lib/cluster/view";
import { review } from "../../../lib/engine";
import type { ImageRef } from "../../../lib/objects/image-reference";
import type { KubeObject } from "../../../lib/objects/pod";
import { podTemplateOf } from "../../../lib/workload-kinds/built-in";
import { defaultSettings, parseSettings } from "../../../lib/settings";

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const settings = defaultSettings().securityContext;
const known = (user: string, extra: { workingDir?: string; home?: string } = {}): ImageLookup => ({
  state: "known",
  config: { digest: "sha256:x", user, workingDir: extra.workingDir ?? "", home: extra.home },
});
const userOf = (user: string, extra?: { workingDir?: string; home?: string }) =>
  imageUserOf("img", known(user, extra));
const UNKNOWN: ImageUser = { kind: "unknown", image: "img", reason: "offline" };

const pod = (spec: Obj): Obj => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p", namespace: "ml" },
  spec,
});
const onePod = (container: Obj = {}, spec: Obj = {}) =>
  pod({ containers: [{ name: "main", image: "img", ...container }], ...spec });

/** Fixes the pod with each container's image user given in order (init containers first). */
function fix(p: Obj, users: ImageUser[], s = settings, readOnlyRoot?: "off" | "fill") {
  const template = podTemplateOf(p as KubeObject)!;
  const containers = [...(p.spec.initContainers ?? []), ...(p.spec.containers ?? [])];
  const map = new Map(containers.map((c, i) => [c, users[i] ?? UNKNOWN]));
  return fixPodSecurity(template, s, { users: map, readOnlyRoot });
}

describe("the image's User", () => {
  it.each([
    ["", { kind: "root" }],
    ["root", { kind: "root" }],
    ["0", { kind: "root" }],
    ["0:0", { kind: "root" }],
    ["1001", { kind: "numeric", uid: 1001, gid: undefined }],
    ["1001:1001", { kind: "numeric", uid: 1001, gid: 1001 }],
    ["1001:app", { kind: "numeric", uid: 1001, gid: undefined }],
    ["app", { kind: "named", name: "app" }],
    ["app:app", { kind: "named", name: "app" }],
  ])("%j reads as %j", (user, expected) => {
    expect(userOf(user)).toMatchObject(expected);
  });

  it("HOME comes from the image's Env; unknown keeps the reason", () => {
    expect(userOf("", { home: "/root" })).toMatchObject({ home: "/root" });
    expect(imageUserOf("img", { state: "unknown", reason: "HTTP 500" })).toEqual({
      kind: "unknown",
      image: "img",
      reason: "HTTP 500",
    });
  });

  it("decides who runs it", () => {
    expect(identityFor(userOf("1001:1001"), settings)).toEqual({
      uid: 1001,
      gid: 1001,
      fromImage: true,
      needsHome: false,
    });
    expect(identityFor(userOf(""), settings)).toEqual({
      uid: 1000,
      gid: 3000,
      fromImage: false,
      needsHome: true,
    });
    expect(identityFor(userOf("ml"), settings)).toEqual({
      uid: 1000,
      gid: 3000,
      fromImage: false,
      needsHome: true,
    });
    expect(identityFor(UNKNOWN, settings)).toEqual({
      uid: 1000,
      gid: 3000,
      fromImage: false,
      needsHome: false,
    });
  });
});

describe("the decision table", () => {
  it("a numeric non-root image keeps its own user: no group of ours, no HOME, no scratch volume", () => {
    const p = onePod();
    fix(p, [userOf("1001", { workingDir: "/app" })]);
    expect(p.spec.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 1001,
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(p.spec.containers[0].env).toBeUndefined();
    expect(p.spec.volumes).toBeUndefined();
  });

  it("a numeric user:group keeps both", () => {
    const p = onePod();
    fix(p, [userOf("1001:1001")]);
    expect(p.spec.securityContext).toMatchObject({ runAsUser: 1001, runAsGroup: 1001 });
  });

  it.each([[""], ["root"], ["ml"]])(
    "an image whose user is %j runs as the configured UID with a writable HOME",
    user => {
      const p = onePod();
      const changes = fix(p, [userOf(user)]);
      expect(p.spec.securityContext).toMatchObject({ runAsUser: 1000, runAsGroup: 3000 });
      expect(p.spec.containers[0].env).toEqual([{ name: "HOME", value: "/home/workload" }]);
      expect(p.spec.containers[0].volumeMounts).toEqual([
        { name: "ag-writable-home-workload", mountPath: "/home/workload" },
      ]);
      expect(p.spec.volumes).toEqual([{ name: "ag-writable-home-workload", emptyDir: {} }]);
      expect(changes.filter(c => c.rule === "writableHome").map(c => c.message)).toEqual([
        'spec.containers[0].env[0]={"name":"HOME","value":"/home/workload"}',
        'spec.volumes[0]={"name":"ag-writable-home-workload","emptyDir":{}}',
        'spec.containers[0].volumeMounts[0]={"name":"ag-writable-home-workload","mountPath":"/home/workload"}',
      ]);
    },
  );

  it("HOME set by the container or by the image config is never replaced", () => {
    const inSpec = onePod({ env: [{ name: "HOME", value: "/data" }] });
    fix(inSpec, [userOf("")]);
    expect(inSpec.spec.containers[0].env).toEqual([{ name: "HOME", value: "/data" }]);
    expect(inSpec.spec.volumes).toBeUndefined();
    const inImage = onePod();
    fix(inImage, [userOf("", { home: "/opt/home" })]);
    expect(inImage.spec.containers[0].env).toBeUndefined();
  });

  it("an image that could not be read gets today's defaults and no HOME (its own may be fine)", () => {
    const p = onePod();
    fix(p, [UNKNOWN]);
    expect(p.spec.securityContext).toMatchObject({ runAsUser: 1000, runAsGroup: 3000 });
    expect(p.spec.containers[0].env).toBeUndefined();
  });

  it("a user the pod chose is kept, and the image then decides nothing", () => {
    const p = onePod({}, { securityContext: { runAsUser: 2000 } });
    fix(p, [userOf("")]);
    expect(p.spec.securityContext).toEqual({
      runAsUser: 2000,
      runAsNonRoot: true,
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(p.spec.containers[0].env).toBeUndefined();
  });

  it("containers that all name their own user get no user or group of ours at the pod level", () => {
    const p = onePod({ securityContext: { runAsUser: 4242 } });
    fix(p, [userOf("")]);
    expect(p.spec.securityContext).toEqual({
      runAsNonRoot: true,
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(p.spec.containers[0].env).toBeUndefined();
  });

  it("containers whose images differ each get their own user; the pod level stays unset", () => {
    const p = pod({
      initContainers: [{ name: "fetch", image: "img" }],
      containers: [
        { name: "train", image: "img" },
        { name: "mine", image: "img", securityContext: { runAsUser: 4242 } },
      ],
    });
    fix(p, [userOf("1001:1001"), userOf(""), userOf("5")]);
    expect(p.spec.securityContext.runAsUser).toBeUndefined();
    expect(p.spec.initContainers[0].securityContext).toMatchObject({
      runAsUser: 1001,
      runAsGroup: 1001,
    });
    expect(p.spec.containers[0].securityContext).toMatchObject({
      runAsUser: 1000,
      runAsGroup: 3000,
    });
    expect(p.spec.containers[0].env).toEqual([{ name: "HOME", value: "/home/workload" }]);
    expect(p.spec.containers[1].securityContext.runAsUser).toBe(4242);
    expect(p.spec.initContainers[0].env).toBeUndefined();
  });
});

describe("fsGroup", () => {
  it.each([
    ["a PersistentVolumeClaim", { persistentVolumeClaim: { claimName: "ckpt" } }],
    ["an emptyDir", { emptyDir: {} }],
    ["an ephemeral volume", { ephemeral: { volumeClaimTemplate: { spec: {} } } }],
  ])(
    "%s a non-root user must write: the pod's group, changed only on a mismatch",
    (_what, source) => {
      const p = onePod({}, { volumes: [{ name: "v", ...source }] });
      fix(p, [userOf("1001:1001")]);
      expect(p.spec.securityContext).toMatchObject({
        fsGroup: 1001,
        fsGroupChangePolicy: "OnRootMismatch",
      });
      const q = onePod({}, { volumes: [{ name: "v", ...source }] });
      fix(q, [userOf("1001")]);
      expect(q.spec.securityContext.fsGroup).toBe(1001);
    },
  );

  it("no writable volume, no fsGroup; a configMap is read-only anyway", () => {
    const p = onePod({}, { volumes: [{ name: "cfg", configMap: { name: "c" } }] });
    fix(p, [userOf("1001")]);
    expect(p.spec.securityContext.fsGroup).toBeUndefined();
  });

  it("the pod's own fsGroup and change policy are kept", () => {
    const p = onePod(
      {},
      {
        securityContext: { fsGroup: 7, fsGroupChangePolicy: "Always" },
        volumes: [{ name: "v", emptyDir: {} }],
      },
    );
    fix(p, [userOf("")]);
    expect(p.spec.securityContext).toMatchObject({ fsGroup: 7, fsGroupChangePolicy: "Always" });
  });
});

describe("every fix once", () => {
  it.each([[""], ["1001"], ["1001:1001"], ["ml"]])(
    "image user %j: the second run changes nothing",
    user => {
      const p = onePod({}, { volumes: [{ name: "v", persistentVolumeClaim: { claimName: "c" } }] });
      fix(p, [userOf(user)], settings, "fill");
      const once = structuredClone(p);
      expect(fix(p, [userOf(user)], settings, "fill")).toEqual([]);
      expect(p).toEqual(once);
    },
  );

  it("a Windows pod gets runAsNonRoot only, whatever its image", () => {
    const p = onePod({}, { os: { name: "windows" }, volumes: [{ name: "v", emptyDir: {} }] });
    fix(p, [userOf("")]);
    expect(p.spec.securityContext).toEqual({ runAsNonRoot: true });
    expect(p.spec.containers[0].env).toBeUndefined();
  });

  it("readOnlyRootFilesystem on request: HOME and /tmp writable, HOME mounted once", () => {
    const p = onePod();
    fix(p, [userOf("")], settings, "fill");
    expect(p.spec.containers[0].securityContext.readOnlyRootFilesystem).toBe(true);
    expect(p.spec.containers[0].volumeMounts.map((m: Obj) => m.mountPath)).toEqual([
      "/home/workload",
      "/tmp",
    ]);
    const off = onePod();
    fix(off, [userOf("")], settings, "off");
    expect(off.spec.containers[0].securityContext.readOnlyRootFilesystem).toBeUndefined();
  });
});

describe("warnings", () => {
  it("a root-built image says who it runs as, its WORKDIR and the fix", () => {
    expect(
      imageWarning(userOf("", { workingDir: "/workspace" }), 1000, "train", "/home/workload"),
    ).toBe(
      'image "img" (container "train") is built to run as root; it runs as UID 1000 here, with HOME=/home/workload on an emptyDir; its WORKDIR /workspace was made by the image\'s build user, so writing there may fail. Fix: build the image with a numeric USER (e.g. USER 1000) and chown what it writes to that user; its pods then keep the image\'s own user',
    );
  });

  it("a named user says the kubelet cannot check it", () => {
    expect(imageWarning(userOf("ml"), 1000, "train", undefined)).toContain(
      'runs as user "ml", a name: the kubelet cannot check runAsNonRoot against a name',
    );
  });

  it("an image that could not be read is said; a numeric non-root one needs no word", () => {
    expect(imageWarning(UNKNOWN, 1000, "train", undefined)).toBe(
      'image "img" (container "train") was not inspected (offline): it runs as UID 1000 here, which may not be the user it was built for. Fix: set runAsUser to the image\'s own user (or let the module read the image: images.inspect)',
    );
    expect(imageWarning(userOf("1001"), 1001, "train", undefined)).toBeUndefined();
  });
});

/** A snapshot cluster whose registry answers from a table (as `check --inspect-images` would). */
class WithImages extends SnapshotCluster {
  readonly asked: string[] = [];
  readonly pullSecrets: (PullSecrets | undefined)[] = [];
  constructor(
    objects: KubeObject[],
    private readonly table: Record<string, ImageLookup>,
  ) {
    super(objects);
  }
  override async imageConfigs(refs: ImageRef[], platform: Platform, pullSecrets?: PullSecrets) {
    this.pullSecrets.push(pullSecrets);
    this.asked.push(...refs.map(r => `${r.normalised} ${platform.os}/${platform.architecture}`));
    return new Map(
      refs.map(r => [
        r.normalised,
        this.table[r.normalised] ?? { state: "unknown" as const, reason: "not in the table" },
      ]),
    );
  }
}

const pod2 = (images: string[]): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p", namespace: "ml" },
  spec: { containers: images.map((image, i) => ({ name: `c${i}`, image })) },
});

describe("through the engine (webhook and check alike)", () => {
  const ns = (labels: Record<string, string> = {}): KubeObject => ({
    kind: "Namespace",
    metadata: { name: "ml", labels },
  });

  it("reads the image the kubelet will pull (after the mirror) for the node's platform, and warns", async () => {
    const cluster = new WithImages(
      [
        ns(),
        {
          kind: "Node",
          metadata: { name: "n" },
          status: { nodeInfo: { architecture: "arm64" } },
        } as KubeObject,
      ],
      { "harbor.internal/hub/library/python:3.12": known("", { workingDir: "/workspace" }) },
    );
    const s = parseSettings({ registries: { mirrors: { "docker.io": "harbor.internal/hub" } } });
    const r = await review(policies, onePod({ image: "python:3.12" }) as KubeObject, {
      settings: s,
      cluster,
    });
    expect(cluster.asked[0]).toBe("harbor.internal/hub/library/python:3.12 linux/arm64");
    const spec = (r.object as Obj).spec;
    expect(spec.securityContext).toMatchObject({ runAsUser: 1000, runAsGroup: 3000 });
    expect(spec.containers[0].env).toEqual([{ name: "HOME", value: "/home/workload" }]);
    expect(r.warnings).toContainEqual(
      expect.stringContaining(
        'admission-guard/security-context: image "harbor.internal/hub/library/python:3.12" (container "main") is built to run as root',
      ),
    );
  });

  it("offline (check without --inspect-images): today's defaults, and the warning says the image was not inspected", async () => {
    const r = await review(policies, onePod() as KubeObject, {
      settings: defaultSettings(),
      cluster: new SnapshotCluster([ns()]),
    });
    expect((r.object as Obj).spec.securityContext).toMatchObject({
      runAsUser: 1000,
      runAsGroup: 3000,
    });
    expect(r.warnings).toContainEqual(
      expect.stringContaining(
        'image "img" (container "main") was not inspected (check reads image configs with --inspect-images)',
      ),
    );
  });

  it("a namespace labelled read-only-root-filesystem=fill gets it; the setting decides elsewhere", async () => {
    const cluster = new SnapshotCluster([
      ns({ "admission-guard.dev/read-only-root-filesystem": "fill" }),
    ]);
    const r = await review(policies, onePod() as KubeObject, {
      settings: defaultSettings(),
      cluster,
    });
    expect((r.object as Obj).spec.containers[0].securityContext.readOnlyRootFilesystem).toBe(true);
  });

  it("a pod's own imagePullSecrets are handed to the lookup only when images.workloadPullSecrets is on", async () => {
    const pod = onePod({}, { imagePullSecrets: [{ name: "regcred" }] }) as KubeObject;
    const off = new WithImages([ns()], {});
    await review(policies, pod, { settings: defaultSettings(), cluster: off });
    expect(off.pullSecrets[0]).toBeUndefined();
    const on = new WithImages([ns()], {});
    const s = parseSettings({ images: { workloadPullSecrets: true } });
    await review(policies, pod, { settings: s, cluster: on });
    expect(on.pullSecrets[0]).toEqual({ namespace: "ml", names: ["regcred"] });
  });

  it("an image whose registry is not allowed (after the mirror) is never looked up", async () => {
    const cluster = new WithImages([ns({})], {});
    const s = parseSettings({
      registries: {
        allowed: ["ghcr.io/ml", "harbor.internal"],
        mirrors: { "quay.io": "harbor.internal/quay" },
      },
    });
    const pod = pod2([
      "evil.example.com/x:1",
      "169.254.169.254:80/latest:1",
      "ghcr.io/other/app:1",
      "quay.io/org/app:1",
      "ghcr.io/ml/app:1",
    ]);
    const r = await review(policies, pod, { settings: s, cluster });
    // Asked by the fix and again by the check: only ever these two.
    expect(new Set(cluster.asked)).toEqual(
      new Set(["harbor.internal/quay/org/app:1 linux/amd64", "ghcr.io/ml/app:1 linux/amd64"]),
    );
    expect(r.allowed).toBe(false);
    expect(r.warnings).toContainEqual(
      expect.stringContaining(
        'image "evil.example.com/x:1" (container "c0") was not inspected (not read, its registry is not allowed)',
      ),
    );
    // The namespace's narrowing counts too.
    const narrowed = new WithImages(
      [
        {
          kind: "Namespace",
          metadata: {
            name: "ml",
            annotations: { "admission-guard.dev/allowed-registries": "harbor.internal" },
          },
        },
      ],
      {},
    );
    await review(policies, pod, { settings: s, cluster: narrowed });
    expect(new Set(narrowed.asked)).toEqual(
      new Set(["harbor.internal/quay/org/app:1 linux/amd64"]),
    );
  });

  it("a pod that names its user asks no registry", async () => {
    const cluster = new WithImages([ns()], {});
    await review(policies, onePod({}, { securityContext: { runAsUser: 5 } }) as KubeObject, {
      settings: defaultSettings(),
      cluster,
    });
    expect(cluster.asked).toEqual([]);
  });
});

describe("securityContext.rootImages: deny", () => {
  const ns: KubeObject = { kind: "Namespace", metadata: { name: "ml" } };
  const images = {
    "docker.io/library/root:1": known("", { workingDir: "/workspace" }),
    "docker.io/library/named:1": known("ml"),
    "docker.io/library/numeric:1": known("1001"),
  };
  const judge = (
    image: string,
    settings = parseSettings({ securityContext: { rootImages: "deny" } }),
    extra: Obj = {},
  ) =>
    review(policies, onePod({ image }, extra) as KubeObject, {
      settings,
      cluster: new WithImages([ns], images),
    });

  it("an image built for root is denied, naming its WORKDIR, the rule and both ways out", async () => {
    const r = await judge("root:1");
    expect(r.allowed).toBe(false);
    const v = r.violations.find(x => x.rule === "image-user")!;
    expect(v.capability).toBe("security-context");
    expect(v.message).toBe(
      'image "root:1" (container "main") is built to run as root; it runs as UID 1000 here, with HOME=/home/workload on an emptyDir; its WORKDIR /workspace was made by the image\'s build user, so writing there may fail (securityContext.rootImages: deny)',
    );
    expect(v.fix).toContain("build the image with a numeric USER (e.g. USER 1000)");
    expect(v.fix).toContain("or set spec.securityContext.runAsUser");
  });

  it("a named user is denied too; a numeric one and one that could not be read are not", async () => {
    expect((await judge("named:1")).violations.map(v => v.rule)).toContain("image-user");
    expect((await judge("numeric:1")).allowed).toBe(true);
    const unread = await judge("elsewhere:1");
    expect(unread.allowed).toBe(true);
    expect(unread.warnings).toContainEqual(expect.stringContaining("was not inspected"));
  });

  it("the pod that chose its own user is its author's call: no denial", async () => {
    const r = await judge("root:1", undefined, { securityContext: { runAsUser: 1000 } });
    expect(r.violations.map(v => v.rule)).not.toContain("image-user");
  });

  it("by default (warn) the same pod is admitted with the warning", async () => {
    const r = await judge("root:1", defaultSettings());
    expect(r.allowed).toBe(true);
    expect(r.warnings).toContainEqual(expect.stringContaining("is built to run as root"));
  });
});

describe("a named User the image's files put in numbers (issue 41)", () => {
  const named = (
    user: string,
    files: NonNullable<Extract<ImageLookup, { state: "known" }>["config"]["files"]>,
    home?: string,
  ) =>
    imageUserOf("img", {
      state: "known",
      config: { digest: "sha256:x", user, workingDir: "/app", home, files },
    });

  it("runs as the UID and GID its /etc/passwd and /etc/group give, with their HOME", () => {
    const user = named("ml:train", { user: { uid: 1002, gid: 2000, home: "/home/ml" } });
    expect(user).toEqual({
      kind: "numeric",
      image: "img",
      uid: 1002,
      gid: 2000,
      named: "ml:train",
      workingDir: "/app",
      home: "/home/ml",
    });
    const p = onePod();
    fix(p, [user]);
    expect(p.spec.securityContext).toMatchObject({ runAsUser: 1002, runAsGroup: 2000 });
    // Its own HOME, in the image: no emptyDir of ours.
    expect(p.spec.containers[0].env).toBeUndefined();
    expect(p.spec.volumes).toBeUndefined();
    expect(imageWarning(user, 1002, "main", undefined)).toBeUndefined();
  });

  it("the config's HOME wins over /etc/passwd's, as the runtime's order", () => {
    expect(named("ml", { user: { uid: 1002, home: "/home/ml" } }, "/data")).toMatchObject({
      home: "/data",
    });
  });

  it("a name that is UID 0 in the image is root", () => {
    expect(named("admin", { user: { uid: 0, gid: 0 } }).kind).toBe("root");
  });

  it("a name the image does not list keeps the configured UID, with a warning naming it", () => {
    const user = named("mlsvc", { note: `the image's /etc/passwd does not list "mlsvc"` });
    expect(user).toMatchObject({ kind: "named", name: "mlsvc" });
    expect(identityFor(user, settings)).toMatchObject({ uid: 1000, fromImage: false });
    expect(imageWarning(user, 1000, "main", "/home/workload")).toContain(
      `runs as user "mlsvc", a name (the image's /etc/passwd does not list "mlsvc"): the kubelet cannot check runAsNonRoot against a name, so it runs as UID 1000 here`,
    );
  });
});
