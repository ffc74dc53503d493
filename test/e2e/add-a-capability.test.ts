// What the README promises a platform team: copy hello-pepr.ts, add it with one line to the list
// of capabilities, and it acts in the webhook and in `check`. Done here to a copy of the module,
// bundled as `pepr build` bundles it, run as the real controller. The same copy carries a
// capability whose fix throws, answered alike by both doors.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { examples, policies as modulePolicies } from "../../capabilities";
import type { KubeObject } from "../../lib/objects/pod";
import type { Policy, Validator } from "../../lib/engine/policy";
import { admit } from "../support/admission";
import { startController, type Controller } from "../support/controller";
import { copyModule, type ModuleCopy } from "../support/module-copy";
import { checkParity } from "../support/parity";
import { startStandIn, type StandInApi } from "../support/stand-in-api";
import { cachesSynced } from "../support/wait";

const exec = promisify(execFile);
let copy: ModuleCopy;
let api: StandInApi;
let controller: Controller;
let policies: Policy[];
let validators: Validator[];

const GREETED = "greeter.example.com/greeted";
const namespace = (name: string): KubeObject => ({
  apiVersion: "v1",
  kind: "Namespace",
  metadata: { name, creationTimestamp: new Date("2024-05-12T14:00:00Z") },
});
const pod = (labels: Record<string, string> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "web", namespace: "pepr-demo", labels },
  spec: { containers: [{ name: "web", image: "ghcr.io/org/web:1.0" }] },
});

beforeAll(async () => {
  copy = copyModule("add-a-capability");
  // 1. Copy hello-pepr.ts into capabilities/greeter/index.ts, named for its new place.
  copy.write(
    "capabilities/greeter/index.ts",
    copy
      .read("hello-pepr.ts")
      .replaceAll('from "./lib/', 'from "../../lib/')
      .replaceAll("hello.admission-guard.dev/", "greeter.example.com/")
      .replaceAll('"hello-pepr"', '"greeter"')
      .replaceAll("HelloPepr", "Greeter")
      .replaceAll("helloPeprPolicy", "greeterPolicy"),
  );
  // A capability whose fix throws on pods that ask for it (a bug's stand-in).
  copy.write(
    "capabilities/explodes/index.ts",
    [
      'import { capabilityOf } from "../../lib/pepr/adapter";',
      'import { policyOf } from "../../lib/engine/policy";',
      "const policy = policyOf(",
      "  {",
      '    name: "explodes",',
      '    description: "Throws in its fix on pods labelled explode=true",',
      "    rules: [],",
      "    fix({ template }) {",
      '      if (template.metadata.labels?.explode === "true") throw new Error("boom: a bug in a fix");',
      "      return [];",
      "    },",
      "  },",
      '  { fix: { pods: ["CREATE"] } },',
      ");",
      "export const Explodes = capabilityOf(policy);",
      "",
    ].join("\n"),
  );
  // 2. One line in the list (and its import).
  const list = copy
    .read("capabilities/index.ts")
    .replace(
      'import { ServiceAccount } from "./service-account";',
      'import { ServiceAccount } from "./service-account";\nimport { Greeter } from "./greeter";\nimport { Explodes } from "./explodes";',
    )
    .replace("  PayloadSize,\n", "  PayloadSize,\n  Greeter,\n  Explodes,\n");
  expect(list).toContain("  Greeter,\n");
  expect(list).toContain('import { Greeter } from "./greeter";');
  copy.write("capabilities/index.ts", list);

  const bundle = await copy.bundle();
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  ({ policies, validators } = require(join(copy.dir, "capabilities")) as {
    policies: Policy[];
    validators: Validator[];
  });
  api = await startStandIn({ objects: [namespace("pepr-demo"), namespace("team")] });
  controller = await startController({ api, bundle });
  await cachesSynced(api);
}, 120_000);

afterAll(async () => {
  await controller?.stop();
  await api?.stop();
  copy?.remove();
});

it("the copy is listed with the others, in order, for `check` and Pepr alike", () => {
  // The module's own areas (capabilities/index.ts), the two added after them, then the examples.
  expect(policies.map(p => p.name)).toEqual([
    ...modulePolicies.filter(p => !examples.includes(p)).map(p => p.name),
    "greeter",
    "explodes",
    ...examples.map(p => p.name),
  ]);
  expect(examples.map(p => p.name)).toEqual(["hello-pepr"]);
  // The Exemptions' validator is no policy: a capability of its own kind, listed apart.
  expect(validators.map(v => v.name)).toEqual(["exemptions"]);
});

it("acts in the webhook: the real controller fixes a pod with it, and says so", async () => {
  const r = await admit(controller, pod());
  expect(r.allowed).toBe(true);
  expect(r.patched.metadata?.labels?.[GREETED]).toBe("true");
  expect(r.warnings).toContain("admission-guard/greeter: fixed greet");
});

it("acts in `check`: the same fix, from the command line of the copy", async () => {
  const dir = copy.dir;
  copy.write("pod.yaml", JSON.stringify(pod()));
  const { stdout } = await exec(
    process.execPath,
    [join(dir, "bin", "admission-guard.mjs"), "check", "-o", "json", join(dir, "pod.yaml")],
    { cwd: dir },
  );
  const [result] = stdout
    .trim()
    .split("\n")
    .map(l => JSON.parse(l));
  expect(result.changes).toContainEqual(
    expect.objectContaining({ capability: "greeter", rule: "greet" }),
  );
  expect(result.object.metadata.labels[GREETED]).toBe("true");
});

it("a fix that throws: denied with the reason by the webhook and by `check`, word for word", async () => {
  const report = await checkParity(
    controller,
    {
      ...pod({ explode: "true" }),
      metadata: { ...pod().metadata, namespace: "team", labels: { explode: "true" } },
    },
    {
      objects: api.objects(),
      policies,
    },
  );
  expect(report.differences).toEqual([]);
  expect(report.e2e.allowed).toBe(false);
  expect(report.e2e.message).toContain(
    "admission-guard/explodes: the fix step failed on this object (boom: a bug in a fix)",
  );
});
