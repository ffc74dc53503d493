// Named users resolved from the image's own files (issue 41), through the real built controller and
// `check --inspect-images`' inspector (parity), and a hostile registry's layers: a gzip bomb, an
// endless tar, a 1 GiB /etc/passwd, a passwd line of 100,000 fields, symlinked /etc/passwd and
// WORKDIR that escape or loop, a layer that never ends. Each is bounded in bytes and time, the pod
// is answered within the budget with the configured UID and a warning saying why, and the
// controller answers other reviews meanwhile.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import type { ServerResponse } from "node:http";
import { gzipSync } from "node:zlib";
import type { KubeObject } from "../../lib/objects/pod";
import { admit } from "../support/admission";
import { startEnvironment, type Environment } from "../support/environment";
import {
  GZIP,
  gnuTar,
  gzip,
  header,
  PLAIN,
  passwdOf,
  putLayeredImage,
  ROOT_BASE_FILES,
  type LayerFile,
} from "../support/layers";
import { admittedOnceRead, inspectedParity } from "../support/image-doors";
import { settingsEnv } from "../support/parity";
import { TestRegistry } from "../support/registry";
import { eventually } from "../support/wait";

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const MiB = 1024 * 1024;
const BUDGET_MS = 1500;
const LAYER_BYTES = 32 * MiB;
/** WORKDIR's bytes copied at most (ADR 0033): ml/torch is under it, ml/torch-big over. */
const COPY_BYTES = 100_000;
const registry = new TestRegistry();
let env: Environment;
const settings = () => ({
  images: {
    inspect: true,
    plainHttp: [registry.host],
    budgetMs: BUDGET_MS,
    layerBytes: LAYER_BYTES,
    layerBytesUncompressed: 4 * LAYER_BYTES,
  },
  securityContext: { workdirCopyBytes: COPY_BYTES },
});

/** Bytes each hostile layer's answer wrote, and whether its connection was closed. */
const served = new Map<string, { bytes: number; closed: boolean }>();

/** Streams `next()` chunks until it gives none or the reader hangs up (backpressure kept). */
function stream(name: string, res: ServerResponse, next: (i: number) => Buffer | undefined) {
  const state = { bytes: 0, closed: false };
  served.set(name, state);
  res.on("close", () => (state.closed = true));
  res.writeHead(200, { "Content-Type": "application/octet-stream" });
  let i = 0;
  const pump = () => {
    while (!state.closed) {
      const chunk = next(i++);
      if (!chunk) return void res.end();
      state.bytes += chunk.length;
      if (!res.write(chunk)) return void res.once("drain", pump);
    }
  };
  pump();
}

const fakeDigest = (name: string) => `sha256:${createHash("sha256").update(name).digest("hex")}`;

/** An image whose top layer is answered by `handle` (a hostile body under a made-up digest). */
function hostile(
  name: string,
  config: Record<string, unknown>,
  mediaType: string,
  handle: (res: ServerResponse) => void,
) {
  const digest = fakeDigest(name);
  registry.overrides.push({
    path: new RegExp(`/blobs/${digest}$`),
    handle: (_req, res) => handle(res),
  });
  putLayeredImage(registry, `evil/${name}`, "1", config, [BASE, { digest, mediaType }]);
}

const layer = (files: LayerFile[]) => ({ body: gzip(gnuTar(files)), mediaType: GZIP });
const BASE = layer([
  { path: "bin" },
  { path: "etc" },
  { path: "etc/passwd", content: passwdOf("ml:1002:1002:/home/ml") },
  { path: "etc/group", content: "root:x:0:\nml:x:1002:\ntrain:x:2000:ml\n" },
  { path: "home/ml", uid: 1002, gid: 1002 },
  { path: "app", uid: 1002, gid: 1002 },
]);
const ENTRY = Buffer.concat([header({ name: "opt/f", size: 512 }), Buffer.alloc(512, "z")]);
const ENTRIES = Buffer.concat(Array.from({ length: 1024 }, () => ENTRY)); // 1 MiB of entries
const A_MIB = Buffer.alloc(MiB, "a");

