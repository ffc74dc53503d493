// Pepr's floor for the benchmarks: bench/pepr-floor.ts bundled as `pepr build` bundles a module.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";
import { REPO_ROOT } from "../test/support/controller";

/**
 * Pepr's floor bundle. `pepr build -e bench/pepr-floor.ts` takes the entry point's directory as
 * the module root (it looks for bench/package.json and bench/tsconfig.json, and fails), so the
 * entry is bundled here with the options of pepr build (src/cli/build/buildModule.ts): Pepr and
 * its dependencies external, CommonJS, minified, names kept. Pepr itself is never in the bundle:
 * at run time `require("pepr")` loads node_modules/pepr/dist/lib.js.
 */
export async function buildFloor(outfile: string) {
  const peprPkg = JSON.parse(
    readFileSync(join(REPO_ROOT, "node_modules/pepr/package.json"), "utf8"),
  );
  await build({
    absWorkingDir: REPO_ROOT,
    bundle: true,
    entryPoints: ["bench/pepr-floor.ts"],
    external: [...Object.keys(peprPkg.dependencies), "pepr", "@kubernetes/client-node"],
    format: "cjs",
    keepNames: true,
    minify: true,
    outfile,
    sourcemap: true,
    platform: "node",
    treeShaking: true,
    logLevel: "warning",
  });
}
