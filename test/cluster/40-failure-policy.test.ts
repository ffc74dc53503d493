// What happens when the controller is down, as configured by `pepr build` and armed by the
// controller: the webhooks are installed failing open (onError: audit → failurePolicy Ignore, so
// an install whose controller never starts locks no one out) and the admission controller sets
// them to Fail once it answers (lib/webhooks). Then pods of selected namespaces are refused while
// it is down, kube-system keeps working (the namespaceSelector leaves it out), and the module
// recovers when the controller is back.
import { stringify } from "yaml";
import type { KubeObject } from "../../lib/objects/pod";
import { eventually } from "../support/wait";
import { applyObjects, connect, kubectl, namespace, useModule } from "./support/cluster";
import { KubeClient, pathOf } from "./support/kube-client";

const cluster = connect();
const guard = useModule(cluster);
const NS = "failure-policy";

const pod = (name: string, ns: string): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: ns },
  spec: { containers: [{ name: "main", image: "busybox:1.36", command: ["sleep", "3600"] }] },
});
const create = (obj: KubeObject) => kubectl(cluster, ["create", "-f", "-"], stringify(obj));

beforeAll(async () => {
  await applyObjects(cluster, [namespace(NS)]);
  await guard.install();
}, 60_000);

test("the generated webhooks are installed failing open", () => {
  for (const config of guard.module!.manifest.webhookConfigurations)
    for (const w of config.webhooks as { failurePolicy: string }[])
      expect([config.kind, w.failurePolicy]).toEqual([config.kind, "Ignore"]);
});

test("armed by the running controller, they fail closed and leave the system namespaces out", async () => {
  for (const kind of ["mutating", "validating"]) {
    const res = await cluster.admin.get(
      `/apis/admissionregistration.k8s.io/v1/${kind}webhookconfigurations`,
    );
    const webhooks = (res.body.items as KubeObject[]).flatMap(
      c =>
        c.webhooks as {
          failurePolicy: string;
          namespaceSelector: unknown;
          timeoutSeconds: number;
        }[],
    );
    expect(webhooks.length).toBeGreaterThan(0);
    for (const w of webhooks) {
      expect(w.failurePolicy).toBe("Fail");
      expect(w.timeoutSeconds).toBe(10);
      expect(JSON.stringify(w.namespaceSelector)).toContain('"kube-system"');
    }
  }
});

test("the module's own ServiceAccount may change its webhooks' failurePolicy, nothing else (ValidatingAdmissionPolicy)", async () => {
  const { namespace: ns, name } = guard.module!.manifest.serviceAccount;
  const token = await cluster.admin.create(
    `/api/v1/namespaces/${ns}/serviceaccounts/${name}/token`,
    {
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenRequest",
      spec: { expirationSeconds: 600 },
    },
  );
  const asModule = new KubeClient(cluster.admin.server, cluster.caPem, {
    token: (token.body.status as { token: string }).token,
  });
  try {
    for (const config of guard.module!.manifest.webhookConfigurations) {
      const path = pathOf(config);
      const stored = (await asModule.get(path)).body;
      const webhooks = stored.webhooks as {
        rules: { resources: string[] }[];
        failurePolicy: string;
      }[];
      const patch = (ops: object[]) =>
        asModule.raw("PATCH", path, ops, "application/json-patch+json");
      // Widening what it receives (every Secret written): refused, naming the rule.
      const widened = await patch([
        { op: "add", path: "/webhooks/0/rules/0/resources/-", value: "secrets" },
      ]);
      expect(widened.status).toBe(403);
      expect(widened.text).toContain("may change only its webhooks' failurePolicy");
      // Its failure policy (what arming writes): allowed, and set back as it was.
      for (const policy of ["Ignore", webhooks[0].failurePolicy]) {
        const set = await patch([
          { op: "replace", path: "/webhooks/0/failurePolicy", value: policy },
        ]);
        expect([set.status, set.text.slice(0, 300)]).toEqual([200, expect.any(String)]);
      }
      expect(webhooks[0].rules[0].resources).not.toContain("secrets");
    }
  } finally {
    asModule.close();
  }
});

test("with the controller up, a pod is admitted and fixed", async () => {
  const result = await eventually(async () => {
    const r = await create(pod("before", NS));
    if (r.code !== 0) throw new Error(r.stderr);
    return r;
  }, 20_000);
  expect(result.stderr).toContain("admission-guard/security-context: fixed");
});

test("with the controller down, pods of selected namespaces are refused; kube-system still works", async () => {
  await guard.module!.stopController();
  const refused = await create(pod("while-down", NS));
  expect(refused.code).toBe(1);
  expect(refused.stderr).toMatch(/failed calling webhook "pepr-[0-9a-f-]+\.pepr\.dev"/);
  expect(refused.stderr).toContain("connect: connection refused");
  expect((await cluster.admin.get(`/api/v1/namespaces/${NS}/pods/while-down`)).status).toBe(404);

  const system = await create(pod("while-down", "kube-system"));
  expect(system.stderr).toBe("");
  expect(system.code).toBe(0);
  await kubectl(cluster, ["delete", "pod", "while-down", "-n", "kube-system", "--wait=false"]);
});

test("restarted, it recovers: the next pod is admitted and fixed", async () => {
  await guard.module!.startController();
  const result = await eventually(async () => {
    const r = await create(pod("after-restart", NS));
    if (r.code !== 0) throw new Error(r.stderr);
    return r;
  }, 20_000);
  expect(result.stderr).toContain("admission-guard/security-context: fixed");
  const stored = (await cluster.admin.get(`/api/v1/namespaces/${NS}/pods/after-restart`)).body;
  expect(stored.metadata?.annotations?.["admission-guard.dev/fixed"]).toContain(
    "security-context/",
  );
});
