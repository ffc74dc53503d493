// Pepr's controller image, built here: the generated manifest names
// ghcr.io/defenseunicorns/pepr/controller:v1.1.4 and runs `node /app/node_modules/pepr/dist/
// controller.js <hash>` as UID 65532, which writes the module to /app and forks it. Pepr's image is
// Node.js with Pepr's package tree at /app/node_modules: this one is this machine's Node.js (with
// the shared libraries it loads) and this repository's node_modules, so the unchanged output of
// `pepr build` runs on the node.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../../support/controller";
import { buildImage, type BuiltImage, type ImageFile } from "./images";

const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8"));

/** The image the generated manifest names (its Deployments' `image`). */
export function controllerImageName(): string {
  const manifest = readFileSync(
    join(REPO_ROOT, "dist", `pepr-module-${pkg.pepr.uuid}.yaml`),
    "utf8",
  );
  const image = /image: (\S*pepr\/controller:\S+)/.exec(manifest)?.[1];
  if (!image) throw new Error("the generated manifest names no Pepr controller image");
  return image;
}

/** Node.js and the shared libraries it loads (`ldd`), each at the path the loader looks for. */
function nodeFiles(): ImageFile[] {
  const node = process.execPath;
  const libraries = execFileSync("ldd", [node], { encoding: "utf8" })
    .split("\n")
    .map(line => /(\/\S+) \(0x/.exec(line)?.[1])
    .filter((path): path is string => Boolean(path));
  return [
    { path: "usr/bin/node", copyFrom: node, mode: 0o755 },
    ...libraries.map(lib => ({ path: lib.slice(1), copyFrom: lib, mode: 0o755 })),
  ];
}

export function buildControllerImage(outDir: string): BuiltImage {
  return buildImage(
    {
      tags: [controllerImageName()],
      files: [
        { path: "etc", mode: 0o755 },
        {
          path: "etc/passwd",
          content:
            "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532::/home/nonroot:/sbin/nologin\n",
        },
        { path: "etc/group", content: "root:x:0:\nnonroot:x:65532:\n" },
        { path: "tmp", mode: 0o1777 },
        ...nodeFiles(),
        // The controller writes the module it was given to /app, as the nonroot user.
        { path: "app", mode: 0o755, uid: 65532, gid: 65532 },
        { path: "app/node_modules", copyTree: join(REPO_ROOT, "node_modules") },
      ],
      config: {
        Entrypoint: ["/usr/bin/node"],
        WorkingDir: "/app",
        User: "65532:65532",
        Env: ["PATH=/usr/bin:/bin", "NODE_ENV=production"],
      },
    },
    outDir,
  );
}
