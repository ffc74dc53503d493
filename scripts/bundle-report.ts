// What the module's bundle holds, by package and by file, and what each package costs the module
// Secret that `kubectl apply` must fit in its last-applied annotation (docs/deploy.md).
//
//   npm run bundle:report              # the top 12 packages and files
//   npm run bundle:report -- --top 30
//
// It bundles pepr.ts as `pepr build` does (Pepr 1.1.4, node_modules/pepr/src/cli/build/buildModule.ts:
// the same esbuild options and externals), then gzips and base64-encodes the code as Pepr's
// getModuleSecret does: the Secret it prints is the one in dist/, byte for byte (the e2e test
// deploy-artifacts checks it). "Secret bytes saved if gone" rebuilds without that one package:
// gzip does not add up per file, so minified bytes alone mislead.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { gzipSync } from "node:zlib";
import { build, type BuildOptions, type Metafile } from "esbuild";
import { parseAllDocuments } from "yaml";

/** The API server's limit on all annotations of an object: kubectl's last-applied copy must fit. */
export const ANNOTATION_LIMIT = 262_144;
/** Room kept free for the next feature; test/e2e/deploy-artifacts fails past it. */
export const SECRET_HEADROOM = 40_000;
export const SECRET_LIMIT = ANNOTATION_LIMIT - SECRET_HEADROOM;

const ROOT = resolve(__dirname, "..");

/** The size that counts: the Secret as JSON, as kubectl copies it into the annotation. */
export const secretBytes = (secret: object): number => Buffer.byteLength(JSON.stringify(secret));

/** The module Secret in a manifest `pepr build` wrote (dist/pepr-module-<uuid>.yaml). */
export function moduleSecretOf(manifest: string): object {
  const secret = parseAllDocuments(readFileSync(manifest, "utf8"))
    .map(d => d.toJS() as { kind?: string; metadata?: { name?: string } })
    .find(o => o.kind === "Secret" && o.metadata?.name?.endsWith("-module"));
  if (!secret) throw new Error(`${manifest}: no module Secret`);
  return secret;
}

/** The module Secret Pepr's build writes for this code (getModuleSecret in k8sObjects.ts). */
function moduleSecret(code: Uint8Array, uuid: string): object {
  const hash = createHash("sha256").update(code).digest("hex");
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: `pepr-${uuid}-module`, namespace: "pepr-system" },
    type: "Opaque",
    data: { [`module-${hash}.js.gz`]: gzipSync(code).toString("base64") },
  };
}

/** `pepr build`'s esbuild options: Pepr's own dependencies, pepr and the Kubernetes client stay out. */
function peprBuildOptions(root: string, uuid: string): BuildOptions {
  const pepr = JSON.parse(readFileSync(join(root, "node_modules/pepr/package.json"), "utf8"));
  return {
    absWorkingDir: root,
    bundle: true,
    entryPoints: ["pepr.ts"],
    external: [...Object.keys(pepr.dependencies), "pepr", "@kubernetes/client-node"],
    format: "cjs",
    keepNames: true,
    legalComments: "external",
    metafile: true,
    minify: true,
    // The name only shows in the sourceMappingURL comment, which the Secret carries.
    outfile: join(root, "dist", `pepr-${uuid}.js`),
    platform: "node",
    sourcemap: true,
    treeShaking: true,
    write: false,
    logLevel: "error",
  };
}

async function bundle(options: BuildOptions, uuid: string) {
  const result = await build(options);
  const js = result.outputFiles!.find(f => f.path.endsWith(".js"))!;
  const meta = result.metafile!;
  const output = Object.values(meta.outputs).find(o => o.entryPoint)!;
  return { code: js.contents, output, secret: secretBytes(moduleSecret(js.contents, uuid)) };
}

/** `node_modules/@swimlane/docker-reference/lib/x.js` → `@swimlane/docker-reference`; own files → their folder. */
export function packageOf(file: string): string {
  const dep = file.match(/.*node_modules\/((?:@[^/]+\/)?[^/]+)/);
  if (dep) return dep[1];
  const parts = file.split("/");
  return parts.length > 2 ? `${parts[0]}/${parts[1]}` : parts[0];
}

