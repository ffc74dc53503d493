// A root-built image whose WORKDIR the configured UID cannot write gets a copy of it on an
// emptyDir, made by an init container of the same image (capabilities/security-context/
// workdir-copy.ts, ADR 0033): when, when not and why, the pod it makes passing restricted, and a
// second pass changing nothing, through the one engine (webhook and check alike).
import { policies } from "../../../capabilities";
import { identityFor, type ImageUser } from "../../../capabilities/security-context/image-user";
import {
  COPY_TARGET,
  copierName,
  copiersIn,
  copyDecision,
  copyVolumeName,
} from "../../../capabilities/security-context/workdir-copy";
import { SnapshotCluster, type ImageLookup } from "../../../lib/cluster/view";
import { review } from "../../../lib/engine";
import type { ImageFiles } from "../../../lib/images/image-files";
import type { ImageRef } from "../../../lib/objects/image-reference";
import type { KubeObject } from "../../../lib/objects/pod";
import { defaultSettings, parseSettings } from "../../../lib/settings";

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const READABLE: ImageFiles = {
  workdir: { uid: 0, gid: 0, mode: 0o755 },
  copier: true,
  workdirTree: { bytes: 4096, entries: 3, unreadable: 0 },
};
const rootImage = (files: ImageFiles | undefined, workingDir = "/workspace"): ImageUser => ({
  kind: "root",
  image: "torch",
  workingDir,
  ...(files ? { files } : {}),
});
const settings = defaultSettings().securityContext;
const IDENTITY = identityFor(rootImage(undefined), settings);
const COPY = { mode: "copy" as const, maxBytes: 1 << 20 };

describe("when WORKDIR is copied", () => {
  it("a root-owned WORKDIR the UID cannot write, a copier, within the bound: copied", () => {
    expect(copyDecision(rootImage(READABLE), IDENTITY, {}, COPY)).toEqual({
      copy: true,
      workdir: "/workspace",
    });
  });

  it.each([
    [
      "a numeric non-root image (runs as itself)",
      { kind: "numeric", image: "i", uid: 1001, workingDir: "/w" },
    ],
    ["WORKDIR /", rootImage(READABLE, "/")],
    ["no WORKDIR", rootImage(READABLE, "")],
    [
      "WORKDIR writable by all (1777)",
      rootImage({ ...READABLE, workdir: { uid: 0, gid: 0, mode: 0o1777 } }),
    ],
    [
      "WORKDIR group-writable by runAsGroup 3000",
      rootImage({ ...READABLE, workdir: { uid: 0, gid: 3000, mode: 0o775 } }),
    ],
    [
      "WORKDIR owned by another user",
      rootImage({ ...READABLE, workdir: { uid: 42, gid: 0, mode: 0o755 } }),
    ],
  ])("nothing to do or say: %s", (_what, user) => {
    expect(copyDecision(user as ImageUser, IDENTITY, {}, COPY)).toBeUndefined();
  });

  it.each([
    ["off", rootImage(READABLE), {}, { mode: "off" }, /securityContext.workdirCopy is off/],
    [
      "a volume above WORKDIR",
      rootImage(READABLE),
      { volumeMounts: [{ name: "data", mountPath: "/" }] },
      {},
      /a volume is already mounted at or above \/workspace/,
    ],
    [
      "files not read",
      rootImage({ note: "the image's files were not read: a layer is compressed with zstd" }),
      {},
      {},
      /its files were not read \(.*zstd\)/,
    ],
    [
      "no copier",
      rootImage({ ...READABLE, copier: false }),
      {},
      {},
      /no \/bin\/cp to copy it with/,
    ],
    [
      "over the bound",
      rootImage({ ...READABLE, workdirTree: { bytes: 2 << 20, entries: 1, unreadable: 0 } }),
      {},
      {},
      /2097152 bytes under \/workspace are over securityContext.workdirCopyBytes \(1048576\)/,
    ],
    [
      "a file only root may read",
      rootImage({ ...READABLE, workdirTree: { bytes: 1, entries: 3, unreadable: 1 } }),
      {},
      {},
      /1 of its 3 entries under \/workspace are not readable by other users/,
    ],
  ])("not copied, and why: %s", (_what, user, container, over, why) => {
    const decision = copyDecision(user, IDENTITY, container, { ...COPY, ...over } as typeof COPY);
    expect(decision).toMatchObject({ copy: false });
    expect(decision && !decision.copy && decision.why).toMatch(why);
  });
});

