// Issue 26's doors where only a real API server shows them: image volumes (kept only with the
// ImageVolume feature gate, control-plane.ts) through the registry rules at `kubectl apply`; how
// many SubjectAccessReviews one hostile pod makes the module ask (counted in the API server's audit
// log); the break-glass disarm against the arming loop; the ValidatingAdmissionPolicy (in the manifest
// by default, and a file of its own) that keeps admission-guard.dev/* namespace keys to admins,
// compiled and enforced by the API server.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments, stringify } from "yaml";
import type { KubeObject } from "../../lib/objects/pod";
import { REPO_ROOT } from "../support/controller";
import { moduleYamlPath } from "../support/module-rbac";
import { eventually } from "../support/wait";
import { applyObjects, connect, kubectl, namespace, useModule } from "./support/cluster";
import { pathOf } from "./support/kube-client";

const cluster = connect();
const MAX_SECRET_REVIEWS = 24;
const guard = useModule(cluster, {
  env: {
    ADMISSION_GUARD_REGISTRIES_ALLOWED: "ghcr.io,harbor.internal",
    ADMISSION_GUARD_REGISTRIES_MIRRORS: JSON.stringify({
      "docker.io": "harbor.internal/dockerhub",
    }),
    ADMISSION_GUARD_SERVICE_ACCOUNT_MAX_SECRET_REVIEWS: String(MAX_SECRET_REVIEWS),
  },
});

const VOLUMES_NS = "hostile-volumes";
const SAR_NS = "hostile-reviews";
const ARMING_NS = "hostile-arming";
const DISARM = "admission-guard.dev/disarm";

const run = (args: string[], manifest?: KubeObject) =>
  kubectl(cluster, args, manifest ? stringify(manifest) : undefined);
const apply = (obj: KubeObject) => run(["apply", "-f", "-"], obj);

const pod = (name: string, ns: string, spec: Record<string, unknown> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: ns },
  spec: {
    containers: [{ name: "main", image: "ghcr.io/ml/train:1.0", command: ["sleep", "3600"] }],
    ...spec,
  },
});

beforeAll(async () => {
  await applyObjects(cluster, [
    // Pod Security restricted allows image volumes from policy 1.33 only, and this API server is
    // 1.32: the module, following it, would refuse them at the level an unlabelled namespace
    // gets. Baseline allows them, so the registry rules alone decide here.
    namespace(VOLUMES_NS, { "pod-security.kubernetes.io/enforce": "baseline" }),
    namespace(SAR_NS),
    namespace(ARMING_NS),
  ]);
  await guard.install();
}, 60_000);

describe("image volumes go through the registry rules at kubectl apply (ImageVolume gate on)", () => {
  const withWeights = (name: string, reference: string) =>
    pod(name, VOLUMES_NS, {
      volumes: [{ name: "weights", image: { reference, pullPolicy: "IfNotPresent" } }],
    });
  const referenceStored = async (name: string) => {
    const res = await cluster.admin.get(`/api/v1/namespaces/${VOLUMES_NS}/pods/${name}`);
    return (res.body.spec as { volumes: { image?: { reference: string } }[] }).volumes[0].image
      ?.reference;
  };

  test("the API server keeps spec.volumes[].image (the feature gate is on)", async () => {
    const dryRun = await run(
      ["create", "--dry-run=server", "-o", "json", "-f", "-"],
      withWeights("gate-probe", "ghcr.io/models/llama:3"),
    );
    expect([dryRun.code, dryRun.stderr]).toEqual([0, expect.any(String)]);
    const stored = JSON.parse(dryRun.stdout) as { spec: { volumes: { image?: object }[] } };
    expect(stored.spec.volumes[0].image).toEqual({
      reference: "ghcr.io/models/llama:3",
      pullPolicy: "IfNotPresent",
    });
  });

  test("an image volume from a registry not allowed is refused, naming spec.volumes[0].image.reference", async () => {
    const refused = await apply(withWeights("evil-weights", "evil.example.com/x:latest"));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      'admission-guard/image-registry: image volume "weights" reference "evil.example.com/x:latest"',
    );
    expect(refused.stderr).toContain("registry evil.example.com, which is not allowed");
    expect(refused.stderr).toContain("spec.volumes[0].image.reference");
    expect(
      (await cluster.admin.get(`/api/v1/namespaces/${VOLUMES_NS}/pods/evil-weights`)).status,
    ).toBe(404);
  });

  test("the same image from an allowed registry is admitted and stored as written", async () => {
    const admitted = await apply(withWeights("allowed-weights", "ghcr.io/models/llama:3"));
    expect([admitted.code, admitted.stderr]).toEqual([0, expect.any(String)]);
    expect(await referenceStored("allowed-weights")).toBe("ghcr.io/models/llama:3");
  });

  test("a mirrored registry's image volume is rewritten to its mirror, and the pod admitted", async () => {
    const admitted = await apply(withWeights("mirrored-weights", "nginx:1.25"));
    expect([admitted.code, admitted.stderr]).toEqual([0, expect.any(String)]);
    expect(await referenceStored("mirrored-weights")).toBe(
      "harbor.internal/dockerhub/library/nginx:1.25",
    );
  });
});

