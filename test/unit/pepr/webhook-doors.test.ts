// The webhook port's doors unit by unit (issue 40): which requests the parser reads, the budget of
// body bytes, the bounds of the server Pepr makes. Through the built controller:
// test/e2e/hostile-flood.test.ts.
import https from "node:https";
import { request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createRequire } from "node:module";
import {
  boundWebhookServer,
  installPathBeforeBody,
  isReview,
  MAX_CONNECTIONS,
  serverBounds,
} from "../../../lib/pepr/webhook-doors";

// The express Pepr loads, as the module finds it.
const express = createRequire(require.resolve("pepr"))("express");

describe("isReview: what reaches the JSON parser", () => {
  const req = (method: string, path: string) => ({ method, path, headers: {} });
  it.each([
    ["POST", "/mutate/secret", true],
    ["POST", "/validate/secret", true],
    // As express routes Pepr's /mutate/:path: any case, a trailing slash, the segment decoded.
    ["POST", "/MUTATE/secret/", true],
    ["POST", "/validate/%73ecret", true],
    ["POST", "/validate/Secret", false],
    ["POST", "/validate/secret/more", false],
    ["POST", "/validate/not-it", false],
    ["POST", "/validate/%E0%A4%A", false],
    ["POST", "/validate/", false],
    ["POST", "/healthz", false],
    ["GET", "/validate/secret", false],
    ["PUT", "/mutate/secret", false],
  ])("%s %s → %s", (method, path, expected) => {
    expect(isReview(req(method, path), "secret")).toBe(expected);
  });

  it("nothing is a review without an API path (the watcher)", () => {
    expect(isReview(req("POST", "/mutate/undefined"), undefined)).toBe(false);
  });
});

describe("serverBounds: Pepr ≥ 1.1.6's variables and defaults", () => {
  it("defaults: keep-alive 90 s, headers 32 s, the whole request 64 s (above the webhook's 30 s, below Node's 300 s)", () => {
    expect(serverBounds({})).toEqual({
      keepAliveTimeout: 90_000,
      headersTimeout: 32_000,
      requestTimeout: 64_000,
      handshakeTimeout: 32_000,
      connectionsCheckingInterval: 1000,
      maxConnections: MAX_CONNECTIONS,
    });
  });

  it("PEPR_KEEP_ALIVE_TIMEOUT_MS and PEPR_HEADERS_TIMEOUT_MS set them; nonsense is ignored", () => {
    const bounds = serverBounds({
      PEPR_KEEP_ALIVE_TIMEOUT_MS: "5000",
      PEPR_HEADERS_TIMEOUT_MS: "400",
    });
    expect(bounds).toMatchObject({
      keepAliveTimeout: 5000,
      headersTimeout: 400,
      requestTimeout: 800,
      connectionsCheckingInterval: 400,
    });
    expect(serverBounds({ PEPR_HEADERS_TIMEOUT_MS: "-1" }).headersTimeout).toBe(32_000);
    expect(serverBounds({ PEPR_KEEP_ALIVE_TIMEOUT_MS: "soon" }).keepAliveTimeout).toBe(90_000);
  });
});

describe("boundWebhookServer: the server Pepr makes", () => {
  it("an express app's HTTPS server gets the bounds, idempotently; any other server is left as made", () => {
    const made = https.createServer;
    try {
      expect(boundWebhookServer({ ...serverBounds({}), maxConnections: 7 })).toBe(true);
      expect(boundWebhookServer()).toBe(true);
      const pepr = https.createServer({}, express());
      expect(pepr.maxConnections).toBe(7);
      expect(pepr.keepAliveTimeout).toBe(90_000);
      expect(pepr.headersTimeout).toBe(32_000);
      expect(pepr.requestTimeout).toBe(64_000);
      const other = https.createServer({}, () => undefined);
      expect(other.maxConnections).not.toBe(7);
      expect(other.requestTimeout).toBe(300_000); // Node's
    } finally {
      https.createServer = made;
    }
  });
});

describe("installPathBeforeBody: the budget of body bytes", () => {
  let server: Server;
  let port: number;
  const bodies: string[] = [];

  beforeAll(async () => {
    expect(installPathBeforeBody("secret", 1000)).toBe(true);
    expect(installPathBeforeBody("secret", 1000)).toBe(true); // a second install changes nothing
    const app = express();
    app.use(express.json({ limit: "8mb" }));
    app.post("/validate/:path", (req: { body: unknown }, res: { json(v: unknown): void }) => {
      bodies.push(JSON.stringify(req.body));
      res.json({ ok: true });
    });
    app.post(
      "/elsewhere",
      (req: { body: unknown }, res: { status(n: number): { end(): void } }) => {
        bodies.push(String(req.body));
        res.status(401).end();
      },
    );
    server = app.listen(0);
    await new Promise(ok => server.once("listening", ok));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => server.close());

  /** Sends headers declaring `length`, then `body` (all of it when `finish`). */
  function send(path: string, length: number, body: string, finish: boolean) {
    let status = 0;
    let text = "";
    const req = request({
      port,
      host: "127.0.0.1",
      method: "POST",
      path,
      headers: { "content-type": "application/json", "content-length": String(length) },
    });
    const answered = new Promise<{ status: number; text: string; connection?: string }>(ok =>
      req.on("response", res => {
        status = res.statusCode ?? 0;
        res.on("data", c => (text += c));
        res.on("end", () => ok({ status, text, connection: res.headers.connection }));
      }),
    );
    req.on("error", () => undefined);
    req.write(body);
    if (finish) req.end();
    return { req, answered };
  }

  it("past the budget a review is refused at once, unread, with a Status; freed once the first is answered", async () => {
    // The first reserves 800 of the 1000 bytes and is held half-sent.
    const reserved = new Promise(ok => server.once("request", () => setImmediate(ok)));
    const held = send("/validate/secret", 800, '{"a":"', false);
    await reserved;
    const refused = await send("/validate/secret", 300, "", false).answered;
    expect(refused.status).toBe(429);
    expect(refused.connection).toBe("close");
    expect(JSON.parse(refused.text)).toMatchObject({ kind: "Status", code: 429 });
    expect(JSON.parse(refused.text).message).toMatch(
      /^admission-guard\/webhook\/body-budget: 0\.0 MiB of reviews .* Fix: /,
    );
    held.req.end(`${"x".repeat(800 - 8)}"}`);
    expect((await held.answered).status).toBe(200);
    // Its bytes are back: the same review now passes.
    const body = JSON.stringify({ b: "y".repeat(280) });
    expect((await send("/validate/secret", body.length, body, true).answered).status).toBe(200);
  });

  it("a request off the API path goes on unread, its connection closed after the answer", async () => {
    const before = bodies.length;
    const answer = await send("/elsewhere", 20, '{"not":"parsed"}    ', true).answered;
    expect(answer.status).toBe(401);
    expect(answer.connection).toBe("close");
    expect(bodies.slice(before)).toEqual(["undefined"]);
  });
});
