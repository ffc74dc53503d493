// A running pod changed the ways users change one: `kubectl set image` (a Pod UPDATE) and
// `kubectl debug` (an UPDATE of pods/ephemeralcontainers, never a CREATE), through the webhook
// rules `pepr build` generates, on a real API server.
import type { V1PodSpec } from "@kubernetes/client-node";
import { eventually } from "../support/wait";
import { applyObjects, connect, kubectl, namespace, useModule } from "./support/cluster";

const cluster = connect();
const guard = useModule(cluster, {
  env: { ADMISSION_GUARD_REGISTRIES_ALLOWED: "ghcr.io,docker.io/library" },
});
const NS = "debugging";
const run = (...args: string[]) => kubectl(cluster, [...args, "-n", NS]);
const stored = async () =>
  (await cluster.admin.get(`/api/v1/namespaces/${NS}/pods/web`)).body.spec as V1PodSpec;

beforeAll(async () => {
  await applyObjects(cluster, [namespace(NS)]);
  await guard.install();
  await eventually(async () => {
    const r = await run("run", "web", "--image=nginx:1.27");
    if (r.code !== 0) throw new Error(r.stderr);
  }, 20_000);
}, 60_000);

test("the generated validating webhook receives pod updates, ephemeral containers and resizes", async () => {
  const config = guard.module!.manifest.webhookConfigurations.find(
    c => c.kind === "ValidatingWebhookConfiguration",
  )!;
  const rules = (config.webhooks as { rules: { operations: string[]; resources: string[] }[] }[])[0]
    .rules;
  expect(rules).toContainEqual(
    expect.objectContaining({
      operations: ["CREATE", "UPDATE"],
      // pods/resize: in-place resize, Kubernetes 1.33+; an API server before it takes the rule.
      resources: ["pods", "pods/ephemeralcontainers", "pods/resize"],
    }),
  );
});

test("kubectl set image to a registry that is not allowed: denied, the running pod unchanged", async () => {
  const r = await run("set", "image", "pod/web", "web=evil.example.com/miner:latest");
  expect(r.code).toBe(1);
  expect(r.stderr).toContain(
    'admission-guard/image-registry: container "web" image "evil.example.com/miner:latest"',
  );
  expect((await stored()).containers[0].image).toBe("nginx:1.27");
});

test("kubectl set image to an allowed one: admitted", async () => {
  const r = await run("set", "image", "pod/web", "web=ghcr.io/org/web:2.0");
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  expect((await stored()).containers[0].image).toBe("ghcr.io/org/web:2.0");
});

test("kubectl debug --profile=sysadmin: denied, naming the profile that passes", async () => {
  const r = await run(
    "debug",
    "web",
    "--image=busybox:1.36",
    "--profile=sysadmin",
    "-c",
    "dbg-sys",
  );
  expect(r.code).toBe(1);
  expect(r.stderr).toContain(
    'admission-guard/security-context: privileged: container "dbg-sys" must not set securityContext.privileged=true',
  );
  expect(r.stderr).toContain("with kubectl debug, use --profile=restricted");
  expect((await stored()).ephemeralContainers ?? []).toEqual([]);
});

test("kubectl debug --profile=restricted: admitted, the debug container added", async () => {
  const r = await run(
    "debug",
    "web",
    "--image=busybox:1.36",
    "--profile=restricted",
    "-c",
    "dbg-ok",
  );
  expect(r.stderr).not.toContain("denied");
  expect(r.code).toBe(0);
  expect(((await stored()).ephemeralContainers ?? []).map(c => c.name)).toEqual(["dbg-ok"]);
});

test("an update that changes no container (a label): admitted without a word", async () => {
  const r = await run("label", "pod", "web", "tier=frontend");
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
});
