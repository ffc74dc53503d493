// A root image's Env-named cache dirs the UID cannot write get a writable emptyDir
// (capabilities/security-context/cache-dirs.ts): only where its layers show them root's or absent.
import {
  cacheDirWarnings,
  MAX_CACHE_DIR_MOUNTS,
} from "../../../capabilities/security-context/cache-dirs";
import type { V1Container } from "@kubernetes/client-node";
import { fixPodSecurity } from "../../../capabilities/security-context/fix";
import { imageUserOf, type ImageUser } from "../../../capabilities/security-context/image-user";
import { CACHE_ENV, shapesOf } from "../../../lib/images/config-shapes";
import type { ImageFiles } from "../../../lib/images/image-files";
import type { KubeObject } from "../../../lib/objects/pod";
import { podTemplateOf } from "../../../lib/workload-kinds/built-in";
import { defaultSettings } from "../../../lib/settings";

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const settings = defaultSettings().securityContext;
const ROOTS = { uid: 0, gid: 0, mode: 0o755 };
/** A root image with this Env and what its layers said of the dirs. */
function image(
  env: string[],
  dirs: ImageFiles["dirs"],
  extra: { user?: string; workingDir?: string } = {},
): ImageUser {
  const shapes = shapesOf({ Env: env });
  return imageUserOf("img", {
    state: "known",
    config: {
      digest: "sha256:x",
      user: extra.user ?? "",
      workingDir: extra.workingDir ?? "",
      // HOME from its Env, as the registry client reads it.
      home: env.find(e => e.startsWith("HOME="))?.slice(5),
      ...(shapes ? { shapes } : {}),
      files: { dirs },
    },
  });
}

function fix(user: ImageUser, container: Obj = {}, s = settings) {
  const p: Obj = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "p", namespace: "ml" },
    spec: { containers: [{ name: "train", image: "img", ...container }] },
  };
  const changes = fixPodSecurity(podTemplateOf(p as KubeObject)!, s, {
    users: new Map([[p.spec.containers[0], user]]),
  });
  const mounts = (p.spec.containers[0].volumeMounts ?? []).map((m: Obj) => m.mountPath);
  return { p, changes, mounts };
}

