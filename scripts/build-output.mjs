// Where `pepr build` wrote the module, for the steps `npm run build` runs after it: dist/, or the
// directory given as the first argument (a variant build, test/support/variant-build.ts).
import { readFileSync } from "node:fs";

export const { pepr } = JSON.parse(
  readFileSync(new URL("../package.json", import.meta.url), "utf8"),
);
export const dist = process.argv[2]
  ? new URL(`file://${process.argv[2].replace(/\/?$/, "/")}`)
  : new URL("../dist/", import.meta.url);
/** dist/pepr-module-<uuid>.yaml, what `kubectl apply -f` installs. */
export const manifest = new URL(`pepr-module-${pepr.uuid}.yaml`, dist);
/** dist/<uuid>-chart/, the Helm chart. */
export const chart = new URL(`${pepr.uuid}-chart/`, dist);