class WithImages extends SnapshotCluster {
  constructor(
    objects: KubeObject[],
    private readonly lookup: ImageLookup,
  ) {
    super(objects);
  }
  override async imageConfigs(refs: ImageRef[]) {
    return new Map(refs.map(r => [r.normalised, this.lookup]));
  }
}

const ns = (labels: Record<string, string> = {}): KubeObject => ({
  kind: "Namespace",
  metadata: { name: "ml", labels },
});
const trainPod = (container: Obj = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "train", namespace: "ml" },
  spec: { containers: [{ name: "main", image: "torch:2", ...container }] },
});
const torch = (files: ImageFiles): ImageLookup => ({
  state: "known",
  config: { digest: "sha256:x", user: "", workingDir: "/workspace", files },
});

async function admit(
  pod: KubeObject,
  files = READABLE,
  labels = {},
  s = defaultSettings(),
  more: KubeObject[] = [],
) {
  const cluster = new WithImages([ns(labels), ...more], torch(files));
  return review(policies, pod, { settings: s, cluster });
}

describe("the copy through the engine", () => {
  it("adds the emptyDir at WORKDIR and the init container that fills it; the pod passes restricted; the warning says so", async () => {
    const r = await admit(trainPod());
    expect(r.allowed).toBe(true);
    const spec = (r.object as Obj).spec;
    expect(spec.volumes).toContainEqual({ name: "ag-workdir-main", emptyDir: {} });
    expect(spec.containers[0].volumeMounts).toContainEqual({
      name: "ag-workdir-main",
      mountPath: "/workspace",
    });
    expect(spec.initContainers).toEqual([
      {
        name: "ag-copy-main",
        image: "torch:2",
        command: ["/bin/cp", "-R", "/workspace/.", "/.ag-workdir-copy"],
        volumeMounts: [{ name: "ag-workdir-main", mountPath: "/.ag-workdir-copy" }],
        securityContext: {
          runAsNonRoot: true,
          runAsUser: 1000,
          runAsGroup: 3000,
          allowPrivilegeEscalation: false,
          capabilities: { drop: ["ALL"] },
          readOnlyRootFilesystem: true,
          seccompProfile: { type: "RuntimeDefault" },
        },
      },
    ]);
    expect((r.object as Obj).metadata.annotations["admission-guard.dev/fixed"]).toContain(
      "security-context/workdirCopy",
    );
    expect(r.warnings).toContainEqual(
      expect.stringContaining(
        'its WORKDIR /workspace belongs to root, so init container "ag-copy-main" copies it to an emptyDir mounted there',
      ),
    );
  });

  it("the init container takes the container's cpu, memory and ephemeral-storage (a quota tracking them refuses a container without), never its GPUs", async () => {
    const resources = {
      requests: { cpu: "2", memory: "8Gi", "nvidia.com/gpu": "1" },
      limits: { memory: "8Gi", "ephemeral-storage": "20Gi", "nvidia.com/gpu": "1" },
    };
    const r = await admit(trainPod({ resources }));
    expect((r.object as Obj).spec.initContainers[0].resources).toEqual({
      requests: { cpu: "2", memory: "8Gi" },
      limits: { memory: "8Gi", "ephemeral-storage": "20Gi" },
    });
    const bare = await admit(trainPod());
    expect((bare.object as Obj).spec.initContainers[0].resources).toBeUndefined();
    // A quota tracking limits.cpu and limits.memory: the pod with its copy is admitted.
    const quota: KubeObject = {
      apiVersion: "v1",
      kind: "ResourceQuota",
      metadata: { name: "team", namespace: "ml" },
      spec: { hard: { "limits.cpu": "64", "limits.memory": "256Gi" } },
    } as KubeObject;
    const limits = { limits: { cpu: "2", memory: "8Gi" } };
    const quoted = await admit(trainPod({ resources: limits }), READABLE, {}, undefined, [quota]);
    expect((quoted.object as Obj).spec.initContainers).toHaveLength(1);
    expect(quoted.denials).toEqual([]);
    expect(quoted.allowed).toBe(true);
  });

  it("a second pass (reinvocation, or check of the admitted pod) changes nothing", async () => {
    const once = await admit(trainPod());
    const twice = await admit(once.object as KubeObject);
    expect(twice.object).toEqual(once.object);
    expect(twice.allowed).toBe(true);
  });

  it("over the bound: not copied, and the warning keeps the fix with why", async () => {
    const r = await admit(trainPod(), {
      ...READABLE,
      workdirTree: { bytes: 600 << 20, entries: 9, unreadable: 0 },
    });
    const spec = (r.object as Obj).spec;
    expect(spec.initContainers).toBeUndefined();
    expect(spec.containers[0].volumeMounts ?? []).not.toContainEqual(
      expect.objectContaining({ mountPath: "/workspace" }),
    );
    expect(r.warnings).toContainEqual(
      expect.stringMatching(
        /so writing there may fail \(not copied to a writable emptyDir: 629145600 bytes under \/workspace are over securityContext.workdirCopyBytes \(536870912\)\)\. Fix: .*; or mount a writable volume at \/workspace/,
      ),
    );
  });

  it("the namespace label turns it off (and on where the setting is off)", async () => {
    const off = await admit(trainPod(), READABLE, { "admission-guard.dev/workdir-copy": "off" });
    expect((off.object as Obj).spec.initContainers).toBeUndefined();
    expect(off.warnings).toContainEqual(
      expect.stringContaining("securityContext.workdirCopy is off"),
    );
    const s = parseSettings({ securityContext: { workdirCopy: "off" } });
    const on = await admit(trainPod(), READABLE, { "admission-guard.dev/workdir-copy": "copy" }, s);
    expect((on.object as Obj).spec.initContainers).toHaveLength(1);
  });

  it("the pod's own volume at WORKDIR is left as it is", async () => {
    const pod = trainPod({ volumeMounts: [{ name: "ws", mountPath: "/workspace" }] });
    (pod as Obj).spec.volumes = [{ name: "ws", emptyDir: {} }];
    const r = await admit(pod);
    expect((r.object as Obj).spec.initContainers).toBeUndefined();
    const volumes = (r.object as Obj).spec.volumes.map((v: Obj) => v.name);
    expect(volumes).toContain("ws");
    expect(volumes).not.toContain("ag-workdir-main");
  });
});

