// The shipped policy tests (examples/tests) hold at the webhook, not only in `admission-guard test`:
// each file's cluster in the stand-in, its settings in the real controller's environment, each
// case's resource sent as the API server sends it. checkParity proves the controller and the engine
// agree on that request; the case's expectations are then compared with that same answer by the
// function `test` uses (compareCase).
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { parse as parseYaml } from "yaml";
import { compareCase } from "../../cli/policy-test";
import { parsePolicyTest, type PolicyTest } from "../../cli/policy-test-format";
import type { KubeObject } from "../../lib/objects/pod";
import { REPO_ROOT } from "../support/controller";
import { useEnvironment } from "../support/environment";
import { loadManifests } from "../support/manifests";
import { checkParity, settingsEnv } from "../support/parity";

const DIR = join(REPO_ROOT, "examples/tests");

/** A test's files and inline objects (the shipped ones name files and folders of examples/). */
const objectsOf = (entries: PolicyTest["resources"], from: string): KubeObject[] =>
  entries.flatMap(e =>
    typeof e === "string"
      ? loadManifests(join(from, e)).map(m => m.object)
      : [e as unknown as KubeObject],
  );

const tests = readdirSync(DIR)
  .filter(f => f.endsWith(".yaml"))
  .map(file => {
    const parsed = parsePolicyTest(parseYaml(readFileSync(join(DIR, file), "utf8")));
    if (!parsed.test) throw new Error(`${file}: ${parsed.problems.join("; ")}`);
    return { file, test: parsed.test };
  });

it("reads every shipped test file", () => {
  expect(tests.length).toBeGreaterThanOrEqual(10);
});

describe.each(tests)("examples/tests/$file at the webhook", ({ file, test }) => {
  const from = dirname(join(DIR, file));
  // Inline settings only: a settings file would be read the same way (the shipped ones have none).
  expect(typeof test.settings).not.toBe("string");
  const settings = (test.settings ?? {}) as Record<string, unknown>;
  const env = useEnvironment({
    objects: objectsOf(test.cluster ?? [], from),
    env: settingsEnv(settings),
  });
  const namespace = test.namespace ?? "default";
  const resources = objectsOf(test.resources, from).map(o => ({
    ...o,
    metadata: { ...o.metadata, namespace: o.metadata?.namespace ?? namespace },
  }));

  it.each(test.cases.map(c => [c.name, c] as const))("%s", async (_name, c) => {
    const [kind, ...rest] = c.resource.split("/");
    const name = rest[rest.length - 1];
    const resource = resources.find(
      o =>
        o.kind === kind &&
        o.metadata?.name === name &&
        (rest.length === 1 || o.metadata?.namespace === rest[0]),
    );
    expect(resource).toBeDefined();
    const report = await checkParity(env.controller, resource!, {
      objects: env.api.objects(),
      settings,
      operation: test.operation,
    });
    expect(report.differences).toEqual([]);
    expect(
      compareCase(c, { source: { file, document: 1 }, input: resource!, review: report.engine }),
    ).toEqual([]);
  });
});
