// `pepr build` exits 0 even when TypeScript fails, writing no bundle: fail loudly instead.
// `--before` (run ahead of `pepr build`) removes the last build's bundle, so that a failed build
// cannot pass this check with a stale one.
import { existsSync, readFileSync, rmSync } from "node:fs";

const { pepr } = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
const bundle = new URL(`../dist/pepr-${pepr.uuid}.js`, import.meta.url);
if (process.argv.includes("--before")) {
  rmSync(bundle, { force: true });
  process.exit(0);
}
if (!existsSync(bundle)) {
  console.error(
    `build failed: ${bundle.pathname} was not written (see the TypeScript errors above)`,
  );
  process.exit(1);
}
// patches/@swimlane+docker-reference+2.0.1.patch, applied by `npm ci` (postinstall): the image
// reference grammar without it backtracks exponentially on some invalid images — a webhook hang.
// `npm ci --ignore-scripts` skips the patch; the bundle must not ship the unpatched grammar.
const code = readFileSync(bundle, "utf8");
if (!code.includes("(?:[._]|__|[-]+)") || code.includes("(?:[._]|__|[-]*)")) {
  console.error(
    "build failed: the bundle carries @swimlane/docker-reference's unpatched name grammar " +
      "(exponential backtracking); run `npx patch-package` (or `npm ci` with its scripts) and build again",
  );
  process.exit(1);
}
console.log(`bundle ok: dist/pepr-${pepr.uuid}.js`);