describe("a root image's Env-named cache dirs", () => {
  test("an absent dir gets an emptyDir, recorded as cacheDirs; a root-owned one (it may hold the image's files) and a world-writable one do not", () => {
    const { changes, mounts } = fix(
      image(
        ["HF_HOME=/data/hf", "TORCH_HOME=/cache/torch", "MLFLOW_TRACKING_URI=file:///mlruns"],
        [
          ["/data/hf", ROOTS],
          ["/cache/torch", { uid: 0, gid: 0, mode: 0o777 }],
          ["/mlruns", null],
        ],
      ),
    );
    expect(mounts).toEqual(["/home/workload", "/mlruns"]);
    expect(changes.filter(c => c.rule === "cacheDirs").map(c => c.message)).toEqual([
      'spec.volumes[1]={"name":"ag-writable-mlruns","emptyDir":{}}',
      'spec.containers[0].volumeMounts[1]={"name":"ag-writable-mlruns","mountPath":"/mlruns"}',
    ]);
  });

  test("under WORKDIR or the image's HOME, named again by the container's env, or under its own volume: nothing", () => {
    const user = image(
      [
        "HOME=/opt/home",
        "HF_HOME=/workspace/hf",
        "TORCH_HOME=/opt/home/torch",
        "XDG_CACHE_HOME=/c",
      ],
      [
        ["/workspace/hf", ROOTS],
        ["/opt/home/torch", ROOTS],
        ["/c", null],
      ],
      { workingDir: "/workspace" },
    );
    expect(fix(user, { env: [{ name: "XDG_CACHE_HOME", value: "/tmp/c" }] }).mounts).not.toContain(
      "/c",
    );
    const own = fix(user, { volumeMounts: [{ name: "data", mountPath: "/" }] });
    expect(own.changes.filter(c => c.rule === "cacheDirs")).toEqual([]);
    const plain = fix(user);
    expect(plain.mounts).toContain("/c");
    expect(plain.mounts).not.toContain("/workspace/hf");
    expect(plain.mounts).not.toContain("/opt/home/torch");
  });

  test("its layers not read for it, a numeric USER, or securityContext.cacheDirs off: nothing", () => {
    const unread = image(["HF_HOME=/data/hf"], undefined);
    expect(fix(unread).mounts).not.toContain("/data/hf");
    const numeric = image(["HF_HOME=/data/hf"], [["/data/hf", ROOTS]], { user: "1001" });
    expect(fix(numeric).mounts).toEqual([]);
    const off = fix(
      image(["HF_HOME=/data/hf"], [["/data/hf", ROOTS]]),
      {},
      {
        ...settings,
        cacheDirs: "off",
      },
    );
    expect(off.mounts).not.toContain("/data/hf");
  });

  test(`at most ${MAX_CACHE_DIR_MOUNTS} per pod, whatever its images' Env say`, () => {
    // Two images of eight cache dirs each (a config keeps eight at most): eight mounted.
    const images = [0, 1].map(c => {
      const names = [...CACHE_ENV].filter(n => n !== "MLFLOW_TRACKING_URI").slice(0, 8);
      return image(
        names.map((n, i) => `${n}=/c${c}/d${i}`),
        names.map((_, i) => [`/c${c}/d${i}`, null]),
      );
    });
    const p: Obj = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "p", namespace: "ml" },
      spec: { containers: [0, 1].map(c => ({ name: `c${c}`, image: `img${c}` })) },
    };
    const users = new Map<V1Container, ImageUser>(
      p.spec.containers.map((c: V1Container, i: number) => [c, images[i]]),
    );
    const changes = fixPodSecurity(podTemplateOf(p as KubeObject)!, settings, { users });
    expect(
      changes.filter(c => c.rule === "cacheDirs" && c.message.includes(".volumeMounts[")),
    ).toHaveLength(MAX_CACHE_DIR_MOUNTS);
  });

  test("the bound is counted, not searched for in the pod's changes: a pod of thousands of containers costs in proportion", () => {
    // One image, one absent cache dir, in every container: each container's fill once looked
    // through every change recorded before it (the square of the containers, the pod author's).
    const n = 2000;
    const user = image(["HF_HOME=/data/hf"], [["/data/hf", null]]);
    const p: Obj = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "p", namespace: "ml" },
      spec: { containers: Array.from({ length: n }, (_, i) => ({ name: `c${i}`, image: "img" })) },
    };
    const users = new Map<V1Container, ImageUser>(
      p.spec.containers.map((c: V1Container) => [c, user]),
    );
    // What every filter of the pass walks through, summed.
    let walked = 0;
    const filter = Array.prototype.filter;
    const spy = jest.spyOn(Array.prototype, "filter").mockImplementation(function (
      this: unknown[],
      ...args: Parameters<typeof filter>
    ) {
      walked += this.length;
      return filter.apply(this, args);
    });
    let changes;
    try {
      changes = fixPodSecurity(podTemplateOf(p as KubeObject)!, settings, { users });
    } finally {
      spy.mockRestore();
    }
    expect(
      changes.filter(c => c.rule === "cacheDirs" && c.message.includes(".volumeMounts[")),
    ).toHaveLength(MAX_CACHE_DIR_MOUNTS);
    expect(walked).toBeLessThan(100 * n);
  });
});

describe("a root image's cache dir that root owns: named, never mounted over", () => {
  test("the warning names the variable, the dir, its mode, the UID and the three fixes", () => {
    const user = image(
      ["HF_HOME=/data/hf", "TORCH_HOME=/t"],
      [
        ["/data/hf", ROOTS],
        ["/t", null],
      ],
    );
    expect(cacheDirWarnings(user, 1000, 3000, { name: "train" })).toEqual([
      `image "${user.image}" (container "train") sets HF_HOME to /data/hf, a directory of root's (mode 755) that UID 1000 cannot write; it may hold what the image was built with, so no emptyDir is mounted over it. Fix: set HF_HOME to a writable path (under HOME), mount a writable volume at /data/hf, or make it the image's user's in the image`,
    ]);
    // Writable by the group it runs as: nothing to say; under the user's own volume: nothing.
    const group = image(["HF_HOME=/data/hf"], [["/data/hf", { uid: 0, gid: 3000, mode: 0o775 }]]);
    expect(cacheDirWarnings(group, 1000, 3000, { name: "train" })).toEqual([]);
    expect(
      cacheDirWarnings(user, 1000, 3000, {
        name: "train",
        volumeMounts: [{ name: "hf", mountPath: "/data/hf" }],
      }),
    ).toEqual([]);
  });
});
