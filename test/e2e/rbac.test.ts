// The controller under exactly the RBAC `npx pepr build` writes into dist/pepr-module-<uuid>.yaml
// (package.json `pepr.rbacMode: scoped` + `pepr.rbac`): the stand-in API authenticates it as its
// ServiceAccount and answers 403, as a cluster would, every request those rules do not allow. Real
// admissions walk every API path the controller has: Pepr's store, the watched caches
// (namespaces, quotas, LimitRanges, nodes), ServiceAccount server-side apply, SubjectAccessReviews.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { KubeObject } from "../../lib/objects/pod";
import { admit } from "../support/admission";
import { describeAttributes } from "../support/authorization";
import { REPO_ROOT, startController, startWatcher, type Controller } from "../support/controller";
import { node } from "./cases";
import { loadManifests } from "../support/manifests";
import {
  moduleYamlPath,
  forbiddenRequests,
  loadModuleRbac,
  withoutVerb,
  type ModuleRbac,
} from "../support/module-rbac";
import { startStandIn, type StandInApi } from "../support/stand-in-api";
import { groupOf, pluralOf, versionOf } from "../../lib/workload-kinds/kind-spec";
import { BUILT_IN_KINDS } from "../../lib/workload-kinds/table";
import { cachesSynced, eventually } from "../support/wait";

/** A namespace that existed long before the controller started (no ServiceAccount made for it). */
const namespace = (name: string, annotations: Record<string, string> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Namespace",
  metadata: { name, annotations, creationTimestamp: new Date("2024-05-12T14:00:00Z") },
});
const cluster: KubeObject[] = [
  namespace("llama-index"),
  namespace("ml-quota"),
  {
    apiVersion: "v1",
    kind: "ResourceQuota",
    metadata: { name: "compute-resources", namespace: "ml-quota" },
    spec: { hard: { "requests.cpu": "2" } },
    status: { hard: { "requests.cpu": "2" }, used: { "requests.cpu": "0" } },
  },
  {
    apiVersion: "v1",
    kind: "LimitRange",
    metadata: { name: "defaults", namespace: "ml-quota" },
    spec: { limits: [{ type: "Container", defaultRequest: { cpu: "100m" } }] },
  },
  node("train-node-1", { cpu: "64", memory: "256Gi", pods: "110" }),
];

/** Seed 000: the LlamaIndex trainer (4 CPUs, 8Gi, a secret through envFrom), in namespace ns. */
const seed000Pod = (ns = "llama-index"): KubeObject => {
  const pod = structuredClone(
    loadManifests(join(REPO_ROOT, "test/fixtures/e2e/llamaindex-trainer.yaml"))[0].object,
  );
  pod.metadata = { ...pod.metadata, namespace: ns };
  return pod;
};

/**
 * The module's webhook configurations as built (failing open, see lib/webhooks/arming.ts) and a
 * Ready endpoint behind the Service they call: what a deployed controller finds, and arms.
 */
function installedWebhooks(): KubeObject[] {
  const configs = loadManifests(moduleYamlPath())
    .map(m => m.object)
    .filter(o => /WebhookConfiguration$/.test(String(o.kind)));
  const service = (
    configs[0].webhooks as { clientConfig: { service: KubeObject["metadata"] } }[]
  )[0].clientConfig.service!;
  return [
    ...configs,
    {
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: {
        name: `${service.name}-x7k2p`,
        namespace: service.namespace,
        labels: { "kubernetes.io/service-name": service.name! },
      },
      addressType: "IPv4",
      endpoints: [{ addresses: ["10.244.0.7"], conditions: { ready: true } }],
    } as KubeObject,
  ];
}

/** The stand-in with the cluster and the module's RBAC, enforcing it; then the controller. */
async function start(rbac: ModuleRbac, rbacObjects = rbac.objects) {
  const api = await startStandIn({
    objects: [...cluster, ...installedWebhooks(), ...rbacObjects],
    enforceRbac: rbac.identity,
  });
  // Every ML kind's CRD served: the watcher lists and watches each (its grants in pepr.rbac).
  for (const k of BUILT_IN_KINDS)
    api.registerType({
      group: groupOf(k.apiVersion),
      version: versionOf(k.apiVersion),
      kind: k.kind,
      plural: pluralOf(k),
      namespaced: true,
    });
  // DRA served (resource.k8s.io/v1beta1, as a 1.32 API server with DRA on): the caches of lib/cluster/dra-live.ts.
  for (const [kind, plural, namespaced] of [
    ["ResourceClaimTemplate", "resourceclaimtemplates", true],
    ["DeviceClass", "deviceclasses", false],
    ["ResourceSlice", "resourceslices", false],
  ] as const)
    api.registerType({ group: "resource.k8s.io", version: "v1beta1", kind, plural, namespaced });
  try {
    return { api, controller: await startController({ api }) };
  } catch (e) {
    await api.stop();
    throw e;
  }
}

