// The stand-in API on its own (no controller): what the harness promises other suites.
import { K8s, kind } from "kubernetes-fluent-client";
import { Agent } from "node:https";
import type { KubeObject } from "../../lib/objects/pod";
import { serviceAccountUser } from "../../lib/cluster/rbac";
import { requestAttributes } from "../support/authorization";
import { sendHttps } from "../support/https";
import { startStandIn, type StandInApi } from "../support/stand-in-api";
import { eventually } from "../support/wait";

let api: StandInApi;
let agent: Agent;

beforeAll(async () => {
  api = await startStandIn({
    objects: [
      { apiVersion: "v1", kind: "Namespace", metadata: { name: "ml", labels: { team: "a" } } },
      { apiVersion: "v1", kind: "Namespace", metadata: { name: "web", labels: { team: "b" } } },
    ],
  });
  agent = new Agent({ keepAlive: true, ca: api.certs.caPem });
});

afterAll(async () => {
  agent.destroy();
  await api.stop();
});

async function call(
  method: string,
  path: string,
  body?: unknown,
  contentType = "application/json",
  to = api,
  token?: string,
) {
  const headers: Record<string, string> = { "Content-Type": contentType };
  if (token) headers.Authorization = `Bearer ${token}`;
  const reply = await sendHttps(to.url + path, {
    method,
    agent,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: reply.status, json: reply.json as KubeObject };
}

describe("stand-in API", () => {
  it("lists with a resourceVersion, filters by field and label selectors", async () => {
    const all = await call("GET", "/api/v1/namespaces");
    expect(all.json.kind).toBe("NamespaceList");
    expect(
      Number((all.json.metadata as { resourceVersion: string }).resourceVersion),
    ).toBeGreaterThan(0);
    const byName = await call("GET", "/api/v1/namespaces?fieldSelector=metadata.name%3Dml");
    expect((byName.json.items as KubeObject[]).map(n => n.metadata?.name)).toEqual(["ml"]);
    const byLabel = await call("GET", "/api/v1/namespaces?labelSelector=team%3Db");
    expect((byLabel.json.items as KubeObject[]).map(n => n.metadata?.name)).toEqual(["web"]);
  });

  it("creates (409 when it exists), gets, merge- and json-patches, deletes", async () => {
    const sa = { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "trainer" } };
    expect((await call("POST", "/api/v1/namespaces/ml/serviceaccounts", sa)).status).toBe(201);
    expect((await call("POST", "/api/v1/namespaces/ml/serviceaccounts", sa)).status).toBe(409);
    const got = await call("GET", "/api/v1/namespaces/ml/serviceaccounts/trainer");
    expect(got.json.metadata?.uid).toBeTruthy();
    const merged = await call(
      "PATCH",
      "/api/v1/namespaces/ml/serviceaccounts/trainer",
      { metadata: { labels: { a: "1" } } },
      "application/merge-patch+json",
    );
    expect(merged.json.metadata?.labels).toEqual({ a: "1" });
    const patched = await call(
      "PATCH",
      "/api/v1/namespaces/ml/serviceaccounts/trainer",
      [{ op: "add", path: "/metadata/labels/b", value: "2" }],
      "application/json-patch+json",
    );
    expect(patched.json.metadata?.labels).toEqual({ a: "1", b: "2" });
    expect(Number(patched.json.metadata?.resourceVersion)).toBeGreaterThan(
      Number(got.json.metadata?.resourceVersion),
    );
    expect((await call("DELETE", "/api/v1/namespaces/ml/serviceaccounts/trainer")).status).toBe(
      200,
    );
    expect((await call("GET", "/api/v1/namespaces/ml/serviceaccounts/trainer")).status).toBe(404);
    expect(api.requests.some(r => r.method === "DELETE")).toBe(true);
  });

  it("serves kubernetes-fluent-client's server-side apply (create, then merge)", async () => {
    process.env.KUBECONFIG = api.kubeconfigPath;
    const applied = await K8s(kind.ServiceAccount).Apply({
      metadata: { name: "workload", namespace: "ml" },
    });
    expect(applied.metadata?.uid).toBeTruthy();
    const again = await K8s(kind.ServiceAccount).Apply({
      metadata: { name: "workload", namespace: "ml", labels: { x: "y" } },
    });
    expect(again.metadata?.uid).toBe(applied.metadata?.uid);
    expect(api.get("ServiceAccount", "workload", "ml")?.metadata?.labels).toEqual({ x: "y" });
    const ssa = api.requests.find(r => r.contentType === "application/apply-patch+yaml");
    expect(ssa?.method).toBe("PATCH");
  });

  it("answers SubjectAccessReviews with the injected function (default: not allowed)", async () => {
    const review = {
      apiVersion: "authorization.k8s.io/v1",
      kind: "SubjectAccessReview",
      spec: { user: "system:serviceaccount:ml:default", resourceAttributes: { verb: "get" } },
    };
    const path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    expect((await call("POST", path, review)).json.status).toEqual({ allowed: false });
    api.setAccessReview(r => ({
      allowed: (r.spec as { user: string }).user.endsWith(":default"),
      reason: "test",
    }));
    expect((await call("POST", path, review)).json.status).toEqual({
      allowed: true,
      reason: "test",
    });
  });

  it("pushes watch events to kubernetes-fluent-client watchers, and closes them when down", async () => {
    process.env.KUBECONFIG = api.kubeconfigPath;
    const seen: string[] = [];
    const watcher = K8s(kind.Namespace).Watch((ns, phase) => {
      seen.push(`${phase} ${ns.metadata?.name}`);
    });
    await watcher.start();
    try {
      await eventually(() => expect(api.watching("Namespace")).toBe(1));
      api.put({ apiVersion: "v1", kind: "Namespace", metadata: { name: "new" } });
      api.remove("Namespace", "web");
      await eventually(() =>
        expect(seen).toEqual(expect.arrayContaining(["ADDED new", "DELETED web"])),
      );
      expect(seen).toEqual(expect.arrayContaining(["ADDED ml"]));
      api.setDown(true);
      expect(api.watching("Namespace")).toBe(0);
      await expect(call("GET", "/api/v1/namespaces")).rejects.toThrow();
      api.setDown(false);
    } finally {
      watcher.close();
    }
  });

  it("answers 404 with a Status for what it does not serve", async () => {
    const res = await call("GET", "/apis/example.com/v1/widgets");
    expect(res.status).toBe(404);
    expect(res.json).toMatchObject({ kind: "Status", code: 404 });
  });
});

