// The labels and service-account capabilities through the real built controller, against the
// stand-in API, whose SubjectAccessReviews are answered by lib/cluster/rbac.ts from the Roles and bindings
// it stores. Each case is also reviewed offline (review(), what `check` runs) over a snapshot of the
// stand-in's objects as they were before the request: the two front doors must agree.
import { policies } from "../../capabilities";
import { SnapshotCluster } from "../../lib/cluster/view";
import { review, type Review } from "../../lib/engine";
import type { KubeObject } from "../../lib/objects/pod";
import { RBAC_KINDS } from "../../lib/cluster/rbac";
import { answerSubjectAccessReview } from "../support/authorization";
import { parseSettings } from "../../lib/settings";
import { formatViolation } from "../../lib/objects/verdict";
import { admit, type AdmitResult } from "../support/admission";
import { startController, type Controller } from "../support/controller";
import { RESOURCE_TYPES, startStandIn, type StandInApi } from "../support/stand-in-api";

const SECRET = "llama-index-config";
/** An admin allowed the namespace annotation to name "trainer" (issue 40: no other name counts). */
const SETTINGS_ENV = { ADMISSION_GUARD_SERVICE_ACCOUNT_ALLOWED_NAMES: "trainer" };
const SETTINGS = parseSettings({ serviceAccount: { allowedNames: ["trainer"] } });
/** Names a tenant's annotation may try: another controller's account, default, too long, invalid. */
const HOSTILE_NAMES = ["argocd-application-controller", "default", "a".repeat(254), "Evil_SA"];
/** A namespace that existed long before the controller started (no ServiceAccount made for it). */
const namespace = (name: string, labels: Record<string, string> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Namespace",
  metadata: { name, labels, creationTimestamp: new Date("2024-05-12T14:00:00Z") },
});
/** Seed 000's trainer pod as the user wrote it (the harness adds what the API server defaults). */
const seed000Pod = (ns: string): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "llamaindex-trainer-xxxx", namespace: ns },
  spec: {
    serviceAccountName: "default",
    containers: [
      {
        name: "trainer",
        image: "ghcr.io/run-llama/llama-index:latest",
        resources: { limits: { cpu: "4", memory: "8Gi" } },
        envFrom: [{ secretRef: { name: SECRET } }],
      },
    ],
  },
});
/** Seed 002's minimal pod and its canary Deployment ("before"): app: gpt4 only. */
const seed002Pod = (ns: string, app = "gpt4"): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "test-gpt4", namespace: ns, labels: { app } },
  spec: { containers: [{ name: "inference", image: "openai/gpt4-inference:1.0" }] },
});
const seed002Deployment = (ns: string): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "gpt4-canary", namespace: ns },
  spec: {
    replicas: 2,
    selector: { matchLabels: { app: "gpt4" } },
    template: {
      metadata: { labels: { app: "gpt4", tier: "canary" } },
      spec: {
        containers: [
          {
            name: "inference",
            image: "openai/gpt4-inference:1.0",
            resources: { limits: { cpu: "4", memory: "16Gi" } },
          },
        ],
      },
    },
  },
});
const secretReaderFor = (ns: string, sa: string): KubeObject[] => [
  {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "Role",
    metadata: { namespace: ns, name: "llama-index-config-reader" },
    rules: [{ apiGroups: [""], resources: ["secrets"], resourceNames: [SECRET], verbs: ["get"] }],
  },
  {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "RoleBinding",
    metadata: { namespace: ns, name: "llama-index-config-reader" },
    roleRef: {
      apiGroup: "rbac.authorization.k8s.io",
      kind: "Role",
      name: "llama-index-config-reader",
    },
    subjects: [{ kind: "ServiceAccount", name: sa, namespace: ns }],
  },
];

let api: StandInApi;
let controller: Controller;

/** Every object the stand-in holds, as `kubectl get ... -o yaml` would export them. */
const snapshot = () =>
  new SnapshotCluster(
    RESOURCE_TYPES.filter(t => !["PeprStore", "SubjectAccessReview"].includes(t.kind)).flatMap(t =>
      api.list(t.kind).map(o => ({ ...o, kind: t.kind })),
    ),
  );

/**
 * A namespace created now with this service-account annotation, and the account `expected` of it
 * once the controller has made it (undefined if it never does, within 5 s).
 */
async function newNamespaceAccount(name: string, annotated: string, expected: string) {
  api.put({
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name, annotations: { "admission-guard.dev/service-account": annotated } },
  });
  let sa: KubeObject | undefined;
  for (let i = 0; i < 100 && !sa; i++) {
    await new Promise(r => setTimeout(r, 50));
    sa = api.get("ServiceAccount", expected, name);
  }
  return sa;
}