beforeAll(async () => {
  await registry.start();
  putLayeredImage(registry, "ml/named", "1", { User: "ml", WorkingDir: "/app" }, [BASE]);
  putLayeredImage(registry, "ml/group", "1", { User: "ml:train" }, [BASE]);
  putLayeredImage(registry, "ml/unlisted", "1", { User: "mlsvc", WorkingDir: "/app" }, [BASE]);
  registry.putImage("ok/app", "1", { User: "1001" });
  // Built as root as a Dockerfile would: cp in the base (/bin a link to usr/bin), WORKDIR
  // /workspace made and filled in upper layers, a layer between; the big one over COPY_BYTES.
  const rootBase = layer(ROOT_BASE_FILES);
  const workspace = (files: LayerFile[]) => layer([{ path: "workspace" }, ...files]);
  for (const [name, weights] of [
    ["torch", 1000],
    ["torch-big", 2 * COPY_BYTES],
  ] as const)
    putLayeredImage(registry, `ml/${name}`, "1", { WorkingDir: "/workspace" }, [
      rootBase,
      workspace([{ path: "workspace/train.py", content: "print('train')\n" }]),
      layer([{ path: "opt" }, { path: "opt/lib.py", content: "x".repeat(5000) }]),
      workspace([{ path: "workspace/weights.bin", content: "w".repeat(weights) }]),
    ]);
  // 64 MiB of zeros in one gzip member of ~64 KiB, sent 16 times: 1 GiB out of 1 MiB in.
  const bomb = gzipSync(Buffer.alloc(64 * MiB));
  const bombHead = gzipSync(header({ name: "opt/zeros", size: 1024 ** 3 }));
  hostile("bomb", { User: "ml" }, GZIP, res =>
    stream("bomb", res, i => (i === 0 ? bombHead : i <= 16 ? bomb : undefined)),
  );
  // Valid entries for ever.
  hostile("endless", { User: "ml" }, PLAIN, res => stream("endless", res, () => ENTRIES));
  // /etc/passwd of 1 GiB, streamed by the registry a MiB at a time.
  hostile("passwd1g", { User: "ml" }, PLAIN, res =>
    stream("passwd1g", res, i =>
      i === 0 ? header({ name: "etc/passwd", size: 1024 ** 3 }) : i <= 1024 ? A_MIB : undefined,
    ),
  );
  // The header, then a byte every 200 ms, never the end.
  hostile("drip", { User: "ml" }, PLAIN, res => {
    const state = { bytes: 0, closed: false };
    served.set("drip", state);
    res.on("close", () => (state.closed = true));
    res.writeHead(200);
    res.write(header({ name: "etc/passwd", size: 4096 }));
    const timer = setInterval(() => {
      if (state.closed) return clearInterval(timer);
      state.bytes++;
      res.write("a");
    }, 200);
  });
  putLayeredImage(registry, "evil/fields", "1", { User: "ml" }, [
    BASE,
    layer([
      { path: "etc" },
      {
        path: "etc/passwd",
        content: `evil:x:0:0::/:/bin/sh${":x".repeat(100_000)}\n${passwdOf("ml:1003:1003:/home/ml")}`,
      },
    ]),
  ]);
  // /etc/passwd and WORKDIR as links that climb out of the image, and that loop.
  for (const [name, passwd, work] of [
    ["escape", "../../../../../../host/etc/passwd", "../../../../../var/lib/kubelet"],
    ["loop", "/etc/passwd", "work/../work"],
  ])
    putLayeredImage(registry, `evil/${name}`, "1", { User: "ml", WorkingDir: "/work" }, [
      BASE,
      layer([
        { path: "etc" },
        { path: "etc/passwd", symlink: passwd },
        { path: "work", symlink: work },
      ]),
    ]);
  env = await startEnvironment({
    objects: [{ apiVersion: "v1", kind: "Namespace", metadata: { name: "ml" } }],
    env: {
      ...settingsEnv(settings()),
      // The harness turns image reads off by variable (which wins over the document): on again.
      ADMISSION_GUARD_IMAGES_INSPECT: "true",
    },
  });
}, 60_000);
afterAll(async () => {
  await env?.stop();
  await registry.stop();
});