/** Pepr's watcher (the Deployment `pepr build` adds for Watch bindings), as the same ServiceAccount. */
const startModuleWatcher = (api: StandInApi) =>
  startWatcher({ api, env: { ADMISSION_GUARD_REPORTS_INTERVAL_SECONDS: "1" } });

const rbac = loadModuleRbac();

describe("RBAC e2e: the generated module manifest", () => {
  it("binds the admission controller's ServiceAccount to the module's ClusterRole", () => {
    expect(rbac.serviceAccount.namespace).toBe("pepr-system");
    expect(rbac.objects.map(o => o.kind).sort()).toEqual(["ClusterRole", "ClusterRoleBinding"]);
    // Pepr also writes a store Role, bound to "<name>-store", a ServiceAccount no pod runs as: it
    // grants the controller nothing, the ClusterRole has to carry the store permissions.
    expect(rbac.unused.map(o => o.kind).sort()).toEqual(["Role", "RoleBinding"]);
  });
});

describe("RBAC e2e: the controller under exactly the generated rules", () => {
  let api: StandInApi;
  let controller: Controller;
  let watcher: Controller;

  beforeAll(async () => {
    ({ api, controller } = await start(rbac));
    watcher = await startModuleWatcher(api);
    await cachesSynced(api);
  }, 60_000);

  afterAll(async () => {
    await watcher?.stop();
    await controller?.stop();
    await api?.stop();
  });

  it("became healthy: Pepr listed and watched its store as its ServiceAccount", async () => {
    expect((await controller.get("/healthz")).status).toBe(200);
    // Its list alone makes the routes appear: the watch request may come a moment later.
    await eventually(() => {
      const store = api.requests.filter(r => r.path.includes("/peprstores"));
      const verbs = new Set(store.flatMap(r => r.access ?? []).map(a => a.verb));
      expect([...verbs].sort()).toEqual(["create", "get", "list", "patch", "watch"]);
    });
  });

  it("seed 000 pod: its ServiceAccount applied, its secret access asked, node fit checked", async () => {
    const result = await admit(controller, seed000Pod());
    expect(result.allowed).toBe(true);
    expect((result.patched.spec as { serviceAccountName?: string }).serviceAccountName).toBe(
      "workload",
    );
    expect(api.get("ServiceAccount", "workload", "llama-index")).toBeDefined();
    // Created by apply: authorized as patch, then as create for that name.
    const apply = api.requests.find(r =>
      r.path.startsWith("/api/v1/namespaces/llama-index/serviceaccounts/workload"),
    );
    expect(apply?.access?.map(a => `${a.verb}:${a.allowed}`)).toEqual([
      "patch:true",
      "create:true",
    ]);
    // The secret access question was asked, and the answer (no binding) reached the pod.
    expect(
      api.requests.some(r => r.method === "POST" && r.path.endsWith("/subjectaccessreviews")),
    ).toBe(true);
    expect(result.warnings.join("\n")).toMatch(/may not get secret "llama-index-config"/);
    // The node cache is synced: node fit was judged, not skipped.
    expect(result.warnings.join("\n")).not.toMatch(/not checked/);
  });

  it("a quota check: the quota and LimitRange caches are synced", async () => {
    const result = await admit(controller, seed000Pod("ml-quota"));
    expect(result.allowed).toBe(false);
    expect(result.message).toMatch(/admission-guard\/resource-quota: .*quota compute-resources/);
  });

  it("a namespace that appears gets its ServiceAccount", async () => {
    api.put({
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: "fresh" },
    });
    const sa = await eventually(() => {
      const found = api.get("ServiceAccount", "workload", "fresh");
      if (!found) throw new Error("no ServiceAccount fresh/workload yet");
      return found;
    });
    expect(sa.metadata?.labels).toEqual({ "app.kubernetes.io/managed-by": "admission-guard" });
  });

  it("applied the Exemption CRD at start, as Pepr applies its own", async () => {
    await eventually(() =>
      expect(api.get("CustomResourceDefinition", "exemptions.admission-guard.dev")).toBeDefined(),
    );
  });

  it("the watcher: a fixed pod gets its Event, its namespace a PolicyReport, gone with the pod", async () => {
    // As the API server stores a pod the module fixed: the trace annotation, a uid, just created.
    const pod = api.put({
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: "trainer",
        namespace: "llama-index",
        annotations: { "admission-guard.dev/fixed": "security-context/runAsNonRoot" },
      },
      spec: {
        containers: [
          { name: "c", image: "ghcr.io/org/trainer:1", securityContext: { privileged: true } },
        ],
      },
      status: { phase: "Running" },
    });
    const event = await eventually(() => {
      const found = api
        .list("Event", "llama-index")
        .find(
          e =>
            (e as { involvedObject?: { uid?: string } }).involvedObject?.uid === pod.metadata?.uid,
        );
      if (!found) throw new Error("no Event for the pod yet");
      return found as KubeObject & { reason: string; message: string };
    }, 20_000);
    expect(event.reason).toBe("AdmissionGuardFixed");
    expect(event.message).toContain("security-context: runAsNonRoot");
    const report = await eventually(() => {
      const found = api.get("PolicyReport", "admission-guard", "llama-index") as
        | (KubeObject & { results: { rule?: string; result: string }[] })
        | undefined;
      if (!found) throw new Error("no PolicyReport yet");
      return found;
    }, 20_000);
    expect(report.results).toContainEqual(
      expect.objectContaining({ rule: "privileged", result: "fail" }),
    );
    api.remove("Pod", "trainer", "llama-index");
    await eventually(
      () => expect(api.get("PolicyReport", "admission-guard", "llama-index")).toBeUndefined(),
      20_000,
    );
  }, 60_000);

  // After the cases above: every API path has been walked.
  it("armed its webhooks (failurePolicy Fail) once a replica was Ready behind their Service", async () => {
    for (const config of installedWebhooks().filter(o => o.kind !== "EndpointSlice"))
      await eventually(() => {
        const stored = api.get(String(config.kind), config.metadata!.name!)!;
        const policies = (stored.webhooks as { failurePolicy: string }[]).map(w => w.failurePolicy);
        expect(policies).toEqual(policies.map(() => "Fail"));
      }, 15_000);
  });

  it("no request was forbidden", () => {
    expect(forbiddenRequests(api.requests)).toEqual([]);
    expect(controller.logs()).not.toMatch(/forbidden/i);
    expect(watcher.logs()).not.toMatch(/forbidden/i);
  });

  it("every permission package.json pepr.rbac grants was used (least privilege)", () => {
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8"));
    const granted = (
      pkg.pepr.rbac as { apiGroups: string[]; resources: string[]; verbs: string[] }[]
    ).flatMap(rule =>
      rule.apiGroups.flatMap(group =>
        rule.resources.flatMap(resource => rule.verbs.map(verb => ({ group, resource, verb }))),
      ),
    );
    const used = api.requests.flatMap(r => r.access ?? []).filter(a => a.allowed);
    const unused = granted.filter(
      g => !used.some(a => a.group === g.group && a.resource === g.resource && a.verb === g.verb),
    );
    expect(unused.map(g => `${g.verb} ${g.resource} (group "${g.group}")`)).toEqual([]);
  });
});

