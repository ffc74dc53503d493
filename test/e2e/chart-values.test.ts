// The Helm chart `npm run build` writes: Pepr's values.schema.json refuses keys it does not list,
// so every top-level key the build adds to values.yaml must be in the schema, or `helm install`
// fails before anything is applied ("Additional property ... is not allowed").
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import cfg from "../../package.json";

const chart = join(__dirname, "../..", "dist", `${cfg.pepr.uuid}-chart`);

interface Schema {
  $ref?: string;
  definitions?: Record<string, Schema>;
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
  type?: string;
}

const built = existsSync(join(chart, "values.schema.json"));

describe("the built chart's values against its schema", () => {
  // jest runs after `npm run build` (npm test); a missing chart is a failure, not a skip.
  it("was built", () => expect(built).toBe(true));

  it("lists every top-level key of values.yaml (the schema refuses the others)", () => {
    const whole = JSON.parse(readFileSync(join(chart, "values.schema.json"), "utf8")) as Schema;
    const root = whole.$ref ? whole.definitions![whole.$ref.split("/").pop()!] : whole;
    expect(root.additionalProperties).toBe(false);
    const values = parse(readFileSync(join(chart, "values.yaml"), "utf8")) as Record<
      string,
      unknown
    >;
    const unlisted = Object.keys(values).filter(key => !root.properties?.[key]);
    expect(unlisted).toEqual([]);
    // The keys the build adds, each with its switch.
    for (const key of ["monitoring", "namespaceKeysPolicy"])
      expect(root.properties?.[key]).toBeDefined();
  });
});
