// A sidecar injector (as Istio, Linkerd or Vault run one) adds a container in its own mutating
// webhook, after ours. The API server calls ours again because the built module asks for it
// (reinvocationPolicy: IfNeeded, set by `npm run build`), so the sidecar is fixed too and Pod
// Security admission admits the pod. With the policy Kubernetes defaults to (Never), the same pod is
// refused for the sidecar's securityContext.
import type { V1PodSpec } from "@kubernetes/client-node";
import { createServer, type Server } from "node:https";
import { stringify } from "yaml";
import type { KubeObject } from "../../lib/objects/pod";
import { createTestCerts, type TestCerts } from "../support/certs";
import { eventually } from "../support/wait";
import { applyObjects, connect, kubectl, namespace, useModule } from "./support/cluster";
import { pathOf } from "./support/kube-client";

const cluster = connect();
// With a read-only root filled, so that "fixed once" shows in the scratch volume added once.
const guard = useModule(cluster, {
  env: { ADMISSION_GUARD_SECURITY_CONTEXT_READ_ONLY_ROOT_FILESYSTEM: "fill" },
});
const NS = "mesh";
const SIDECAR = "sidecar-proxy";

let certs: TestCerts;
let injector: Server;
let injected = 0;

/** A plain injector: appends a sidecar with no securityContext, once. */
function startInjector(): Promise<number> {
  certs = createTestCerts();
  injector = createServer({ key: certs.keyPem, cert: certs.certPem }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", c => chunks.push(c));
    req.on("end", () => {
      const review = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      const pod = review.request.object as { spec: V1PodSpec };
      const patch = pod.spec.containers.some(c => c.name === SIDECAR)
        ? []
        : [
            {
              op: "add",
              path: "/spec/containers/-",
              value: { name: SIDECAR, image: "docker.io/istio/proxyv2:1.22.0", args: ["proxy"] },
            },
          ];
      if (patch.length) injected++;
      res.setHeader("Content-Type", "application/json");
      res.end(
        JSON.stringify({
          apiVersion: "admission.k8s.io/v1",
          kind: "AdmissionReview",
          response: {
            uid: review.request.uid,
            allowed: true,
            ...(patch.length && {
              patchType: "JSONPatch",
              patch: Buffer.from(JSON.stringify(patch)).toString("base64"),
            }),
          },
        }),
      );
    });
  });
  return new Promise(ok =>
    injector.listen(0, "127.0.0.1", () => ok((injector.address() as { port: number }).port)),
  );
}

// Mutating webhooks are called in the order of their configurations' names: "pepr-..." first.
const injectorConfig = (port: number): KubeObject => ({
  apiVersion: "admissionregistration.k8s.io/v1",
  kind: "MutatingWebhookConfiguration",
  metadata: { name: "zz-sidecar-injector" },
  webhooks: [
    {
      name: "inject.sidecar.example.com",
      admissionReviewVersions: ["v1"],
      clientConfig: {
        url: `https://127.0.0.1:${port}/inject`,
        caBundle: Buffer.from(certs.caPem).toString("base64"),
      },
      rules: [
        { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"] },
      ],
      namespaceSelector: { matchLabels: { "sidecar-injection": "enabled" } },
      sideEffects: "None",
      failurePolicy: "Fail",
      reinvocationPolicy: "Never",
    },
  ],
});

const pod = (name: string): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: NS },
  spec: { containers: [{ name: "app", image: "ghcr.io/org/app:1.0" }] },
});
const create = (obj: KubeObject) => kubectl(cluster, ["create", "-f", "-"], stringify(obj));

async function ourReinvocationPolicy(policy: "IfNeeded" | "Never"): Promise<void> {
  const config = guard.module!.manifest.webhookConfigurations.find(
    c => c.kind === "MutatingWebhookConfiguration",
  )!;
  const path = pathOf(config, "mutatingwebhookconfigurations");
  const current = (await cluster.admin.get(path)).body;
  for (const w of current.webhooks as { reinvocationPolicy: string }[])
    w.reinvocationPolicy = policy;
  const res = await cluster.admin.raw("PUT", path, current);
  expect(res.status).toBe(200);
}

beforeAll(async () => {
  await applyObjects(cluster, [
    namespace(NS, {
      "pod-security.kubernetes.io/enforce": "restricted",
      "sidecar-injection": "enabled",
    }),
  ]);
  const port = await startInjector();
  await guard.install();
  await applyObjects(cluster, [injectorConfig(port)]);
}, 60_000);

afterAll(async () => {
  await cluster.admin.delete(
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/zz-sidecar-injector",
  );
  await new Promise(done => injector.close(() => done(undefined)));
});

test("the generated mutating webhook is registered with reinvocationPolicy IfNeeded", async () => {
  const config = guard.module!.manifest.webhookConfigurations.find(
    c => c.kind === "MutatingWebhookConfiguration",
  )!;
  const stored = (await cluster.admin.get(pathOf(config, "mutatingwebhookconfigurations"))).body;
  expect(
    (stored.webhooks as { reinvocationPolicy: string }[]).map(w => w.reinvocationPolicy),
  ).toEqual(["IfNeeded"]);
});

test("a sidecar injected after our webhook is fixed on re-invocation; Pod Security admits the pod", async () => {
  const result = await eventually(async () => {
    const r = await create(pod("with-sidecar"));
    if (r.code !== 0) throw new Error(r.stderr);
    return r;
  }, 20_000);
  expect(result.stdout).toContain("pod/with-sidecar created");
  const spec = (await cluster.admin.get(`/api/v1/namespaces/${NS}/pods/with-sidecar`)).body
    .spec as V1PodSpec;
  expect(spec.containers.map(c => c.name)).toEqual(["app", SIDECAR]);
  const sidecar = spec.containers.find(c => c.name === SIDECAR)!;
  expect(sidecar.securityContext).toMatchObject({
    allowPrivilegeEscalation: false,
    capabilities: { drop: ["ALL"] },
  });
  // Fixed once: the second call found the app container done and fixed only the sidecar.
  expect(spec.containers[0].securityContext).toEqual(sidecar.securityContext);
  expect(spec.volumes?.filter(v => v.name === "ag-writable-tmp")).toHaveLength(1);
});

test("with reinvocationPolicy Never (Kubernetes' default), the same pod is refused for the sidecar", async () => {
  await ourReinvocationPolicy("Never");
  try {
    const before = injected;
    const result = await eventually(async () => {
      const r = await create(pod("without-reinvocation"));
      if (r.code === 0) throw new Error("admitted: the API server still has the old policy");
      return r;
    }, 20_000);
    expect(injected).toBeGreaterThan(before);
    expect(result.stderr).toContain('violates PodSecurity "restricted:latest"');
    expect(result.stderr).toContain(
      `container "${SIDECAR}" must set securityContext.allowPrivilegeEscalation=false`,
    );
  } finally {
    await ourReinvocationPolicy("IfNeeded");
  }
});