/** Runs `check` against the controller under the generated rules with one verb taken away. */
async function without(
  permission: { group: string; resource: string; verb: string },
  check: (api: StandInApi, controller: Controller) => Promise<void>,
) {
  const { api, controller } = await start(rbac, withoutVerb(rbac.objects, permission));
  try {
    await check(api, controller);
  } finally {
    await controller.stop();
    await api.stop();
  }
}

describe("RBAC e2e: a missing permission is seen", () => {
  it(
    "without serviceaccounts create: 403 recorded, no ServiceAccount, the pod denied saying why",
    () =>
      without(
        { group: "", resource: "serviceaccounts", verb: "create" },
        async (api, controller) => {
          await cachesSynced(api);
          const result = await admit(controller, seed000Pod());
          expect(api.get("ServiceAccount", "workload", "llama-index")).toBeUndefined();
          expect(forbiddenRequests(api.requests)).toContain(
            "PATCH /api/v1/namespaces/llama-index/serviceaccounts/workload?fieldManager=pepr&fieldValidation=Strict&force=false" +
              ' needs create serviceaccounts "workload" in namespace "llama-index"',
          );
          expect(result.allowed).toBe(false);
          expect(result.message).toContain(
            'admission-guard/service-account: Pod llama-index/llamaindex-trainer runs as ServiceAccount "default", and the dedicated ServiceAccount llama-index/workload could not be created (HTTP 403 Forbidden: serviceaccounts "workload" is forbidden: User "system:serviceaccount:pepr-system:' +
              `${rbac.serviceAccount.name}" cannot create resource "serviceaccounts" in API group "" in the namespace "llama-index"). Fix: kubectl create serviceaccount workload -n llama-index`,
          );
        },
      ),
    60_000,
  );

  it(
    "without peprstores list: 403 on every store list, yet healthy (the watch replays the store)",
    () =>
      without(
        { group: "pepr.dev", resource: "peprstores", verb: "list" },
        async (api, controller) => {
          // kubernetes-fluent-client lists before it watches; when the list fails it watches without
          // a resourceVersion, and the API server then sends the store as an ADDED event: Pepr's
          // routes appear. The list permission spares that 403 on every (re)connect.
          expect((await controller.get("/healthz")).status).toBe(200);
          const denied = api.requests.flatMap(r => r.access ?? []).filter(a => !a.allowed);
          expect(denied.length).toBeGreaterThan(0);
          expect(new Set(denied.map(describeAttributes))).toEqual(
            new Set([
              `list peprstores.pepr.dev "${rbac.serviceAccount.name}-store" in namespace "pepr-system"`,
            ]),
          );
        },
      ),
    60_000,
  );
});
