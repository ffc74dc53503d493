// `check --inspect-images` with images.cloudCredentials (cli/check.ts): the same tokens as the
// controller, from its own env and endpoints, waited for before judging; one it cannot get makes the
// registry's images "not inspected" after a warning on stderr. In-process, against a loopback
// registry that demands GKE-style credentials and a loopback metadata server.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { policies } from "../../../../capabilities/index";
import { TestRegistry } from "../../../support/registry";
import { run, tempTree } from "../../cli/check-helpers";

let registry: TestRegistry;
let metadata: Server;
let metadataHost: string;
let metadataCalls = 0;

beforeEach(async () => {
  registry = new TestRegistry();
  await registry.start();
  registry.bearer = { token: "t0k", basic: { username: "oauth2accesstoken", password: "ya29.x" } };
  registry.putImage("private/app", "1", { User: "1234" });
  metadataCalls = 0;
  metadata = createServer((req, res) => {
    metadataCalls++;
    // Late on purpose: check must wait for the token before it reads the image.
    setTimeout(() => {
      res.writeHead(200, { "content-type": "application/json", "metadata-flavor": "Google" });
      res.end(JSON.stringify({ access_token: "ya29.x", expires_in: 3600, token_type: "Bearer" }));
    }, 500);
  });
  await new Promise<void>(ok => metadata.listen(0, "127.0.0.1", ok));
  metadataHost = `127.0.0.1:${(metadata.address() as AddressInfo).port}`;
});
afterEach(async () => {
  await registry.stop();
  await new Promise(ok => metadata.close(ok));
});

const pod = () =>
  [
    "apiVersion: v1",
    "kind: Pod",
    "metadata: { name: p, namespace: team }",
    "spec:",
    "  containers:",
    `    - { name: app, image: "${registry.host}/private/app:1" }`,
    "",
  ].join("\n");
const settings = (endpoint: string) =>
  JSON.stringify({
    images: {
      inspect: true,
      plainHttp: [registry.host],
      cloudCredentials: [
        { provider: "gcp", registries: [registry.host], metadataEndpoint: `http://${endpoint}` },
      ],
    },
  });

describe("check --inspect-images with images.cloudCredentials", () => {
  it("waits for the token from the metadata server and reads the private image with it", async () => {
    const dir = tempTree({ "pod.yaml": pod(), "settings.json": settings(metadataHost) });
    const r = await run(
      ["check", "-o", "json", "--inspect-images", "--settings", "settings.json", "pod.yaml"],
      { cwd: dir, policies },
    );
    expect(metadataCalls).toBe(1);
    const manifest = registry.requests.filter(q => q.path.includes("/manifests/"));
    expect(manifest.at(-1)?.authorization).toBe("Bearer t0k");
    expect(r.stdout).toContain("1234");
    expect(r.stdout).not.toContain("was not inspected");
  });

  it("says why on stderr, and the image is 'not inspected', when the token cannot be had", async () => {
    const closed = "127.0.0.1:1";
    const dir = tempTree({ "pod.yaml": pod(), "settings.json": settings(closed) });
    const r = await run(
      ["check", "-o", "json", "--inspect-images", "--settings", "settings.json", "pod.yaml"],
      { cwd: dir, policies },
    );
    expect(r.stderr).toContain(
      `images.cloudCredentials: the gcp credentials for ${registry.host} could not be obtained`,
    );
    expect(r.stdout).toContain(
      "the module's cloud credentials for this registry could not be obtained",
    );
    expect(registry.requests.some(q => q.authorization?.startsWith("Bearer"))).toBe(false);
  });
});