test("two long container names sharing a prefix get names of their own, each a DNS label", () => {
  const a = `${"x".repeat(60)}-a`;
  const b = `${"x".repeat(60)}-b`;
  for (const nameOf of [copyVolumeName, copierName]) {
    expect(nameOf(a)).not.toBe(nameOf(b));
    for (const name of [nameOf(a), nameOf(b)]) expect(name).toMatch(/^[a-z0-9-]{1,63}$/);
  }
  // Short names stay as they were.
  expect([copyVolumeName("main"), copierName("main")]).toEqual(["ag-workdir-main", "ag-copy-main"]);
});

describe("copiersIn", () => {
  const copier = (app: string, mountPath = COPY_TARGET) => ({
    name: copierName(app),
    volumeMounts: [{ name: copyVolumeName(app), mountPath }],
  });

  it("names the init container that mounts an app container's copy, not one that only has its name", () => {
    const spec = {
      containers: [{ name: "main" }, { name: "side" }, { name: "other" }],
      initContainers: [copier("main"), copier("side", "/elsewhere"), { name: "setup" }],
    };
    expect([...copiersIn(spec)]).toEqual([copierName("main")]);
    // The first init of a name is the one looked at.
    const twice = { ...spec, initContainers: [copier("main", "/elsewhere"), copier("main")] };
    expect([...copiersIn(twice)]).toEqual([]);
  });

  it("reads each init container's name once, however many app containers the pod author writes", () => {
    // Thousands of each: searched per app container, the reads would be their product.
    const n = 2000;
    let reads = 0;
    const initContainers = Array.from({ length: n }, (_, i) => ({
      get name() {
        reads++;
        return `init-${i}`;
      },
    }));
    const containers = Array.from({ length: n }, (_, i) => ({ name: `app-${i}` }));
    expect(copiersIn({ containers, initContainers }).size).toBe(0);
    expect(reads).toBeLessThanOrEqual(2 * n);
  });
});
