// `npx pepr deploy` applies dist/pepr-module-<uuid>.yaml: on a clean control plane of the version
// we support, the API server accepts every object of it (server-side dry run: its own validation
// and admission, nothing stored).
import { moduleYamlPath } from "../support/module-rbac";
import { connect, kubectl } from "./support/cluster";

const cluster = connect();
afterAll(() => cluster.admin.close());

test("the API server is the real one, with the controller manager running", async () => {
  const version = await cluster.admin.get("/version");
  expect(version.status).toBe(200);
  expect(version.body).toMatchObject({ major: "1", minor: expect.stringMatching(/^32/) });
  // Made by the controller manager's ServiceAccount controller, not by us.
  const sa = await cluster.admin.get("/api/v1/namespaces/kube-system/serviceaccounts/default");
  expect(sa.status).toBe(200);
});

test("the deploy manifest is accepted by a server-side dry run on a clean control plane", async () => {
  const ns = await cluster.admin.get("/api/v1/namespaces/pepr-system");
  expect(ns.status).toBe(404); // clean: nothing of the module is installed yet

  // A dry run creates nothing, so the namespaced objects of a first dry run are refused with
  // `namespaces "pepr-system" not found`: the API server checks their namespace exists. What
  // `pepr deploy` does in effect: the Namespace first, then the rest, each checked by the server.
  const first = await kubectl(cluster, ["apply", "--dry-run=server", "-f", moduleYamlPath()]);
  expect(first.stdout).toContain("namespace/pepr-system created (server dry run)");
  expect(
    first.stderr
      .split("\n")
      .filter(Boolean)
      .every(l => l.includes('namespaces "pepr-system" not found')),
  ).toBe(true);

  expect(
    (await kubectl(cluster, ["create", "namespace", "pepr-system", "--save-config"])).code,
  ).toBe(0);
  const result = await kubectl(cluster, ["apply", "--dry-run=server", "-f", moduleYamlPath()]);
  expect(result.stderr).toBe("");
  expect(result.code).toBe(0);
  const lines = result.stdout.trim().split("\n");
  const kinds = [
    "clusterrole.rbac.authorization.k8s.io/pepr-",
    "clusterrolebinding.rbac.authorization.k8s.io/pepr-",
    "serviceaccount/pepr-",
    "secret/pepr-",
    "role.rbac.authorization.k8s.io/pepr-",
    "rolebinding.rbac.authorization.k8s.io/pepr-",
    "deployment.apps/pepr-",
    "service/pepr-",
    // scripts/overlay/entries.ts admission-disruption-budget: never both admission replicas down by a drain
    "poddisruptionbudget.policy/pepr-",
    "mutatingwebhookconfiguration.admissionregistration.k8s.io/pepr-",
    "validatingwebhookconfiguration.admissionregistration.k8s.io/pepr-",
    // scripts/overlay/entries.ts webhook-arming-guard: the module may change only its webhooks' failurePolicy
    "validatingadmissionpolicy.admissionregistration.k8s.io/pepr-",
    "validatingadmissionpolicybinding.admissionregistration.k8s.io/pepr-",
  ];
  for (const kind of kinds)
    expect(
      lines.filter(l => l.startsWith(kind) && l.endsWith("created (server dry run)")),
    ).not.toEqual([]);
  // Every line is one of these: no object of the manifest is left out of the check.
  expect(
    lines.filter(l => !kinds.some(k => l.startsWith(k)) && !l.startsWith("namespace/")),
  ).toEqual([]);
  // A dry run stores nothing.
  expect(
    (
      await cluster.admin.get(
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
      )
    ).body.items,
  ).toEqual([]);
});
