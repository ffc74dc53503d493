// An image's files read from its layers (lib/images/image-files.ts, image-paths.ts) through the
// registry client, against the tests' registry serving layers as GNU tar writes them: top-down,
// stopping at the first layer that answers, whiteouts and opaque directories respected, links
// resolved inside the image only, each layer read once for every image sharing it.
import { LayerCache, type FilesOptions } from "../../../lib/images/image-files";
import { lookupNode, resolvePath, type LayerFindings } from "../../../lib/images/image-paths";
import { createHash } from "node:crypto";
import { fetchImageConfig } from "../../../lib/images/registry-client";
import { parseImage, type ImageRef } from "../../../lib/objects/image-reference";
import {
  END,
  fileEntry,
  header,
  GZIP,
  gnuTar,
  gzip,
  PLAIN,
  passwdOf,
  putLayeredImage,
  ROOT_BASE_FILES,
  ZSTD,
  type LayerFile,
} from "../../support/layers";
import { TestRegistry } from "../../support/registry";

const AMD64 = { os: "linux", architecture: "amd64" };
let registry: TestRegistry;
let cache: LayerCache;

beforeEach(async () => {
  registry = new TestRegistry();
  await registry.start();
  cache = new LayerCache();
});
afterEach(() => registry.stop());

const ref = (path: string): ImageRef => {
  const parsed = parseImage(`${registry.host}/${path}`);
  if (!parsed.ok) throw new Error(parsed.reason);
  return parsed.ref;
};

async function filesOf(path: string, files: Partial<FilesOptions> = {}) {
  const result = await fetchImageConfig(ref(path), AMD64, {
    plainHttp: new Set([registry.host]),
    signal: AbortSignal.timeout(10_000),
    files: { maxBytes: 64 << 20, maxUncompressedBytes: 256 << 20, cache, ...files },
  });
  if (!result.ok) throw new Error(result.detail);
  return result.config.files;
}

const layer = (files: LayerFile[], compressed = true) => {
  const tar = gnuTar(files);
  return compressed ? { body: gzip(tar), mediaType: GZIP } : { body: tar, mediaType: PLAIN };
};

const BASE = layer([
  { path: "bin" },
  { path: "etc" },
  { path: "etc/passwd", content: passwdOf() },
  { path: "etc/group", content: "root:x:0:\n" },
  { path: "workspace" },
]);
/** What a Dockerfile's `RUN useradd -m ml && mkdir /app && chown ml /app` leaves. */
const USER_LAYER = layer([
  { path: "etc" },
  { path: "etc/passwd", content: passwdOf("ml:1002:1002:/home/ml") },
  { path: "etc/group", content: "root:x:0:\nml:x:1002:\ntrain:x:2000:ml\n" },
  { path: "home/ml", uid: 1002, gid: 1002, mode: 0o750 },
  { path: "app", uid: 1002, gid: 1002, mode: 0o755 },
]);
const filler = (n: number) =>
  layer([{ path: `opt/pkg${n}/lib.py`, content: "x".repeat(10_000 * n) }]);
