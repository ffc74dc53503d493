// A private registry on a real API server: the module built with images.credentialsSecrets reads
// the named docker config Secret from its own namespace under exactly the Role the build adds (the
// real RBAC decides), answers the registry's Bearer challenge with those credentials, and fixes
// the pod to its image's own user. Without the Secret the image is unknown, and the pod is told.
import type { V1PodSpec } from "@kubernetes/client-node";
import { stringify } from "yaml";
import type { KubeObject } from "../../lib/objects/pod";
import { TestRegistry } from "../support/registry";
import { eventually } from "../support/wait";
import { applyObjects, connect, kubectl, namespace, useModule } from "./support/cluster";
import { buildVariant } from "./support/variant-build";

const NS = "private-images";
const registry = new TestRegistry();
const cluster = connect();
const BUILD = { ADMISSION_GUARD_IMAGES_CREDENTIALS_SECRETS: "regcred" };
const guard = useModule(cluster);

const pod = (name: string): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: NS },
  spec: { containers: [{ name: "train", image: `${registry.host}/team/train:1` }] },
});
const b64 = (s: string) => Buffer.from(s).toString("base64");

beforeAll(async () => {
  await registry.start();
  registry.bearer = { token: "t0k3n", basic: { username: "robot", password: "s3cret" } };
  registry.putImage("team/train", "1", { User: "1001:1001", WorkingDir: "/app" });
  const dist = await buildVariant("image-credentials", BUILD);
  await applyObjects(cluster, [namespace(NS)]);
  await guard.install({
    dist,
    env: {
      ...BUILD,
      ADMISSION_GUARD_IMAGES_INSPECT: "true",
      ADMISSION_GUARD_IMAGES_PLAIN_HTTP: registry.host,
    },
  });
}, 240_000);
afterAll(() => registry.stop());

test("the build's Role grants get on exactly the named Secret, in the module's namespace", async () => {
  const role = await cluster.admin.get(
    `/apis/rbac.authorization.k8s.io/v1/namespaces/pepr-system/roles/${guard.module!.manifest.serviceAccount.name}-image-credentials`,
  );
  expect(role.status).toBe(200);
  expect(role.body.rules).toEqual([
    { apiGroups: [""], resources: ["secrets"], resourceNames: ["regcred"], verbs: ["get"] },
  ]);
  const can = async (verb: string, name: string) =>
    (
      await kubectl(cluster, [
        "auth",
        "can-i",
        verb,
        `secret/${name}`,
        "-n",
        "pepr-system",
        `--as=system:serviceaccount:pepr-system:${guard.module!.manifest.serviceAccount.name}`,
      ])
    ).stdout.trim();
  expect(await can("get", "regcred")).toBe("yes");
  expect(await can("get", "other")).toBe("no");
  expect(await can("list", "regcred")).toBe("no");
});

test("without the Secret the private image is unknown: the pod gets the configured UID and is told", async () => {
  const result = await kubectl(cluster, ["apply", "-f", "-"], stringify(pod("before-secret")));
  expect(result.code).toBe(0);
  // The user is told a generic reason (issue 26: no registry text echoed); the log has the detail.
  expect(result.stderr).toContain("was not inspected (the registry could not be read)");
  expect(guard.module!.controller.logs()).toContain("the token service answered HTTP 401");
  const spec = (await cluster.admin.get(`/api/v1/namespaces/${NS}/pods/before-secret`)).body
    .spec as V1PodSpec;
  expect(spec.securityContext?.runAsUser).toBe(1000);
});

test("with the Secret the controller reads the image through the registry's Bearer challenge and keeps its user", async () => {
  await applyObjects(cluster, [
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "regcred", namespace: "pepr-system" },
      type: "kubernetes.io/dockerconfigjson",
      data: {
        ".dockerconfigjson": b64(
          JSON.stringify({ auths: { [registry.host]: { auth: b64("robot:s3cret") } } }),
        ),
      },
    },
  ]);
  // The controller reads the Secret at start and every few minutes: restart it to read it now.
  await guard.module!.stopController();
  await guard.module!.startController();
  const stored = await eventually(async () => {
    await cluster.admin.delete(`/api/v1/namespaces/${NS}/pods/with-secret`);
    const result = await kubectl(cluster, ["apply", "-f", "-"], stringify(pod("with-secret")));
    if (result.code !== 0) throw new Error(result.stderr);
    const spec = (await cluster.admin.get(`/api/v1/namespaces/${NS}/pods/with-secret`)).body
      .spec as V1PodSpec;
    if (spec.securityContext?.runAsUser !== 1001)
      throw new Error(`runAsUser ${spec.securityContext?.runAsUser}: ${result.stderr}`);
    return spec;
  }, 45_000); // past the 30 s a failed lookup is remembered, should the first pod beat the read
  expect(stored.securityContext).toMatchObject({ runAsUser: 1001, runAsGroup: 1001 });
  expect(registry.requests.some(r => r.authorization === "Bearer t0k3n")).toBe(true);
});