describe("one hostile pod makes at most serviceAccount.maxSecretReviews SubjectAccessReviews", () => {
  const moduleUser = () => {
    const { namespace: ns, name } = guard.module!.manifest.serviceAccount;
    return `system:serviceaccount:${ns}:${name}`;
  };
  /** SubjectAccessReviews the module's ServiceAccount has created so far (the audit log). */
  const reviewsSoFar = () =>
    readFileSync(cluster.auditLog, "utf8")
      .split("\n")
      .filter(Boolean)
      .map(
        line =>
          JSON.parse(line) as {
            stage: string;
            user: { username: string };
            objectRef?: { resource?: string };
          },
      )
      .filter(
        e =>
          e.stage === "ResponseComplete" &&
          e.objectRef?.resource === "subjectaccessreviews" &&
          e.user.username === moduleUser(),
      ).length;
  /** The reviews one server-side dry run caused, once the count has settled. */
  async function reviewsCausedBy(manifest: KubeObject) {
    const before = reviewsSoFar();
    const result = await run(["create", "--dry-run=server", "-f", "-"], manifest);
    let last = -1;
    const after = await eventually(
      async () => {
        const now = reviewsSoFar();
        if (now !== last) throw new Error(`still counting (${(last = now)})`);
        return now;
      },
      10_000,
      1000,
    );
    return { result, reviews: after - before };
  }
  const secretEnv = (prefix: string, count: number) =>
    Array.from({ length: count }, (_, i) => ({
      name: `V${i}`,
      valueFrom: { secretKeyRef: { name: `${prefix}-${i}`, key: "v" } },
    }));
  const projected = (prefix: string, sources: number) => ({
    name: "merged",
    projected: {
      sources: Array.from({ length: sources }, (_, i) => ({
        secret: { name: `${prefix}-${i}`, items: [{ key: "v", path: `s${i}` }] },
      })),
    },
  });

  test("the harness counts them: a pod naming two secrets makes two reviews", async () => {
    const { result, reviews } = await reviewsCausedBy(
      pod("two-secrets", SAR_NS, {
        containers: [
          {
            name: "main",
            image: "ghcr.io/ml/train:1.0",
            env: secretEnv("pair", 2),
          },
        ],
      }),
    );
    expect([result.code, result.stderr]).toEqual([0, expect.any(String)]);
    expect(reviews).toBe(2);
  });

  test("1,800 env secretKeyRefs (two containers): at most the cap reviewed, the rest named as not checked", async () => {
    const flood = pod("env-flood", SAR_NS, {
      containers: ["a", "b"].map(c => ({
        name: c,
        image: "ghcr.io/ml/train:1.0",
        env: secretEnv(`env-${c}`, 900),
      })),
    });
    const { result, reviews } = await reviewsCausedBy(flood);
    expect(result.code).toBe(0);
    // The cap, each asked once (the two-secret pod above shows one review per secret).
    expect(reviews).toBe(MAX_SECRET_REVIEWS);
    expect(result.stderr).toMatch(
      new RegExp(
        `admission-guard/service-account: not checked whether ServiceAccount ${SAR_NS}/\\S+ may get 1,776 of the 1,800 secrets named by Pod ${SAR_NS}/env-flood: at most ${MAX_SECRET_REVIEWS} are checked per object`,
      ),
    );
  });

  test("900 projected secret sources (under payload.maxProjectedSources): the same cap", async () => {
    const { result, reviews } = await reviewsCausedBy(
      pod("projected-flood", SAR_NS, { volumes: [projected("proj", 900)] }),
    );
    expect(result.code).toBe(0);
    // The cap, each asked once (the two-secret pod above shows one review per secret).
    expect(reviews).toBe(MAX_SECRET_REVIEWS);
    expect(result.stderr).toContain(
      `may get 876 of the 900 secrets named by Pod ${SAR_NS}/projected-flood`,
    );
  });

  test("1,500 projected sources: refused by payload-size, and still at most the cap reviewed", async () => {
    const { result, reviews } = await reviewsCausedBy(
      pod("projected-over", SAR_NS, { volumes: [projected("over", 1500)] }),
    );
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      "spec.volumes has 1,500 projected volume sources, over the limit of 1,000",
    );
    expect(reviews).toBeLessThanOrEqual(MAX_SECRET_REVIEWS);
  });
});