const blobRequests = () => registry.countOf(/\/blobs\//);

describe("a named USER in numbers, from the layers", () => {
  it("five gzip layers, the user made in the second: its UID, GID and HOME, and WORKDIR's owner", async () => {
    putLayeredImage(registry, "ml/nb", "1", { User: "ml", WorkingDir: "/app" }, [
      BASE,
      USER_LAYER,
      filler(1),
      filler(2),
      filler(3),
    ]);
    expect(await filesOf("ml/nb:1")).toEqual({
      user: { uid: 1002, gid: 1002, home: "/home/ml" },
      workdir: { uid: 1002, gid: 1002, mode: 0o755 },
    });
  });

  it("USER name:group and uid:group take the group from /etc/group (plain tar layers too)", async () => {
    const plain = [layer([{ path: "etc" }, { path: "etc/passwd", content: passwdOf() }], false)];
    putLayeredImage(registry, "ml/a", "1", { User: "ml:train" }, [...plain, USER_LAYER]);
    putLayeredImage(registry, "ml/b", "1", { User: "1002:train" }, [...plain, USER_LAYER]);
    expect((await filesOf("ml/a:1"))?.user).toEqual({ uid: 1002, gid: 2000, home: "/home/ml" });
    expect((await filesOf("ml/b:1"))?.user).toEqual({ uid: 1002, gid: 2000, home: "/home/ml" });
  });

  it("a name the image does not list: a note naming it", async () => {
    putLayeredImage(registry, "ml/x", "1", { User: "mlsvc" }, [BASE, USER_LAYER]);
    expect(await filesOf("ml/x:1")).toEqual({
      note: `the image's /etc/passwd does not list "mlsvc"`,
    });
  });

  it("stops at the first layer that answers: the layers below are not fetched", async () => {
    putLayeredImage(registry, "ml/top", "1", { User: "ml" }, [BASE, filler(1), USER_LAYER]);
    expect((await filesOf("ml/top:1"))?.user?.uid).toBe(1002);
    expect(blobRequests()).toBe(2); // the config, then the top layer only
  });

  it("a layer read once serves every image sharing it; what is kept is what rules read", async () => {
    const layers = [BASE, USER_LAYER, filler(1)];
    putLayeredImage(registry, "ml/one", "1", { User: "ml" }, layers);
    putLayeredImage(registry, "ml/two", "1", { User: "ml", Env: ["X=1"] }, layers);
    await filesOf("ml/one:1");
    const before = blobRequests();
    expect((await filesOf("ml/two:1"))?.user?.uid).toBe(1002);
    expect(blobRequests() - before).toBe(1); // its config only
    const kept = JSON.stringify([...cache.map.values()], (_k, v) =>
      v instanceof Map || v instanceof Set ? [...v] : v,
    );
    expect(kept).not.toContain("x".repeat(100)); // no layer bytes, only the parsed entries
    expect(kept).toContain('"name":"ml"');
  });
});

describe("whiteouts and links", () => {
  it("a whiteout of /etc/passwd above hides the one below", async () => {
    putLayeredImage(registry, "ml/wh", "1", { User: "ml" }, [
      USER_LAYER,
      layer([{ path: "etc" }, { path: "etc/.wh.passwd", content: "" }]),
    ]);
    expect((await filesOf("ml/wh:1"))?.note).toBe("the image has no /etc/passwd");
  });

  it("an opaque /etc above hides the lower /etc/passwd; its own files stay", async () => {
    putLayeredImage(registry, "ml/opq", "1", { User: "ml" }, [
      USER_LAYER,
      layer([
        { path: "etc" },
        { path: "etc/.wh..wh..opq", content: "" },
        { path: "etc/hostname", content: "x" },
      ]),
    ]);
    expect((await filesOf("ml/opq:1"))?.note).toBe("the image has no /etc/passwd");
  });

  it("a whiteout of /etc, then /etc made again above: only the new /etc counts", async () => {
    putLayeredImage(registry, "ml/again", "1", { User: "ml" }, [
      USER_LAYER,
      layer([{ path: ".wh.etc", content: "" }]),
      layer([{ path: "etc" }, { path: "etc/passwd", content: passwdOf("ml:3003:3003:/h") }]),
    ]);
    expect((await filesOf("ml/again:1"))?.user).toEqual({ uid: 3003, gid: 3003, home: "/h" });
  });

  it("follows a symlinked /etc/passwd into a lower layer; `..` past the root stays in the image", async () => {
    putLayeredImage(registry, "ml/link", "1", { User: "ml" }, [
      layer([
        { path: "usr/lib" },
        { path: "usr/lib/passwd", content: passwdOf("ml:4004:4004:/w") },
      ]),
      layer([{ path: "etc" }, { path: "etc/passwd", symlink: "../../../../../usr/lib/passwd" }]),
    ]);
    expect((await filesOf("ml/link:1"))?.user?.uid).toBe(4004);
  });

  it("an absolute symlink names the image's own path, and a hardlink its own file", async () => {
    putLayeredImage(registry, "ml/abs", "1", { User: "ml", WorkingDir: "/work" }, [
      layer([
        { path: "data/home", uid: 5005, gid: 5005, mode: 0o700 },
        { path: "etc" },
        { path: "etc/passwd.real", content: passwdOf("ml:5005:5005:/data/home") },
        { path: "etc/passwd", hardlink: "etc/passwd.real" },
      ]),
      layer([{ path: "work", symlink: "/data/home" }]),
    ]);
    expect(await filesOf("ml/abs:1")).toEqual({
      user: { uid: 5005, gid: 5005, home: "/data/home" },
      workdir: { uid: 5005, gid: 5005, mode: 0o700 },
    });
  });

  it("a loop of symlinks is bounded: said, not followed for ever", async () => {
    putLayeredImage(registry, "ml/loop", "1", { User: "ml", WorkingDir: "/w" }, [
      layer([
        { path: "etc" },
        { path: "etc/passwd", symlink: "/etc/passwd2" },
        { path: "etc/passwd2", symlink: "passwd" },
        { path: "w", symlink: "w" },
      ]),
    ]);
    expect(await filesOf("ml/loop:1")).toEqual({ note: "/etc/passwd is a loop of links" });
  });
});

describe("what is not read, said so", () => {
  it("a zstd layer", async () => {
    putLayeredImage(registry, "ml/zstd", "1", { User: "ml" }, [
      USER_LAYER,
      { body: Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0]), mediaType: ZSTD },
    ]);
    expect((await filesOf("ml/zstd:1"))?.note).toBe(
      "the image's files were not read: a layer is compressed with zstd, which the module does not read",
    );
  });

  it("a layer whose bytes are not its digest: not believed, not kept", async () => {
    const image = putLayeredImage(registry, "ml/forged", "1", { User: "ml" }, [USER_LAYER]);
    expect(image).toMatch(/^sha256:/);
    const forged = gzip(
      gnuTar([{ path: "etc" }, { path: "etc/passwd", content: passwdOf("ml:0:0:/") }]),
    );
    registry.overrides.push({
      path: /\/blobs\/sha256:/,
      handle: (req, res) => {
        if (!/ml\/forged\/blobs/.test(req.url ?? "") || registry.countOf(/forged\/blobs/) < 2)
          return false;
        res.writeHead(200).end(forged);
      },
    });
    expect((await filesOf("ml/forged:1"))?.note).toMatch(
      /^the image's files were not read: a layer's digest is sha256:/,
    );
    expect(cache.map.size).toBe(0);
  });

  it("layers over the bytes left for the image", async () => {
    putLayeredImage(registry, "ml/big", "1", { User: "ml" }, [USER_LAYER, filler(20)]);
    expect((await filesOf("ml/big:1", { maxBytes: 1000 }))?.note).toMatch(
      /over the bytes left for this image \(\d+ > \d+; images.layerBytes\)$/,
    );
  });
});

