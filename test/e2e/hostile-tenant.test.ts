// Issue 26 items 3 and 4 through the real built controller (npm run build first) and `check`:
// a pod author may not get an image past the registry allow-list as an image volume, nor turn one
// pod into tens of thousands of SubjectAccessReviews (the stand-in API records each one).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { KubeObject } from "../../lib/objects/pod";
import { admit, podCreateReview, type AdmissionResponse } from "../support/admission";
import { runCheck } from "../support/check-command";
import { startEnvironment, type Environment } from "../support/environment";
import { checkParity, settingsEnv } from "../support/parity";
import type { SettingsInput } from "../../lib/settings";
import { tempTree } from "../unit/cli/check-helpers";

const NS = "tenant";
const SETTINGS: SettingsInput = {
  registries: { allowed: ["ghcr.io"], mirrors: { "docker.io": "ghcr.io/dockerhub" } },
};
const objects: KubeObject[] = [
  { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
  { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "workload", namespace: NS } },
];

const names = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

const pod = (spec: Record<string, unknown>, name = "tenant-pod"): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: NS },
  spec: {
    serviceAccountName: "workload",
    containers: [{ name: "main", image: "ghcr.io/tenant/app:1" }],
    ...spec,
  },
});

const withImageVolume = (reference: string) =>
  pod({ volumes: [{ name: "weights", image: { reference, pullPolicy: "IfNotPresent" } }] });

/** 35,000 projected secret sources: about 1 MB, under the webhook's body limit. */
const projectedPod = (prefix: string) =>
  pod({
    volumes: [
      {
        name: "everything",
        projected: { sources: names(35_000, prefix).map(name => ({ secret: { name } })) },
      },
    ],
  });

/** 5,000 distinct env secretKeyRefs, 1,000 per container (each under maxEnvPerContainer). */
const envPod = (prefix: string) =>
  pod({
    containers: Array.from({ length: 5 }, (_, c) => ({
      name: `c${c}`,
      image: "ghcr.io/tenant/app:1",
      env: names(1000, `${prefix}-${c}`).map((name, i) => ({
        name: `V${i}`,
        valueFrom: { secretKeyRef: { name, key: "k" } },
      })),
    })),
  });

async function withEnvironment(settings: SettingsInput) {
  return startEnvironment({ objects, env: settingsEnv(settings) });
}

describe("image volumes through the controller and check", () => {
  let env: Environment;
  beforeAll(async () => {
    env = await withEnvironment(SETTINGS);
  }, 60_000);
  afterAll(async () => env?.stop());

  const volumeIndex = (obj: KubeObject) =>
    (obj.spec as { volumes: { name: string }[] }).volumes.findIndex(v => v.name === "weights");

  it("denies an image volume from a registry that is not allowed, as it denies the container", async () => {
    const result = await admit(env.controller, withImageVolume("evil.example.com/x:latest"));
    expect(result.allowed).toBe(false);
    const at = volumeIndex(result.request.object as KubeObject);
    expect(result.message).toContain(
      'admission-guard/image-registry: image volume "weights" reference "evil.example.com/x:latest"',
    );
    expect(result.message).toContain(`in spec.volumes[${at}].image.reference;`);
    // A dry run is answered the same.
    const dry = await admit(env.controller, withImageVolume("evil.example.com/x:latest"), {
      dryRun: true,
    });
    expect(dry.message).toBe(result.message);
    // check says the same as the controller.
    const report = await checkParity(env.controller, withImageVolume("evil.example.com/x:latest"), {
      objects: env.api.objects(),
      settings: SETTINGS,
    });
    expect(report.differences).toEqual([]);
  });

  it("rewrites an image volume to its mirror on Pod CREATE, then admits it", async () => {
    const result = await admit(env.controller, withImageVolume("docker.io/ml/llama-weights:3"));
    expect(result.allowed).toBe(true);
    const at = volumeIndex(result.patched);
    expect((result.patched.spec as { volumes: { image?: object }[] }).volumes[at].image).toEqual({
      reference: "ghcr.io/dockerhub/ml/llama-weights:3",
      pullPolicy: "IfNotPresent",
    });
    expect(result.warnings).toContain("admission-guard/image-registry: fixed mirror");
  });

  it("denies a Deployment whose template mounts an image volume from a registry not allowed", async () => {
    const deployment: KubeObject = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "serve", namespace: NS },
      spec: {
        selector: { matchLabels: { app: "serve" } },
        template: {
          metadata: { labels: { app: "serve" } },
          spec: (withImageVolume("evil.example.com/w:1").spec as object) ?? {},
        },
      },
    };
    const result = await admit(env.controller, deployment);
    expect(result.allowed).toBe(false);
    expect(result.message).toContain("in spec.template.spec.volumes[0].image.reference;");
  });
});