const trainer = (image: string, name = "train"): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "ml" },
  spec: { containers: [{ name: "train", image: `${registry.host}/${image}` }] },
});

/** The controller, then `check`'s inspector over the same settings: the same answer. */
const parity = (pod: KubeObject) => inspectedParity(env, settings(), pod);

/** Admits the pod, asking again once the budget passed (the answer is kept for the next). */
const admitted = (image: string) => admittedOnceRead(env, trainer(image));

describe("named users from the image's files", () => {
  test("USER ml runs as its UID and GID from /etc/passwd, in its own HOME; check agrees", async () => {
    const result = await admitted("ml/named:1");
    expect(result.allowed).toBe(true);
    const spec = result.patched.spec as Obj;
    expect(spec.securityContext).toMatchObject({
      runAsNonRoot: true,
      runAsUser: 1002,
      runAsGroup: 1002,
    });
    expect(spec.containers[0].env).toBeUndefined(); // its HOME is /home/ml, its own
    expect(result.warnings.join("\n")).not.toContain("a name");
    expect((await parity(trainer("ml/named:1"))).differences).toEqual([]);
  });

  test("USER ml:train takes the group from /etc/group; check agrees", async () => {
    const result = await admitted("ml/group:1");
    expect((result.patched.spec as Obj).securityContext).toMatchObject({
      runAsUser: 1002,
      runAsGroup: 2000,
    });
    expect((await parity(trainer("ml/group:1"))).differences).toEqual([]);
  });

  test("a name the image does not list runs as the configured UID, warned with the name", async () => {
    const result = await admitted("ml/unlisted:1");
    expect(result.allowed).toBe(true);
    expect((result.patched.spec as Obj).securityContext).toMatchObject({ runAsUser: 1000 });
    expect(result.warnings).toContainEqual(
      expect.stringContaining(
        `runs as user "mlsvc", a name (the image's /etc/passwd does not list "mlsvc")`,
      ),
    );
    expect((await parity(trainer("ml/unlisted:1"))).differences).toEqual([]);
  });
});

describe("a root-built image whose WORKDIR the UID cannot write (ADR 0033)", () => {
  test("gets an emptyDir at WORKDIR filled by an init container of the image; restricted passes; a second mutation changes nothing; check agrees", async () => {
    const result = await admitted("ml/torch:1");
    expect(result.allowed).toBe(true);
    const spec = result.patched.spec as Obj;
    expect(spec.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000 });
    expect(spec.volumes).toContainEqual({ name: "ag-workdir-train", emptyDir: {} });
    expect(spec.containers[0].volumeMounts).toContainEqual({
      name: "ag-workdir-train",
      mountPath: "/workspace",
    });
    expect(spec.initContainers).toEqual([
      expect.objectContaining({
        name: "ag-copy-train",
        image: `${registry.host}/ml/torch:1`,
        command: ["/bin/cp", "-R", "/workspace/.", "/.ag-workdir-copy"],
        securityContext: expect.objectContaining({ runAsNonRoot: true, runAsUser: 1000 }),
      }),
    ]);
    expect(result.warnings).toContainEqual(
      expect.stringContaining('so init container "ag-copy-train" copies it to an emptyDir'),
    );
    // Its own copier (the image's root build, run as the UID to read WORKDIR) is not warned about.
    expect(result.warnings.join("\n")).not.toContain('(container "ag-copy-train")');
    // The module's own restricted checks pass the pod it made, and mutating it again adds nothing.
    const again = await admit(env.controller, result.patched, { dryRun: true });
    expect(again.allowed).toBe(true);
    // (the stand-in API server defaults the pod again first: compared with what the webhook got)
    expect(again.patched.spec).toEqual((again.request.object as Obj).spec);
    expect((again.patched.spec as Obj).initContainers).toHaveLength(1);
    expect((await parity(trainer("ml/torch:1"))).differences).toEqual([]);
  });

  test("WORKDIR over securityContext.workdirCopyBytes: warned with why and the fix, not copied; check agrees", async () => {
    const result = await admitted("ml/torch-big:1");
    expect(result.allowed).toBe(true);
    const spec = result.patched.spec as Obj;
    expect(spec.initContainers).toBeUndefined();
    expect(JSON.stringify(spec)).not.toContain("ag-workdir");
    expect(result.warnings).toContainEqual(
      expect.stringMatching(
        /not copied to a writable emptyDir: 20\d{4} bytes under \/workspace are over securityContext\.workdirCopyBytes \(100000\)\)\. Fix: .*or mount a writable volume at \/workspace/,
      ),
    );
    expect((await parity(trainer("ml/torch-big:1"))).differences).toEqual([]);
  });
});