it("a 1 GiB /etc/passwd is streamed past, not held: said too large, the heap does not grow by it", async () => {
  const MiB = 1024 * 1024;
  const chunk = Buffer.alloc(MiB, "a");
  const head = header({ name: "etc/passwd", size: 1024 * MiB });
  const tail = Buffer.concat([fileEntry("etc/group", "root:x:0:\n"), END]);
  const hash = createHash("sha256").update(head);
  for (let i = 0; i < 1024; i++) hash.update(chunk);
  const digest = `sha256:${hash.update(tail).digest("hex")}`;
  registry.overrides.push({
    path: new RegExp(`/blobs/${digest}$`),
    handle: (_req, res) => {
      res.writeHead(200);
      let i = 0;
      const pump = () => {
        while (i <= 1025) {
          const next = i === 0 ? head : i <= 1024 ? chunk : tail;
          i++;
          if (i > 1025) return void res.end(next);
          if (!res.write(next)) return void res.once("drain", pump);
        }
      };
      pump();
    },
  });
  putLayeredImage(registry, "ml/huge", "1", { User: "ml" }, [
    USER_LAYER,
    { digest, mediaType: PLAIN },
  ]);
  const heap = process.memoryUsage().heapUsed + process.memoryUsage().arrayBuffers;
  const files = await filesOf("ml/huge:1", {
    maxBytes: 2048 * MiB,
    maxUncompressedBytes: 2048 * MiB,
  });
  expect(files).toEqual({ note: "/etc/passwd is over 1048576 bytes; not read" });
  const after = process.memoryUsage().heapUsed + process.memoryUsage().arrayBuffers;
  expect(after - heap).toBeLessThan(128 * MiB);
}, 120_000);

const ROOT_BASE = layer(ROOT_BASE_FILES);