/** Sends the object through both webhooks, and reviews it offline against the state before. */
async function both(manifest: KubeObject): Promise<{ live: AdmitResult; offline: Review }> {
  const before = snapshot();
  const live = await admit(controller, manifest);
  // The offline review gets exactly what the webhook got: the object as the API server defaulted it.
  const offline = await review(policies, live.request.object as KubeObject, {
    settings: SETTINGS,
    cluster: before,
  });
  return { live, offline };
}

/** Parity: same decision, same object, each violation said by both front doors. */
function expectParity({ live, offline }: { live: AdmitResult; offline: Review }) {
  expect(live.allowed).toBe(offline.allowed);
  for (const v of offline.violations) {
    const line = formatViolation(v);
    if (!offline.allowed && v.severity !== "warn") expect(live.message).toContain(line);
    else expect(live.warnings).toContain(line);
  }
  if (live.request.kind.kind === "Pod" && live.allowed) {
    expect(live.patched.spec).toEqual(offline.object.spec);
    expect(live.patched.metadata?.labels).toEqual(offline.object.metadata?.labels);
  }
}

beforeAll(async () => {
  api = await startStandIn({
    objects: [
      namespace("llama-index"),
      namespace("llama-index-granted"),
      namespace("gpt4-canary"),
      namespace("gpt4-strict", { "admission-guard.dev/require-component": "gpt4" }),
      ...secretReaderFor("llama-index-granted", "workload"),
      ...HOSTILE_NAMES.map((name, i) => ({
        ...namespace(`hostile-sa-${i}`),
        metadata: {
          ...namespace(`hostile-sa-${i}`).metadata,
          annotations: { "admission-guard.dev/service-account": name },
        },
      })),
    ],
    // The stand-in answers SubjectAccessReviews as RBAC would, from the objects it stores.
    accessReview: (body, standIn) =>
      answerSubjectAccessReview(
        RBAC_KINDS.flatMap(kind => standIn.list(kind).map(o => ({ ...o, kind }))),
        body,
      ).status,
  });
  controller = await startController({ api, env: SETTINGS_ENV });
  // Rules read namespaces from the controller's watch cache: wait until it is watching.
  for (let i = 0; i < 100 && api.watching("Namespace") === 0; i++)
    await new Promise(r => setTimeout(r, 100));
}, 60_000);

afterAll(async () => {
  await controller?.stop();
  await api?.stop();
});

describe("identity e2e: service-account", () => {
  it("seed 000 pod: moved to the dedicated ServiceAccount, which is created; token dropped; secret access warned", async () => {
    expect(api.get("ServiceAccount", "workload", "llama-index")).toBeUndefined();
    const result = await both(seed000Pod("llama-index"));
    const { live } = result;
    expect(live.allowed).toBe(true);
    const spec = live.patched.spec as Record<string, unknown> & {
      volumes?: { name: string }[];
      containers: { volumeMounts?: { name: string }[] }[];
    };
    expect(spec.serviceAccountName).toBe("workload");
    expect(spec.serviceAccount).toBe("workload");
    expect(spec.automountServiceAccountToken).toBe(false);
    expect((spec.volumes ?? []).some(v => v.name.startsWith("kube-api-access-"))).toBe(false);
    expect(
      spec.containers
        .flatMap(c => c.volumeMounts ?? [])
        .some(m => m.name.startsWith("kube-api-access-")),
    ).toBe(false);
    // The mutating webhook created it in the API before answering.
    expect(api.get("ServiceAccount", "workload", "llama-index")?.metadata?.name).toBe("workload");
    const warning = live.warnings.find(w => w.includes("may not get secret"));
    expect(warning).toBe(
      `admission-guard/service-account: ServiceAccount llama-index/workload of Pod llama-index/llamaindex-trainer-xxxx may not get secret "${SECRET}" (envFrom of container "trainer"). Fix: kubectl create role workload-secret-reader --verb=get --resource=secrets --resource-name=${SECRET} -n llama-index && kubectl create rolebinding workload-secret-reader --role=workload-secret-reader --serviceaccount=llama-index:workload -n llama-index`,
    );
    // It asked the API server, with the ServiceAccount the pod will run as.
    const sar = api.requests.filter(r => r.path.includes("subjectaccessreviews"));
    expect(sar.map(r => (r.body as { spec: { user: string } }).spec.user)).toContain(
      "system:serviceaccount:llama-index:workload",
    );
    // Offline, the same pod: the ServiceAccount is created first, as the webhook did it.
    expect(
      result.offline.changes.find(c => c.rule === "dedicated-service-account")?.message,
    ).toMatch(/\(was default; created ServiceAccount llama-index\/workload\)$/);
    expectParity(result);
  });

  it("with a RoleBinding granting the secret, no warning", async () => {
    const result = await both(seed000Pod("llama-index-granted"));
    expect(result.live.allowed).toBe(true);
    expect(result.live.warnings.join("\n")).not.toMatch(/secret/);
    expect(result.offline.violations).toEqual([]);
    expectParity(result);
  });
});