export interface Contributor {
  name: string;
  /** From node_modules (not Pepr's nor its dependencies': those its image has). */
  dependency: boolean;
  /** Minified bytes in the bundle. */
  bytes: number;
  /** For a package from node_modules: what the Secret would lose without it. */
  secretSaved?: number;
}

export interface BundleReport {
  bundleBytes: number;
  /** Packages bundled from more than one folder (two versions, or a copy npm could not dedupe). */
  duplicated: string[];
  secretBytes: number;
  limit: number;
  packages: Contributor[];
  files: Contributor[];
}

export async function bundleReport(root = ROOT, top = 12): Promise<BundleReport> {
  const uuid = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).pepr.uuid as string;
  const options = peprBuildOptions(root, uuid);
  const whole = await bundle(options, uuid);
  const inputs = Object.entries(whole.output.inputs as Metafile["outputs"][string]["inputs"]);
  const byPackage = new Map<string, number>();
  for (const [file, { bytesInOutput }] of inputs)
    byPackage.set(packageOf(file), (byPackage.get(packageOf(file)) ?? 0) + bytesInOutput);
  const copies = new Map<string, Set<string>>();
  for (const [file] of inputs) {
    const root = file.match(/^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//)?.[1];
    if (root) copies.set(packageOf(file), (copies.get(packageOf(file)) ?? new Set()).add(root));
  }
  const largest = (list: Contributor[]) => list.sort((a, b) => b.bytes - a.bytes).slice(0, top);
  const dependency = (name: string) =>
    inputs.some(([file]) => file.includes(`node_modules/${name}/`));
  const packages = largest(
    [...byPackage].map(([name, bytes]) => ({ name, bytes, dependency: dependency(name) })),
  );
  for (const p of packages.filter(p => p.dependency)) {
    const without = await bundle({ ...options, external: [...options.external!, p.name] }, uuid);
    p.secretSaved = whole.secret - without.secret;
  }
  return {
    bundleBytes: whole.code.length,
    duplicated: [...copies]
      .filter(([, roots]) => roots.size > 1)
      .map(([name, roots]) => `${name} (${[...roots].join(", ")})`),
    secretBytes: whole.secret,
    limit: SECRET_LIMIT,
    packages,
    files: largest(
      inputs.map(([name, { bytesInOutput }]) => ({
        name,
        bytes: bytesInOutput,
        dependency: name.includes("node_modules/"),
      })),
    ),
  };
}

const kb = (n: number) => `${(n / 1000).toFixed(1)} KB`;

export function formatReport(r: BundleReport): string {
  const share = (n: number) => `${((100 * n) / r.bundleBytes).toFixed(1)}%`.padStart(6);
  const room = r.limit - r.secretBytes;
  return [
    `module Secret ${r.secretBytes.toLocaleString("en")} bytes (gzip + base64 of a ${kb(r.bundleBytes)} bundle); ` +
      `limit ${r.limit.toLocaleString("en")} (${ANNOTATION_LIMIT.toLocaleString("en")} annotation bytes - ${SECRET_HEADROOM.toLocaleString("en")} headroom): ` +
      (room >= 0
        ? `${room.toLocaleString("en")} bytes to spare`
        : `${(-room).toLocaleString("en")} bytes over`),
    `packages bundled twice: ${r.duplicated.join("; ") || "none"}`,
    "",
    "by package or own folder          minified  share   Secret bytes saved if gone",
    ...r.packages.map(
      p =>
        `  ${p.name.padEnd(32)}${kb(p.bytes).padStart(9)}${share(p.bytes)}   ${p.secretSaved === undefined ? "" : p.secretSaved.toLocaleString("en")}`,
    ),
    "",
    "by file                                                       minified  share",
    ...r.files.map(f => `  ${f.name.padEnd(60)}${kb(f.bytes).padStart(9)}${share(f.bytes)}`),
  ].join("\n");
}

if (require.main === module) {
  const at = process.argv.indexOf("--top");
  const top = at > 0 ? Number(process.argv[at + 1]) : 12;
  bundleReport(ROOT, top).then(
    r => console.log(formatReport(r)),
    e => {
      console.error(e);
      process.exit(1);
    },
  );
}