describe("a root image's WORKDIR, for the copy (ADR 0033)", () => {
  const ROOT = { rootWorkdir: true };

  it("WORKDIR made and filled in upper layers: its owner, every layer's bytes under it, the copier through /bin's link", async () => {
    putLayeredImage(registry, "ml/torch", "1", { WorkingDir: "/workspace" }, [
      ROOT_BASE,
      layer([{ path: "workspace" }, { path: "workspace/train.py", content: "t".repeat(1000) }]),
      filler(1),
      layer([
        { path: "workspace" },
        { path: "workspace/conf" },
        { path: "workspace/conf/a.yaml", content: "a".repeat(500) },
      ]),
    ]);
    expect(await filesOf("ml/torch:1", ROOT)).toEqual({
      workdir: { uid: 0, gid: 0, mode: 0o755 },
      copier: true,
      workdirTree: { bytes: 1500, entries: 3, unreadable: 0 },
    });
  });

  it("an opaque WORKDIR above hides what lies below: those layers are not read for it", async () => {
    putLayeredImage(registry, "ml/opq", "1", { User: "0", WorkingDir: "/workspace" }, [
      layer([{ path: "workspace" }, { path: "workspace/big.bin", content: "b".repeat(50_000) }]),
      ROOT_BASE,
      layer([
        { path: "workspace" },
        { path: "workspace/.wh..wh..opq", content: "" },
        { path: "workspace/run.py", content: "r".repeat(10) },
      ]),
    ]);
    expect((await filesOf("ml/opq:1", ROOT))?.workdirTree).toEqual({
      bytes: 10,
      entries: 1,
      unreadable: 0,
    });
    expect(blobRequests()).toBe(3); // the config, the top layer, ROOT_BASE for /bin/cp; not the bottom
  });

  it("no /bin/cp (distroless), and a file only root may read: both said", async () => {
    putLayeredImage(registry, "ml/bare", "1", { User: "root", WorkingDir: "/srv" }, [
      layer([{ path: "srv" }, { path: "srv/key", content: "k", mode: 0o600 }]),
    ]);
    expect(await filesOf("ml/bare:1", ROOT)).toEqual({
      workdir: { uid: 0, gid: 0, mode: 0o755 },
      copier: false,
      workdirTree: { bytes: 1, entries: 1, unreadable: 1 },
    });
  });

  it("not read without rootWorkdir (securityContext.workdirCopy off), nor for WORKDIR /", async () => {
    putLayeredImage(registry, "ml/off", "1", { WorkingDir: "/workspace" }, [ROOT_BASE]);
    putLayeredImage(registry, "ml/slash", "1", { WorkingDir: "/" }, [ROOT_BASE]);
    expect(await filesOf("ml/off:1")).toBeUndefined();
    expect(await filesOf("ml/slash:1", ROOT)).toBeUndefined();
    expect(blobRequests()).toBe(2); // the two configs
  });
});

describe("image-paths: the merged view, pure", () => {
  const findings = (
    nodes: Record<string, "directory" | "file">,
    extra: Partial<LayerFindings> = {},
  ): LayerFindings => ({
    covered: new Map(["/", "/etc", "/etc/passwd"].map(p => [p, "meta" as const])),
    nodes: new Map(
      Object.entries(nodes).map(([p, type]) => [p, { type, uid: 0, gid: 0, mode: 0o755 }]),
    ),
    whiteouts: new Set(),
    opaque: new Set(),
    ...extra,
  });
  it("asks for the layer it must read before it answers", () => {
    expect(lookupNode([findings({})], "/etc/group", "meta")).toEqual({
      need: { layer: 0, path: "/etc/group", role: "meta" },
    });
    expect(resolvePath([findings({ "/etc": "directory" })], "/etc/passwd", "passwd")).toEqual({
      need: { layer: 0, path: "/etc/passwd", role: "passwd" },
    });
  });
  it("a file where a directory was hides what was below it", () => {
    const layers = [
      findings({ "/etc": "file" }),
      findings({ "/etc": "directory", "/etc/passwd": "file" }),
    ];
    expect(lookupNode(layers, "/etc/passwd", "meta")).toEqual({ absent: true });
  });
});

describe("a root image's Env-named cache dirs (ADR 0038)", () => {
  const DIRS = { rootDirs: true };

  it("read in one pass over its layers: a root-owned dir, a world-writable one, one absent; a file there is neither", async () => {
    putLayeredImage(
      registry,
      "ml/hf",
      "1",
      {
        WorkingDir: "/",
        Env: [
          "HF_HOME=/data/hf",
          "TORCH_HOME=/cache/torch",
          "XDG_CACHE_HOME=/nowhere/cache",
          "MPLCONFIGDIR=/etc/passwd",
        ],
      },
      [
        ROOT_BASE,
        layer([{ path: "data" }, { path: "data/hf", mode: 0o755 }]),
        layer([{ path: "cache" }, { path: "cache/torch", mode: 0o777 }]),
      ],
    );
    expect(await filesOf("ml/hf:1", DIRS)).toEqual({
      copier: true,
      dirs: [
        ["/data/hf", { uid: 0, gid: 0, mode: 0o755 }],
        ["/cache/torch", { uid: 0, gid: 0, mode: 0o777 }],
        ["/nowhere/cache", null],
      ],
    });
    // The config and each of the three layers once.
    expect(blobRequests()).toBe(4);
  });

  it("not read without rootDirs (securityContext.cacheDirs off), nor for an image with a numeric USER", async () => {
    putLayeredImage(registry, "ml/hf-off", "1", { Env: ["HF_HOME=/data/hf"] }, [ROOT_BASE]);
    putLayeredImage(registry, "ml/hf-user", "1", { User: "1001", Env: ["HF_HOME=/data/hf"] }, [
      ROOT_BASE,
    ]);
    expect(await filesOf("ml/hf-off:1")).toBeUndefined();
    expect(await filesOf("ml/hf-user:1", DIRS)).toBeUndefined();
    expect(blobRequests()).toBe(2);
  });
});