describe("the break-glass disarm holds against the arming loop", () => {
  const configs = () => guard.module!.manifest.webhookConfigurations;
  const policies = async () => {
    const out: string[] = [];
    for (const config of configs()) {
      const res = await cluster.admin.get(pathOf(config));
      out.push(...(res.body.webhooks as { failurePolicy: string }[]).map(w => w.failurePolicy));
    }
    return out;
  };
  const allAre = (policy: string) => async () => {
    const now = await policies();
    if (now.some(p => p !== policy)) throw new Error(`failurePolicy ${now.join(", ")}`);
  };
  const annotate = (value: string) =>
    Promise.all(
      configs().map(c =>
        run([
          "annotate",
          "--overwrite",
          String(c.kind).toLowerCase(),
          String(c.metadata!.name),
          value,
        ]),
      ),
    );
  /** Longer than a round of the arming loop (lib/webhooks/arm-live.ts: 2 s waiting, 10 s armed). */
  const MORE_THAN_A_ROUND_MS = 12_000;

  test("control: a manual failurePolicy Ignore without the annotation is re-armed by the running controller", async () => {
    await eventually(allAre("Fail"), 20_000, 200);
    const [validating] = configs().filter(c => c.kind === "ValidatingWebhookConfiguration");
    const set = await cluster.admin.raw(
      "PATCH",
      pathOf(validating),
      [{ op: "replace", path: "/webhooks/0/failurePolicy", value: "Ignore" }],
      "application/json-patch+json",
    );
    expect(set.status).toBe(200);
    await eventually(allAre("Fail"), 25_000, 500);
  }, 40_000);

  test(`annotated ${DISARM}=true: set to Ignore and left so while the annotation is there; the controller down admits pods`, async () => {
    const annotated = await annotate(`${DISARM}=true`);
    for (const r of annotated) expect([r.code, r.stderr]).toEqual([0, ""]);
    await eventually(allAre("Ignore"), 25_000, 500);
    const until = Date.now() + MORE_THAN_A_ROUND_MS;
    while (Date.now() < until) {
      await allAre("Ignore")();
      await new Promise(r => setTimeout(r, 500));
    }
    expect(guard.module!.controller.logs()).toContain(`disarmed by its annotation ${DISARM}=true`);
    // What the break-glass is for: a controller that does not answer no longer blocks pods.
    await guard.module!.stopController();
    try {
      const admitted = await run(["create", "-f", "-"], pod("while-disarmed", ARMING_NS));
      expect([admitted.code, admitted.stderr]).toEqual([0, ""]);
    } finally {
      await guard.module!.startController();
    }
    // Back and Ready, it still does not arm them.
    await new Promise(r => setTimeout(r, MORE_THAN_A_ROUND_MS / 2));
    await allAre("Ignore")();
  }, 90_000);

  test("the annotation removed: armed to Fail again", async () => {
    const removed = await annotate(`${DISARM}-`);
    for (const r of removed) expect(r.code).toBe(0);
    await eventually(allAre("Fail"), 30_000, 500);
  }, 40_000);
});

/** The admin (system:masters) labels a namespace's mode. */
const modeByAdmin = (ns: string, mode: string) =>
  kubectl(cluster, ["label", "namespace", ns, `admission-guard.dev/mode=${mode}`]);

/**
 * A tenant's `admission-guard.dev/mode=off` on a namespace, once the API server refuses it: until
 * the policy's informer has seen its binding the label is admitted, then undone and tried again.
 */