describe("stand-in API: authorization attributes, as the API server derives them", () => {
  const at = (method: string, path: string) =>
    requestAttributes(method, new URL(path, "https://127.0.0.1"));

  it.each([
    [
      "GET",
      "/api/v1/namespaces",
      { verb: "list", resource: "namespaces", namespace: "", name: "" },
    ],
    ["GET", "/api/v1/nodes?watch=true&resourceVersion=3", { verb: "watch", resource: "nodes" }],
    ["GET", "/api/v1/watch/nodes", { verb: "watch", resource: "nodes" }],
    ["GET", "/api/v1/nodes?watch=0", { verb: "list" }],
    [
      "GET",
      "/api/v1/namespaces/ml",
      { verb: "get", resource: "namespaces", namespace: "ml", name: "ml" },
    ],
    [
      "GET",
      "/api/v1/namespaces/ml/pods/p/log",
      { verb: "get", resource: "pods", name: "p", subresource: "log" },
    ],
    [
      "PUT",
      "/api/v1/namespaces/ml/status",
      { verb: "update", resource: "namespaces", name: "ml", subresource: "status" },
    ],
    [
      "GET",
      "/apis/pepr.dev/v1/namespaces/pepr-system/peprstores?fieldSelector=metadata.name%3Ds",
      { verb: "list", group: "pepr.dev", namespace: "pepr-system", name: "s" },
    ],
    [
      "POST",
      "/apis/authorization.k8s.io/v1/subjectaccessreviews",
      {
        verb: "create",
        group: "authorization.k8s.io",
        resource: "subjectaccessreviews",
        namespace: "",
      },
    ],
    [
      "PATCH",
      "/api/v1/namespaces/ml/serviceaccounts/w",
      { verb: "patch", namespace: "ml", name: "w" },
    ],
    ["DELETE", "/api/v1/namespaces/ml/pods", { verb: "deletecollection", resource: "pods" }],
  ])("%s %s", (method, path, expected) => {
    expect(at(method, path)).toMatchObject(expected);
  });

  it("discovery, /healthz and /version are not resource requests", () => {
    for (const path of ["/api", "/api/v1", "/apis", "/apis/apps/v1", "/healthz", "/version"])
      expect(at("GET", path)).toBeUndefined();
  });
});