describe("identity e2e: issue 40, a tenant's service-account annotation creates no account of its choosing", () => {
  /** The ServiceAccounts the controller asked the stand-in to apply in a namespace. */
  const appliedIn = (ns: string) =>
    api.requests
      .filter(
        r => r.method === "PATCH" && r.path.startsWith(`/api/v1/namespaces/${ns}/serviceaccounts/`),
      )
      .map(r => decodeURIComponent(r.path.split("/")[6].split("?")[0]));

  it.each(
    HOSTILE_NAMES.map(
      (name, i) => [name.length > 40 ? `${name.length} characters` : name, i] as const,
    ),
  )(
    "annotation %s: the pod goes to the setting's account, only it is applied, and a warning says why",
    async (_, i) => {
      const ns = `hostile-sa-${i}`;
      const result = await both(seed000Pod(ns));
      const { live } = result;
      expect(live.allowed).toBe(true);
      expect((live.patched.spec as { serviceAccountName: string }).serviceAccountName).toBe(
        "workload",
      );
      expect(appliedIn(ns)).toEqual(["workload"]);
      expect(
        api
          .list("ServiceAccount")
          .filter(sa => sa.metadata?.namespace === ns)
          .map(sa => sa.metadata?.name),
      ).toEqual(["workload"]);
      const warning = live.warnings.find(w => w.includes("admission-guard.dev/service-account="))!;
      expect(warning).toMatch(
        /(not a valid ServiceAccount name|an admin did not allow \(serviceAccount\.allowedNames\)); using "workload"/,
      );
      expect(Buffer.byteLength(warning)).toBeLessThan(700);
      expectParity(result);
    },
  );

  it("a new namespace annotated with another controller's account gets the setting's account, not that one", async () => {
    const sa = await newNamespaceAccount(
      "fresh-hostile",
      "argocd-application-controller",
      "workload",
    );
    expect(sa?.metadata?.name).toBe("workload");
    expect(appliedIn("fresh-hostile")).toEqual(["workload"]);
  });
});

describe("identity e2e: a new namespace", () => {
  it("gets its dedicated ServiceAccount as soon as the controller sees it", async () => {
    const sa = await newNamespaceAccount("fresh", "trainer", "trainer");
    expect(sa?.metadata?.labels).toEqual({ "app.kubernetes.io/managed-by": "admission-guard" });
    // Namespaces that existed before start-up were left to their first pod.
    expect(api.get("ServiceAccount", "workload", "gpt4-strict")).toBeUndefined();
  });
});

describe("identity e2e: labels", () => {
  it("seed 002 pod: component and name labels added, app kept", async () => {
    const result = await both(seed002Pod("gpt4-canary"));
    expect(result.live.allowed).toBe(true);
    expect(result.live.patched.metadata?.labels).toMatchObject({
      app: "gpt4",
      "app.kubernetes.io/component": "gpt4",
      "app.kubernetes.io/name": "gpt4",
    });
    expectParity(result);
  });

  it("seed 002 Deployment: allowed unchanged, told what its pods will get", async () => {
    const result = await both(seed002Deployment("gpt4-canary"));
    expect(result.live.allowed).toBe(true);
    expect(result.live.mutateResponse).toBeUndefined();
    expect(result.live.warnings.join("\n")).toMatch(
      /admission-guard\/labels: its pods will get spec\.template\.metadata\.labels\["app\.kubernetes\.io\/component"\]="gpt4"/,
    );
    expect(result.offline.object.spec).toMatchObject({
      template: { metadata: { labels: { app: "gpt4", "app.kubernetes.io/component": "gpt4" } } },
    });
    expectParity(result);
  });

  it("a namespace requiring another component value denies the pod, with the fix", async () => {
    const result = await both(seed002Pod("gpt4-strict", "gpt4-canary"));
    expect(result.live.allowed).toBe(false);
    expect(result.live.message).toContain(
      'admission-guard/labels: Pod gpt4-strict/test-gpt4 would have app.kubernetes.io/component="gpt4-canary", but namespace gpt4-strict requires app.kubernetes.io/component="gpt4" (admission-guard.dev/require-component). Fix: set metadata.labels["app.kubernetes.io/component"]="gpt4"',
    );
    expectParity(result);
  });

  it("a Deployment whose pods would lack the required value is denied at apply time", async () => {
    const d = seed002Deployment("gpt4-strict");
    (
      d.spec as { template: { metadata: { labels: Record<string, string> } } }
    ).template.metadata.labels.app = "gpt4-canary";
    const result = await both(d);
    expect(result.live.allowed).toBe(false);
    expect(result.live.message).toMatch(
      /Fix: set spec\.template\.metadata\.labels\["app\.kubernetes\.io\/component"\]="gpt4"/,
    );
    expectParity(result);
  });
});
