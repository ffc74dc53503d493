// The cloud credentials' own egress policy (lib/images/egress.ts credentialEgressPolicy): exactly
// the configured endpoints, the metadata address included, and nothing else; image lookups' policy
// never lists them, so a pod author's image naming an endpoint is refused. Through real sockets.
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  credentialEgressPolicy,
  egressPolicyOf,
  guardedTransport,
  refusal,
} from "../../../../lib/images/egress";
import { CloudCredentials } from "../../../../lib/images/cloud/store";
import { fetchGcp } from "../../../../lib/images/cloud/gcp";
import { CloudCredentialEntry, type GcpEntry } from "../../../../lib/images/cloud/settings";
import { fetchImageConfig, REASONS } from "../../../../lib/images/registry-client";
import { parseImage } from "../../../../lib/objects/image-reference";
import { parseSettings } from "../../../../lib/settings";
import { eventually } from "../../../support/wait";

let server: Server;
let host: string;
const received: {
  method?: string;
  url?: string;
  headers: IncomingMessage["headers"];
  body: string;
}[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", c => (body += c));
    req.on("end", () => {
      received.push({ method: req.method, url: req.url, headers: req.headers, body });
      res.writeHead(200, { "content-type": "application/json", "metadata-flavor": "Google" });
      res.end(JSON.stringify({ access_token: "ya29", expires_in: 3600, token_type: "Bearer" }));
    });
  });
  await new Promise<void>(ok => server.listen(0, "127.0.0.1", ok));
  host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise(ok => server.close(ok)));
beforeEach(() => received.splice(0));

describe("credentialEgressPolicy", () => {
  const policy = credentialEgressPolicy([
    "http://169.254.169.254",
    "https://sts.us-east-1.amazonaws.com",
    "https://myreg.azurecr.io",
  ]);

  it("reaches the endpoints, the metadata address over plain HTTP because its URL is http", () => {
    expect(refusal(new URL("http://169.254.169.254/computeMetadata/v1/x"), policy)).toBeUndefined();
    expect(refusal(new URL("https://sts.us-east-1.amazonaws.com/"), policy)).toBeUndefined();
    expect(refusal(new URL("https://myreg.azurecr.io/oauth2/exchange"), policy)).toBeUndefined();
  });

  it("reaches nothing else: no other public host, no plain HTTP to an https endpoint", () => {
    expect(refusal(new URL("https://example.com/"), policy)).toBe(
      "example.com is not a configured credential endpoint",
    );
    expect(refusal(new URL("https://other.azurecr.io/oauth2/exchange"), policy)).toBe(
      "other.azurecr.io is not a configured credential endpoint",
    );
    expect(refusal(new URL("http://sts.us-east-1.amazonaws.com/"), policy)).toMatch(/plain HTTP/);
    expect(refusal(new URL("http://169.254.169.254:8080/"), policy)).toBe(
      "169.254.169.254:8080 is not a configured credential endpoint",
    );
  });

  it("sends a POST body through real sockets to a listed endpoint, with its length, and refuses another port", async () => {
    const transport = guardedTransport(credentialEgressPolicy([`http://${host}`]));
    const res = await transport(`http://${host}/token`, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: "a=1&b=%C3%A9",
    });
    expect(res.status).toBe(200);
    await res.body?.cancel();
    expect(received).toEqual([
      expect.objectContaining({ method: "POST", url: "/token", body: "a=1&b=%C3%A9" }),
    ]);
    expect(received[0].headers["content-length"]).toBe("12");
    await expect(transport("http://127.0.0.1:1/", {})).rejects.toThrow(
      "127.0.0.1:1 is not a configured credential endpoint",
    );
  });
});

describe("the store's own transport", () => {
  it("reaches the configured metadata endpoint on loopback with no injected transport", async () => {
    const credentials = new CloudCredentials(
      parseSettings({
        images: {
          cloudCredentials: [
            {
              provider: "gcp",
              registries: ["*-docker.pkg.dev"],
              metadataEndpoint: `http://${host}`,
            },
          ],
        },
      }).images.cloudCredentials,
      { env: {} },
    );
    credentials.start();
    await credentials.ready(5000);
    credentials.stop();
    expect(credentials.get("eu-docker.pkg.dev")).toMatchObject({ password: "ya29" });
    expect(received[0].url).toBe("/computeMetadata/v1/instance/service-accounts/default/token");
  });
});

describe("a credential endpoint that drips its answer", () => {
  it("is given up at the fetch's deadline, its socket closed", async () => {
    let closed = false;
    const drip = createServer((req, res) => {
      res.writeHead(200, { "content-type": "application/json", "metadata-flavor": "Google" });
      res.write("{");
      const timer = setInterval(() => res.write(" "), 20);
      res.on("close", () => {
        closed = true;
        clearInterval(timer);
      });
    });
    await new Promise<void>(ok => drip.listen(0, "127.0.0.1", ok));
    const endpoint = `http://127.0.0.1:${(drip.address() as AddressInfo).port}`;
    try {
      const entry = CloudCredentialEntry.parse({
        provider: "gcp",
        registries: ["*-docker.pkg.dev"],
        metadataEndpoint: endpoint,
      }) as GcpEntry;
      await expect(
        fetchGcp(entry, {
          transport: guardedTransport(credentialEgressPolicy([endpoint])),
          signal: AbortSignal.timeout(300),
          env: {},
          plainHttp: new Set(),
          now: Date.now,
        }),
      ).rejects.toThrow("the GKE metadata server did not answer in time");
      await eventually(() => expect(closed).toBe(true));
    } finally {
      drip.closeAllConnections();
      await new Promise(ok => drip.close(ok));
    }
  });
});

describe("image lookups' policy", () => {
  const settings = parseSettings({
    images: {
      cloudCredentials: [
        { provider: "gcp", registries: ["*-docker.pkg.dev"] },
        { provider: "ecr", registries: ["*.dkr.ecr.us-east-1.amazonaws.com"], region: "us-east-1" },
      ],
    },
  });

  it("never lists a credential endpoint or the metadata address", () => {
    const policy = egressPolicyOf(settings);
    expect(policy.onlyListed).toBeUndefined();
    expect([...policy.listed]).toEqual([]);
    expect(refusal(new URL("https://169.254.169.254/v2/"), policy)).toBe(
      "169.254.169.254 is an address the egress policy refuses",
    );
    expect(refusal(new URL("http://169.254.169.254/v2/"), policy)).toMatch(/plain HTTP/);
  });

  it("refuses a pod author's image naming a credential endpoint (loopback here, link-local in a cloud)", async () => {
    const parsed = parseImage(`${host}/computemetadata/v1:latest`);
    if (!parsed.ok) throw new Error(parsed.reason);
    const result = await fetchImageConfig(
      parsed.ref,
      { os: "linux", architecture: "amd64" },
      {
        plainHttp: new Set(),
        egress: egressPolicyOf(settings),
        signal: AbortSignal.timeout(5000),
      },
    );
    expect(result).toMatchObject({ ok: false, reason: REASONS.egress });
    expect(received).toEqual([]);
  });
});
