// The securityContext fix reads the image it fixes, through the real controller: the controller
// reads each image's config from a registry of the tests' own (loopback, plain HTTP as
// images.plainHttp allows), `check --inspect-images` reads the same and says the same, and a
// registry that is slow or gone costs at most the budget and is never a denial by itself.
import { imageInspectorFor } from "../../lib/images/inspector";
import { parseSettings } from "../../lib/settings";
import type { KubeObject } from "../../lib/objects/pod";
import { admit } from "../support/admission";
import { startEnvironment, type Environment } from "../support/environment";
import { checkParity } from "../support/parity";
import { TestRegistry } from "../support/registry";
import { eventually } from "../support/wait";

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const registry = new TestRegistry();
let env: Environment;
const BUDGET_MS = 300;
const settings = () => ({
  images: { inspect: true, plainHttp: [registry.host], budgetMs: BUDGET_MS },
});

beforeAll(async () => {
  await registry.start();
  registry.putImage("ml/numeric", "1", { User: "1001:1001", WorkingDir: "/app" });
  registry.putImage("ml/root", "1", { WorkingDir: "/workspace", Env: ["PATH=/bin"] });
  registry.putImage("ml/slow", "1", { User: "1001" });
  env = await startEnvironment({
    objects: [{ apiVersion: "v1", kind: "Namespace", metadata: { name: "ml" } }],
    env: {
      ADMISSION_GUARD_IMAGES_INSPECT: "true",
      // 127.0.0.1:1, a registry that is gone, listed: a loopback host is read only when listed.
      ADMISSION_GUARD_IMAGES_PLAIN_HTTP: `${registry.host},127.0.0.1:1`,
      ADMISSION_GUARD_IMAGES_BUDGET_MS: String(BUDGET_MS),
    },
  });
}, 60_000);
afterAll(async () => {
  await env?.stop();
  await registry.stop();
});

const trainer = (image: string): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "train", namespace: "ml" },
  spec: { containers: [{ name: "train", image: `${registry.host}/${image}` }] },
});

async function parity(pod: KubeObject) {
  // As `check --inspect-images` builds it (a root image's WORKDIR is read too), with a longer budget.
  const images = imageInspectorFor(
    parseSettings({ images: { ...settings().images, budgetMs: 5000 } }, "test settings"),
  );
  return checkParity(env.controller, pod, {
    objects: env.api.objects(),
    settings: settings(),
    images,
  });
}

test("a numeric non-root image keeps its own user: runAsUser/runAsGroup from its config, no HOME", async () => {
  const result = await admit(env.controller, trainer("ml/numeric:1"));
  expect(result.allowed).toBe(true);
  const spec = result.patched.spec as Obj;
  expect(spec.securityContext).toMatchObject({
    runAsNonRoot: true,
    runAsUser: 1001,
    runAsGroup: 1001,
  });
  expect(spec.containers[0].env).toBeUndefined();
  expect(result.warnings.join("\n")).not.toContain("built to run as root");
  expect((await parity(trainer("ml/numeric:1"))).differences).toEqual([]);
});

test("a root-built image runs as the configured UID with a writable HOME, and is told about its WORKDIR", async () => {
  const result = await admit(env.controller, trainer("ml/root:1"));
  expect(result.allowed).toBe(true);
  const spec = result.patched.spec as Obj;
  expect(spec.securityContext).toMatchObject({ runAsUser: 1000, runAsGroup: 3000 });
  expect(spec.containers[0].env).toEqual([{ name: "HOME", value: "/home/workload" }]);
  expect(result.warnings).toContainEqual(
    expect.stringContaining(
      `image "${registry.host}/ml/root:1" (container "train") is built to run as root; it runs as UID 1000 here, with HOME=/home/workload on an emptyDir; its WORKDIR /workspace`,
    ),
  );
  expect((await parity(trainer("ml/root:1"))).differences).toEqual([]);
});

test("a registry slower than the budget: answered with today's defaults and a warning, then known", async () => {
  registry.delayMs = 1500;
  const first = await admit(env.controller, trainer("ml/slow:1"));
  registry.delayMs = 0;
  expect(first.allowed).toBe(true);
  expect((first.patched.spec as Obj).securityContext).toMatchObject({ runAsUser: 1000 });
  expect(first.warnings).toContainEqual(
    expect.stringContaining(`did not answer within ${BUDGET_MS} ms`),
  );
  // The lookup went on and filled the cache: a later pod gets the image's own user.
  await eventually(
    async () => {
      const later = await admit(env.controller, trainer("ml/slow:1"));
      expect((later.patched.spec as Obj).securityContext).toMatchObject({ runAsUser: 1001 });
    },
    10_000,
    200,
  );
});

test("a registry that is gone: allowed with today's defaults and a warning, never denied for it", async () => {
  const result = await admit(env.controller, {
    ...trainer("ml/numeric:1"),
    spec: { containers: [{ name: "train", image: "127.0.0.1:1/ml/gone:1" }] },
  });
  expect(result.allowed).toBe(true);
  expect(result.warnings).toContainEqual(
    expect.stringMatching(
      /image "127\.0\.0\.1:1\/ml\/gone:1" \(container "train"\) was not inspected \(the registry could not be read/,
    ),
  );
  expect(env.controller.logs()).not.toMatch(/"level":50/);
});
