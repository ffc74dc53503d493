// Why the watcher pods carry the controller's cloud identity too (scripts/overlay/cloud-identity.ts,
// docs/deploy.md "Cloud registries"): the watcher (the built bundle with PEPR_WATCH_MODE=true)
// judges the stored objects for the reports with the same rules, which read the images they fix
// with the same cloud credentials. Against a loopback registry that demands GKE-style credentials
// and a loopback metadata server: without the identity, the report would not say what admission says.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { PolicyReport } from "../../lib/reports/policy-report";
import { startWatcher, type Controller } from "../support/controller";
import { startStandIn, type StandInApi } from "../support/stand-in-api";
import { TestRegistry } from "../support/registry";
import { eventually } from "../support/wait";

const NS = "ml-team";
const registry = new TestRegistry();
let metadata: Server;
let metadataCalls = 0;
let api: StandInApi;
let watcher: Controller;

beforeAll(async () => {
  await registry.start();
  // Pulled only with the token the metadata server hands out.
  registry.bearer = { token: "t0k", basic: { username: "oauth2accesstoken", password: "ya29.x" } };
  registry.putImage("private/trainer", "1", { WorkingDir: "/workspace" }); // built for root
  metadata = createServer((req, res) => {
    metadataCalls++;
    res.writeHead(200, { "content-type": "application/json", "metadata-flavor": "Google" });
    res.end(JSON.stringify({ access_token: "ya29.x", expires_in: 3600, token_type: "Bearer" }));
  });
  await new Promise<void>(ok => metadata.listen(0, "127.0.0.1", ok));
  const endpoint = `http://127.0.0.1:${(metadata.address() as AddressInfo).port}`;
  api = await startStandIn({
    objects: [{ apiVersion: "v1", kind: "Namespace", metadata: { name: NS } }],
  });
  watcher = await startWatcher({
    api,
    imagesOff: false,
    env: {
      ADMISSION_GUARD_REPORTS_INTERVAL_SECONDS: "1",
      ADMISSION_GUARD_IMAGES_INSPECT: "true",
      ADMISSION_GUARD_IMAGES_PLAIN_HTTP: registry.host,
      ADMISSION_GUARD_IMAGES_CLOUD_CREDENTIALS: JSON.stringify([
        { provider: "gcp", registries: [registry.host], metadataEndpoint: endpoint },
      ]),
      // A root-built image is a failure of its own: the report shows the image was read.
      ADMISSION_GUARD_SECURITY_CONTEXT_ROOT_IMAGES: "deny",
    },
  });
}, 60_000);
afterAll(async () => {
  await watcher?.stop();
  await api?.stop();
  await registry.stop();
  await new Promise(ok => metadata?.close(ok));
});

test("the watcher reads a private image with the cloud identity's token: the report names its user, as admission would", async () => {
  // The token is asked for at start; the object comes once it was.
  await eventually(() => {
    if (!metadataCalls) throw new Error("the metadata server was not asked yet");
  }, 20_000);
  api.put({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "train", namespace: NS },
    spec: {
      selector: { matchLabels: { app: "train" } },
      template: {
        metadata: { labels: { app: "train" } },
        spec: { containers: [{ name: "t", image: `${registry.host}/private/trainer:1` }] },
      },
    },
  });
  const result = await eventually(() => {
    const report = api.get("PolicyReport", "admission-guard", NS) as unknown as
      | PolicyReport
      | undefined;
    const found = report?.results.find(
      r => r.resources[0].name === "train" && r.rule === "image-user",
    );
    if (!found) throw new Error("no image-user result for the Deployment yet");
    return found;
  }, 20_000);
  expect(result.result).toBe("fail");
  expect(result.message).toContain("is built to run as root");
  expect(metadataCalls).toBeGreaterThan(0);
  const manifests = registry.requests.filter(q => q.path.includes("/manifests/"));
  expect(manifests.at(-1)?.authorization).toBe("Bearer t0k");
});