describe("a hostile registry's layers: bounded, said, and the controller answers meanwhile", () => {
  /** The pod is answered within the budget; later (the read done) with the reason. */
  async function warnedFor(name: string, reason: string | RegExp) {
    const begun = Date.now();
    const first = await admit(env.controller, trainer(`evil/${name}:1`, `${name}-1`), {
      dryRun: true,
    });
    expect(Date.now() - begun).toBeLessThan(BUDGET_MS + 3000);
    expect(first.allowed).toBe(true);
    // Another review meanwhile, answered.
    const other = await admit(env.controller, trainer("ok/app:1", `${name}-other`), {
      dryRun: true,
    });
    expect(other.allowed).toBe(true);
    const later = await admitted(`evil/${name}:1`);
    expect((later.patched.spec as Obj).securityContext).toMatchObject({ runAsUser: 1000 });
    const warning = later.warnings.find(w => w.includes(`runs as user "ml", a name`)) ?? "";
    expect(warning).toMatch(reason);
    expect(Buffer.byteLength(warning)).toBeLessThan(1024);
    return warning;
  }

  test("a gzip bomb: stopped by the ratio guard after a few MiB", async () => {
    await warnedFor("bomb", "a layer decompresses over 200 times its size");
    expect(served.get("bomb")!.bytes).toBeLessThan(4 * MiB);
    await eventually(() => expect(served.get("bomb")!.closed).toBe(true));
  });

  test("an endless tar: stopped at images.layerBytes", async () => {
    await warnedFor("endless", /over the bytes left for this image .*images\.layerBytes/);
    await eventually(() => expect(served.get("endless")!.closed).toBe(true));
    // What the registry wrote past the cap is what sockets buffer, not more.
    expect(served.get("endless")!.bytes).toBeLessThan(LAYER_BYTES + 16 * MiB);
  });

  test("a 1 GiB /etc/passwd: streamed to the cap, never held; the controller's memory stays", async () => {
    const rss = () =>
      Number(
        /^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${env.controller.pid}/status`, "utf8"))![1],
      ) / 1024;
    const before = rss();
    await warnedFor("passwd1g", /images\.layerBytes/);
    await eventually(() => expect(served.get("passwd1g")!.closed).toBe(true));
    expect(served.get("passwd1g")!.bytes).toBeLessThan(LAYER_BYTES + 16 * MiB);
    expect(rss() - before).toBeLessThan(128);
  });

  test("a layer that never ends: given up at the lookup's deadline, its connection closed", async () => {
    await warnedFor("drip", "the image's files were not read: the layers were not read in time");
    await eventually(() => expect(served.get("drip")!.closed).toBe(true), 20_000);
  }, 60_000);

  test("a passwd line of 100,000 fields is skipped; the next lines are read", async () => {
    const result = await admitted("evil/fields:1");
    expect((result.patched.spec as Obj).securityContext).toMatchObject({ runAsUser: 1003 });
  });

  test("a symlinked /etc/passwd and WORKDIR that climb out stay in the image (found absent there)", async () => {
    await warnedFor("escape", `(the image has no /etc/passwd)`);
  });

  test("a symlinked /etc/passwd that loops: bounded, said", async () => {
    await warnedFor("loop", "(/etc/passwd is a loop of links)");
  });
});