describe("fan-out: one pod, a bounded number of SubjectAccessReviews", () => {
  let env: Environment;
  beforeAll(async () => {
    env = await withEnvironment(SETTINGS);
  }, 60_000);
  afterAll(async () => env?.stop());

  const reviewsDuring = async (fn: () => Promise<unknown>) => {
    const count = () =>
      env.api.requests.filter(r => r.method === "POST" && r.path.includes("subjectaccessreviews"))
        .length;
    const before = count();
    await fn();
    return count() - before;
  };

  // The validating webhook is where the reviews are made (the mutating one changes no secret);
  // called directly, as the API server calls it, because Pepr's own clone of a request with 35,000
  // alike objects takes seconds per capability in the mutating webhook (see the report).
  const validate = async (manifest: KubeObject, dryRun: boolean): Promise<AdmissionResponse> =>
    (await env.controller.validate(podCreateReview(manifest, { dryRun }))).response!;

  it("35,000 projected secret sources: denied by payload-size with the numbers, at most 32 reviews", async () => {
    for (const dryRun of [false, true]) {
      let response!: AdmissionResponse;
      const reviews = await reviewsDuring(async () => {
        response = await validate(projectedPod(`p${dryRun}`), dryRun);
      });
      expect(reviews).toBeGreaterThan(0);
      expect(reviews).toBeLessThanOrEqual(32);
      expect(response.allowed).toBe(false);
      // The API server's own token volume (3 sources) is in the count.
      expect(response.status?.message).toMatch(
        /admission-guard\/payload-size: spec\.volumes has 35,003 projected volume sources, over the limit of 1,000; biggest: volume "everything" 35,000 sources/,
      );
      const warnings = response.warnings ?? [];
      expect(warnings.join("\n")).toContain(
        "may get 34,968 of the 35,000 secrets named by Pod tenant/tenant-pod: at most 32 are checked per object",
      );
      for (const w of warnings) expect(w.length).toBeLessThan(4000);
    }
  }, 60_000);

  it("5,000 distinct env secretKeyRefs: at most 32 reviews, the rest said not checked", async () => {
    let result!: Awaited<ReturnType<typeof admit>>;
    const reviews = await reviewsDuring(async () => {
      result = await admit(env.controller, envPod("env"));
    });
    expect(reviews).toBeGreaterThan(0);
    expect(reviews).toBeLessThanOrEqual(32);
    expect(result.warnings.join("\n")).toContain(
      "may get 4,968 of the 5,000 secrets named by Pod tenant/tenant-pod",
    );
  }, 30_000);

  it("secrets a CSI or rbd volume names are reviewed as a secret volume's, controller and check alike", async () => {
    const mounted = pod(
      {
        volumes: [
          {
            name: "store",
            csi: { driver: "secrets-store.csi.k8s.io", nodePublishSecretRef: { name: "vault" } },
          },
          {
            name: "block",
            rbd: { monitors: ["10.0.0.1:6789"], image: "i", secretRef: { name: "ceph-admin" } },
          },
        ],
      },
      "csi-pod",
    );
    let report!: Awaited<ReturnType<typeof checkParity>>;
    const reviews = await reviewsDuring(async () => {
      report = await checkParity(env.controller, mounted, {
        objects: env.api.objects(),
        settings: SETTINGS,
      });
    });
    expect(report.differences).toEqual([]);
    expect(reviews).toBeGreaterThan(0);
    // The stand-in answers every SubjectAccessReview "not allowed" by default.
    expect(report.e2e.warnings.join("\n")).toContain(
      'ServiceAccount tenant/workload of Pod tenant/csi-pod may not get secrets "vault" (volume "store" (csi.nodePublishSecretRef.name)), "ceph-admin" (volume "block" (rbd.secretRef.name))',
    );
  }, 30_000);

  it("check asks the snapshot about at most 32 secrets and says the same, quickly", async () => {
    const dir = tempTree({
      "settings.json": JSON.stringify(SETTINGS),
      "cluster/objects.json": JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }),
    });
    writeFileSync(join(dir, "pod.json"), JSON.stringify(projectedPod("check")));
    const begun = Date.now();
    const r = await runCheck(
      ["--settings", "settings.json", "--cluster", "cluster", "pod.json"],
      dir,
    );
    expect(Date.now() - begun).toBeLessThan(20_000);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain("spec.volumes has 35,000 projected volume sources");
    expect(r.stdout).toContain(
      "may get 34,968 of the 35,000 secrets named by Pod tenant/tenant-pod: at most 32 are checked per object",
    );
  }, 30_000);
});

describe("fan-out with payload-size off: the secret-access cap holds alone", () => {
  let env: Environment;
  beforeAll(async () => {
    // securityContext off too: the pod is sent to the validating webhook unfixed.
    env = await withEnvironment({
      ...SETTINGS,
      payload: { enabled: false },
      securityContext: { enabled: false },
    });
  }, 60_000);
  afterAll(async () => env?.stop());

  it("a 35,000-source pod is admitted with a warning (secretAccess: warn) after at most 32 reviews", async () => {
    const count = () =>
      env.api.requests.filter(r => r.method === "POST" && r.path.includes("subjectaccessreviews"))
        .length;
    const before = count();
    const review = podCreateReview(projectedPod("off"), { dryRun: true });
    const response = (await env.controller.validate(review)).response!;
    const reviews = count() - before;
    expect(reviews).toBeGreaterThan(0);
    expect(reviews).toBeLessThanOrEqual(32);
    expect(response.allowed).toBe(true);
    expect((response.warnings ?? []).join("\n")).toContain("of the 35,000 secrets named by Pod");
  }, 60_000);
});