describe("stand-in API: enforceRbac", () => {
  const who = serviceAccountUser("sys", "ctl");
  let enforcing: StandInApi;
  const token = "stand-in-token"; // what its kubeconfig carries
  const as = (method: string, path: string, body?: unknown, contentType?: string) =>
    call(method, path, body, contentType, enforcing, token);

  beforeAll(async () => {
    enforcing = await startStandIn({
      enforceRbac: who,
      certs: api.certs, // the agent trusts these
      objects: [
        { apiVersion: "v1", kind: "Namespace", metadata: { name: "ml" } },
        {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "ClusterRole",
          metadata: { name: "ctl" },
          rules: [
            { apiGroups: [""], resources: ["namespaces"], verbs: ["list"] },
            { apiGroups: [""], resources: ["serviceaccounts"], verbs: ["patch"] },
          ],
        },
        {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "ClusterRoleBinding",
          metadata: { name: "ctl" },
          roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "ctl" },
          subjects: [{ kind: "ServiceAccount", name: "ctl", namespace: "sys" }],
        },
      ],
    });
  });
  afterAll(() => enforcing.stop());

  it("allows what the stored RBAC grants, answers 403 with the API server's Status otherwise", async () => {
    expect((await as("GET", "/api/v1/namespaces")).status).toBe(200);
    const denied = await as("GET", "/api/v1/namespaces?watch=true");
    expect(denied.status).toBe(403);
    expect(denied.json).toEqual({
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message:
        'namespaces is forbidden: User "system:serviceaccount:sys:ctl" cannot watch resource "namespaces" in API group "" at the cluster scope',
      reason: "Forbidden",
      details: { group: "", kind: "namespaces" },
      code: 403,
    });
    expect(enforcing.requests.at(-1)?.forbidden).toBe(denied.json.message);
    // Discovery needs no rule.
    expect((await as("GET", "/api/v1")).status).toBe(200);
  });

  it("a server-side apply that would create needs create too; one that updates, patch only", async () => {
    const path = "/api/v1/namespaces/ml/serviceaccounts/w?fieldManager=t";
    const yaml = "application/apply-patch+yaml";
    const body = { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "w" } };
    const create = await as("PATCH", path, body, yaml);
    expect(create.status).toBe(403);
    expect(create.json.message).toContain('cannot create resource "serviceaccounts"');
    expect(enforcing.get("ServiceAccount", "w", "ml")).toBeUndefined();
    expect(enforcing.requests.at(-1)?.access?.map(a => `${a.verb}:${a.allowed}`)).toEqual([
      "patch:true",
      "create:false",
    ]);
    enforcing.put({ ...body, metadata: { name: "w", namespace: "ml" } });
    expect(
      (await as("PATCH", path, { ...body, metadata: { name: "w", labels: { a: "b" } } }, yaml))
        .status,
    ).toBe(200);
    expect(enforcing.get("ServiceAccount", "w", "ml")?.metadata?.labels).toEqual({ a: "b" });
  });

  it("follows RBAC changes at once, and treats a request without token as anonymous", async () => {
    const role = enforcing.get("ClusterRole", "ctl")!;
    enforcing.put({
      ...role,
      rules: [
        ...(role.rules as object[]),
        { apiGroups: [""], resources: ["namespaces"], verbs: ["get"] },
      ],
    });
    expect((await as("GET", "/api/v1/namespaces/ml")).status).toBe(200);
    const anonymous = await call("GET", "/api/v1/namespaces/ml", undefined, undefined, enforcing);
    expect(anonymous.status).toBe(403);
    expect(anonymous.json.message).toContain('User "system:anonymous"');
    const wrong = await call("GET", "/api/v1/namespaces", undefined, undefined, enforcing, "x");
    expect(wrong.status).toBe(401);
  });
});
