// The stand-in API on its own (no controller): what the harness promises other suites.
import { K8s, kind } from "kubernetes-fluent-client";
import { Agent, request } from "node:https";
import type { KubeObject } from "../../lib/pod";
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

function call(method: string, path: string, body?: unknown, contentType = "application/json") {
  return new Promise<{ status: number; json: KubeObject }>((ok, fail) => {
    const req = request(
      api.url + path,
      { method, agent, headers: { "Content-Type": contentType } },
      res => {
        let text = "";
        res.on("data", c => (text += c));
        res.on("end", () => ok({ status: res.statusCode ?? 0, json: JSON.parse(text) }));
      },
    );
    req.on("error", fail);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
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
