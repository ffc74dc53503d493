// Where `pepr build` wrote the module, for the steps `npm run build` runs after it: dist/, or the
// directory given as the first argument (a variant build, test/support/variant-build.ts).
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { parseDocument } from "yaml";

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

/**
 * Adds a top-level key with its defaults to the chart's values.yaml and, because Pepr's
 * values.schema.json refuses keys it does not list, to the schema with `schema` (as strict).
 * Without the schema entry `helm install` fails ("Additional property ... is not allowed").
 */
export function addChartValues(key, defaults, schema) {
  const values = new URL("values.yaml", chart);
  if (!existsSync(values)) throw new Error(`${chart.pathname}: no Helm chart there`);
  const doc = parseDocument(readFileSync(values, "utf8"));
  doc.set(key, doc.createNode(defaults));
  writeFileSync(values, doc.toString());
  const schemaFile = new URL("values.schema.json", chart);
  if (!existsSync(schemaFile)) return;
  const whole = JSON.parse(readFileSync(schemaFile, "utf8"));
  const root = whole.$ref?.startsWith("#/definitions/")
    ? whole.definitions?.[whole.$ref.slice("#/definitions/".length)]
    : whole;
  if (!root?.properties) throw new Error(`${schemaFile.pathname}: no root properties`);
  if (root.additionalProperties !== false) return;
  root.properties[key] = schema;
  writeFileSync(schemaFile, `${JSON.stringify(whole, null, 2)}\n`);
}