const modeOffRefused = (
  asTenant: (args: string[]) => ReturnType<typeof run>,
  ns: string,
): ReturnType<typeof run> =>
  eventually(
    async () => {
      const r = await asTenant(["label", "namespace", ns, "admission-guard.dev/mode=off"]);
      if (r.code === 0) {
        await kubectl(cluster, ["label", "namespace", ns, "admission-guard.dev/mode-"]);
        throw new Error("admitted");
      }
      return r;
    },
    20_000,
    500,
  );

/** A tenant who may create and label namespaces (self-provisioning, project owners). */
const namespaceProvisioner = (user: string): KubeObject[] => [
  {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRole",
    metadata: { name: "hostile-namespace-provisioner" },
    rules: [
      {
        apiGroups: [""],
        resources: ["namespaces"],
        verbs: ["get", "list", "create", "update", "patch"],
      },
    ],
  },
  {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRoleBinding",
    metadata: { name: `hostile-namespace-provisioner-${user}` },
    roleRef: {
      apiGroup: "rbac.authorization.k8s.io",
      kind: "ClusterRole",
      name: "hostile-namespace-provisioner",
    },
    subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: user }],
  },
];

describe("the namespace-keys ValidatingAdmissionPolicy (its file of its own): only admins set admission-guard.dev/* namespace keys", () => {
  const VAP_FILE = join(REPO_ROOT, "dist", "admission-guard-namespace-keys-vap.yaml");
  const TENANT = "tenant-alice";
  const asTenant = (args: string[], manifest?: KubeObject) =>
    run([...args, `--as=${TENANT}`, "--as-group=system:authenticated"], manifest);
  const OWNED_NS = "hostile-keys-owned";

  beforeAll(async () => {
    await applyObjects(cluster, [...namespaceProvisioner(TENANT), namespace(OWNED_NS)]);
  });
  afterAll(async () => {
    // Later files (and the node tier) label namespaces as the admin, but leave no policy behind.
    await kubectl(cluster, ["delete", "--ignore-not-found", "-f", VAP_FILE]);
  });

  test("applied to the API server: accepted, its CEL type-checked without warnings", async () => {
    const applied = await kubectl(cluster, ["apply", "-f", VAP_FILE]);
    expect([applied.code, applied.stderr]).toEqual([0, ""]);
    expect(applied.stdout).toMatch(
      /validatingadmissionpolicy\S*-namespace-keys (created|configured|unchanged)/,
    );
    expect(applied.stdout).toMatch(
      /validatingadmissionpolicybinding\S*-namespace-keys (created|configured|unchanged)/,
    );
    const policy = await eventually(async () => {
      const res = await kubectl(cluster, ["get", "validatingadmissionpolicy", "-o", "json"]);
      const items = (JSON.parse(res.stdout) as { items: KubeObject[] }).items.filter(p =>
        String(p.metadata?.name).endsWith("-namespace-keys"),
      );
      const [p] = items;
      const status = p?.status as { observedGeneration?: number } | undefined;
      if (!p || status?.observedGeneration !== p.metadata?.generation)
        throw new Error("not type-checked yet");
      return p;
    }, 20_000);
    const status = policy.status as {
      typeChecking?: { expressionWarnings?: unknown[] };
      conditions?: { type: string; status: string; message: string }[];
    };
    expect(status.typeChecking?.expressionWarnings ?? []).toEqual([]);
    expect((status.conditions ?? []).filter(c => c.status !== "True")).toEqual([]);
  });

  test("a tenant cannot set admission-guard.dev/mode on a namespace; other labels stay theirs", async () => {
    const refused = await modeOffRefused(asTenant, OWNED_NS);
    expect(refused.stderr).toContain(
      "admission-guard/namespace-keys: only an admin may set, change or remove admission-guard.dev/* namespace labels",
    );
    const own = await asTenant(["label", "namespace", OWNED_NS, "team=ml"]);
    expect([own.code, own.stderr]).toEqual([0, ""]);
    const annotated = await asTenant([
      "annotate",
      "namespace",
      OWNED_NS,
      "admission-guard.dev/allowed-registries=evil.example.com",
    ]);
    expect(annotated.code).toBe(1);
    expect(annotated.stderr).toContain("admission-guard.dev/* namespace annotations");
  });

  test("an admin can; the tenant may then change other labels but not remove or change the admin's", async () => {
    const admin = await modeByAdmin(OWNED_NS, "warn");
    expect([admin.code, admin.stderr]).toEqual([0, ""]);
    const other = await asTenant(["label", "--overwrite", "namespace", OWNED_NS, "team=research"]);
    expect([other.code, other.stderr]).toEqual([0, ""]);
    const removed = await asTenant(["label", "namespace", OWNED_NS, "admission-guard.dev/mode-"]);
    expect(removed.code).toBe(1);
    const changed = await asTenant([
      "label",
      "--overwrite",
      "namespace",
      OWNED_NS,
      "admission-guard.dev/mode=off",
    ]);
    expect(changed.code).toBe(1);
    const stored = await cluster.admin.get(`/api/v1/namespaces/${OWNED_NS}`);
    expect(stored.body.metadata?.labels?.["admission-guard.dev/mode"]).toBe("warn");
  });

  test("a tenant cannot squat the Exemptions namespace with the install's ownership label", async () => {
    const uuid = String(
      (
        JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as {
          pepr: { uuid: string };
        }
      ).pepr.uuid,
    );
    const squat = await asTenant(
      ["create", "-f", "-"],
      namespace("hostile-squatted", { "admission-guard.dev/owned-by": uuid }),
    );
    expect(squat.code).toBe(1);
    expect(squat.stderr).toContain("admission-guard/namespace-keys:");
    const plain = await asTenant(["create", "-f", "-"], namespace("hostile-tenant-plain"));
    expect([plain.code, plain.stderr]).toEqual([0, ""]);
  });
});

