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
console.log(`bundle ok: dist/pepr-${pepr.uuid}.js`);
