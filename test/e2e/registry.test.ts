// image-registry through the real controller (npm run build first), settings given the way an
// admin gives them (controller environment), each case checked for parity with review().
import type { KubeObject } from "../../lib/objects/pod";
import type { SettingsInput } from "../../lib/settings";
import { startController, type Controller } from "../support/controller";
import { checkParity, settingsEnv } from "../support/parity";
import { startStandIn, type StandInApi } from "../support/stand-in-api";
import { cachesSynced } from "../support/wait";
import { clusterObjects, seedPods } from "./cases";

/** Only image-registry acts, so that other capabilities' verdicts do not blur these cases. */
const ONLY_REGISTRY: SettingsInput = {
  securityContext: { enabled: false },
  labels: { enabled: false },
  serviceAccount: { enabled: false },
  resourceQuota: { enabled: false },
  payload: { enabled: false },
};

const GHCR_ONLY: SettingsInput = { ...ONLY_REGISTRY, registries: { allowed: ["ghcr.io"] } };
const PRIVATE_TOO: SettingsInput = {
  ...ONLY_REGISTRY,
  registries: { allowed: ["ghcr.io", "private-registry.com", "docker.io/library"] },
};
const MIRRORED: SettingsInput = {
  ...ONLY_REGISTRY,
  registries: {
    allowed: ["harbor.internal/dockerhub"],
    mirrors: { "docker.io": "harbor.internal/dockerhub" },
  },
};

const mlflowTrain: KubeObject = seedPods.find(p => p.metadata?.name === "mlflow-train") ?? {
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "mlflow-train", namespace: "mlflow-prod" },
  spec: {
    containers: [{ name: "mlflow-train", image: "private-registry.com/mlflow-train:latest" }],
  },
};

const bareNginx: KubeObject = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "web", namespace: "mlflow-prod" },
  spec: { containers: [{ name: "web", image: "nginx:1.25" }] },
};

let api: StandInApi;
const controllers: Record<string, Controller> = {};

beforeAll(async () => {
  api = await startStandIn({ objects: clusterObjects });
  const [ghcrOnly, privateToo, mirrored] = await Promise.all([
    // The env variable an admin sets in package.json pepr.env, as the denial says.
    startController({ api, env: { ADMISSION_GUARD_REGISTRIES_ALLOWED: "ghcr.io", ...envOf() } }),
    startController({ api, env: settingsEnv(PRIVATE_TOO) }),
    startController({ api, env: settingsEnv(MIRRORED) }),
  ]);
  Object.assign(controllers, { ghcrOnly, privateToo, mirrored });
  await cachesSynced(api);
}, 90_000);

afterAll(async () => {
  await Promise.all(Object.values(controllers).map(c => c.stop()));
  await api?.stop();
});

/** ONLY_REGISTRY as one variable per setting (the registry list comes from its own variable). */
function envOf(): Record<string, string> {
  return {
    ADMISSION_GUARD_SECURITY_CONTEXT_ENABLED: "false",
    ADMISSION_GUARD_LABELS_ENABLED: "false",
    ADMISSION_GUARD_SERVICE_ACCOUNT_ENABLED: "false",
    ADMISSION_GUARD_RESOURCE_QUOTA_ENABLED: "false",
    ADMISSION_GUARD_PAYLOAD_ENABLED: "false",
  };
}

const parity = (name: string, manifest: KubeObject, settings: SettingsInput) =>
  checkParity(controllers[name], manifest, { objects: api.objects(), settings });

describe("image-registry through the controller", () => {
  it("denies seed 001's private-registry.com/mlflow-train:latest when only ghcr.io is allowed", async () => {
    const report = await parity("ghcrOnly", mlflowTrain, GHCR_ONLY);
    expect(report.differences).toEqual([]);
    expect(report.e2e.allowed).toBe(false);
    expect(report.e2e.message).toMatch(
      /^admission-guard\/image-registry: container "mlflow-train" image "private-registry\.com\/mlflow-train:latest" \(private-registry\.com\/mlflow-train:latest\) is from registry private-registry\.com, which is not allowed; allowed: ghcr\.io\. Fix: .*ADMISSION_GUARD_REGISTRIES_ALLOWED/,
    );
  });

  it("admits it when its registry is allowed", async () => {
    const report = await parity("privateToo", mlflowTrain, PRIVATE_TOO);
    expect(report.differences).toEqual([]);
    expect(report.e2e.allowed).toBe(true);
  });

  it("judges a bare nginx as docker.io", async () => {
    const denied = await parity("ghcrOnly", bareNginx, GHCR_ONLY);
    expect(denied.differences).toEqual([]);
    expect(denied.e2e.message).toContain(
      'image "nginx:1.25" (docker.io/library/nginx:1.25) is from registry docker.io',
    );
    const admitted = await parity("privateToo", bareNginx, PRIVATE_TOO);
    expect(admitted.differences).toEqual([]);
    expect(admitted.e2e.allowed).toBe(true);
  });

  it("rewrites a mirrored image, then admits it", async () => {
    const report = await parity("mirrored", bareNginx, MIRRORED);
    expect(report.differences).toEqual([]);
    expect(report.e2e.allowed).toBe(true);
    const spec = report.e2e.patched.spec as { containers: { image: string }[] };
    expect(spec.containers[0].image).toBe("harbor.internal/dockerhub/library/nginx:1.25");
    expect(report.e2e.warnings.join("\n")).toContain(
      "admission-guard/image-registry: fixed mirror",
    );
    // The rewritten pod, sent again, is not rewritten again.
    const again = await parity("mirrored", report.e2e.patched, MIRRORED);
    expect(again.e2e.mutateResponse?.patch ?? "").not.toContain("image");
    expect((again.e2e.patched.spec as typeof spec).containers[0].image).toBe(
      "harbor.internal/dockerhub/library/nginx:1.25",
    );
  });

  it("denies an invalid reference naming the container", async () => {
    const bad = structuredClone(bareNginx);
    (bad.spec as { containers: { image: string }[] }).containers[0].image = "Nginx:1.25";
    const report = await parity("ghcrOnly", bad, GHCR_ONLY);
    expect(report.differences).toEqual([]);
    expect(report.e2e.message).toMatch(
      /^admission-guard\/image-registry: container "web" has image "Nginx:1\.25", which is not a valid image reference/,
    );
  });

  it("checks a workload's template, including init containers", async () => {
    const deploy: KubeObject = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "train", namespace: "mlflow-prod" },
      spec: {
        selector: { matchLabels: { app: "train" } },
        template: {
          metadata: { labels: { app: "train" } },
          spec: {
            initContainers: [{ name: "fetch", image: "quay.io/org/fetch:1" }],
            containers: [{ name: "train", image: "ghcr.io/org/train:1" }],
          },
        },
      },
    };
    const report = await parity("ghcrOnly", deploy, GHCR_ONLY);
    expect(report.differences).toEqual([]);
    expect(report.e2e.message).toContain('init container "fetch"');
    expect(report.e2e.message).toContain("spec.template.spec.initContainers[0].image");
  });
});

describe("registry e2e: settings that cannot work", () => {
  it("an allow-list entry with a tag stops the controller's start, naming the variable and the value", async () => {
    await expect(
      startController({ api, env: { ADMISSION_GUARD_REGISTRIES_ALLOWED: "ghcr.io/org:v1" } }),
    ).rejects.toThrow(
      /exited during start-up[\s\S]*registries\.allowed\[0\] \(ADMISSION_GUARD_REGISTRIES_ALLOWED\): \\?"ghcr\.io\/org:v1\\?" is not a registry or repository prefix/,
    );
  }, 60_000);
});