describe("issue 40: by default, a tenant's own mode=off label is refused by the real API server", () => {
  // The policy and binding exactly as the default build's manifest carries them (not the file of
  // its own), applied as `kubectl apply -f dist/pepr-module-<uuid>.yaml` would apply them.
  const TENANT = "tenant-bob";
  const OWN_NS = "hostile-keys-default";
  const asTenant = (args: string[], manifest?: KubeObject) =>
    run([...args, `--as=${TENANT}`, "--as-group=system:authenticated"], manifest);
  const policyText = () =>
    parseAllDocuments(readFileSync(moduleYamlPath(), "utf8"))
      .map(d => d.toJS() as KubeObject)
      .filter(
        d =>
          /^ValidatingAdmissionPolicy(Binding)?$/.test(String(d.kind)) &&
          String(d.metadata?.name).endsWith("-namespace-keys"),
      )
      .map(d => stringify(d))
      .join("---\n");

  beforeAll(async () => {
    await applyObjects(cluster, namespaceProvisioner(TENANT));
  });
  afterAll(async () => {
    await kubectl(cluster, ["delete", "--ignore-not-found", "-f", "-"], policyText());
  });

  test("the default manifest's policy and binding apply in one go", async () => {
    const text = policyText();
    expect(text.match(/^kind: /gm)).toHaveLength(2);
    const applied = await kubectl(cluster, ["apply", "-f", "-"], text);
    expect([applied.code, applied.stderr]).toEqual([0, ""]);
    // The harness installs it with the module (test/cluster/support/module.ts); the describe above
    // deleted it again: created here, unless run alone.
    expect(applied.stdout).toMatch(
      /validatingadmissionpolicybinding\S*-namespace-keys (created|configured|unchanged)/,
    );
  });

  test("a tenant creates its own namespace, and may not label it admission-guard.dev/mode=off", async () => {
    const created = await asTenant(["create", "-f", "-"], namespace(OWN_NS));
    expect([created.code, created.stderr]).toEqual([0, ""]);
    const refused = await modeOffRefused(asTenant, OWN_NS);
    expect(refused.stderr).toContain("admission-guard/namespace-keys: only an admin may set");
    const created2 = await asTenant(
      ["create", "-f", "-"],
      namespace(`${OWN_NS}-2`, { "admission-guard.dev/mode": "off" }),
    );
    expect(created2.code).toBe(1);
    expect(created2.stderr).toContain("admission-guard/namespace-keys:");
    const stored = await cluster.admin.get(`/api/v1/namespaces/${OWN_NS}`);
    expect(stored.body.metadata?.labels?.["admission-guard.dev/mode"]).toBeUndefined();
  });

  test("the admin (system:masters) still may", async () => {
    const admin = await modeByAdmin(OWN_NS, "audit");
    expect([admin.code, admin.stderr]).toEqual([0, ""]);
  });
});
