import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { request } from "node:http";
import {
  DRAIN_PATH,
  installGracefulDrain,
  installPlainAnswers,
  raiseWebhookBodyLimit,
  WEBHOOK_BODY_LIMIT,
} from "../../../lib/pepr/webhook-body-limit";
import { jsonBytes, withoutPeprAnnotations } from "../../../capabilities/payload-size/measure";

// Pepr's express, loaded the way the module loads it (Node's own require, as in the controller).
type Express = {
  (): { use(...a: unknown[]): void; post(p: string, h: unknown): void; listen(p: number): Server };
  json(options?: Record<string, unknown>): unknown;
};
type Server = import("node:http").Server;
const express = createRequire(require.resolve("pepr"))("express") as Express;

async function postSize(bytes: number): Promise<number> {
  return (await post(bytes)).status;
}

async function post(bytes: number): Promise<{ status: number; headers: Record<string, unknown> }> {
  const app = express();
  app.use(express.json({ limit: "2mb" })); // what Pepr's controller asks for
  app.post("/", (_req: unknown, res: { json(v: unknown): void }) => res.json({ ok: true }));
  const server = app.listen(0);
  await new Promise(ok => server.once("listening", ok));
  const body = JSON.stringify({ pad: "p".repeat(bytes) });
  try {
    return await new Promise((ok, fail) => {
      const req = request(
        {
          port: (server.address() as AddressInfo).port,
          host: "127.0.0.1",
          method: "POST",
          headers: { "content-type": "application/json" },
        },
        res => {
          res.resume();
          res.on("end", () => ok({ status: res.statusCode ?? 0, headers: res.headers }));
        },
      );
      req.on("error", fail);
      req.end(body);
    });
  } finally {
    server.close();
  }
}

describe("Pepr's webhook body limit", () => {
  it("is raised for the express instance Pepr uses, idempotently, above the API server's 3 MiB", async () => {
    expect(await postSize(2.5 * 1024 * 1024)).toBe(413); // Pepr's own 2mb
    expect(raiseWebhookBodyLimit()).toBe(true);
    expect(raiseWebhookBodyLimit()).toBe(true);
    expect(WEBHOOK_BODY_LIMIT).toBe("8mb");
    expect(await postSize(4.5 * 1024 * 1024)).toBe(200);
    expect(await postSize(9 * 1024 * 1024)).toBe(413);
  });
});

describe("Pepr's answers, plain", () => {
  it("carry no ETag (express would hash each answer) and no X-Powered-By once mended, idempotently", async () => {
    const before = await post(10);
    expect(before.headers.etag).toBeDefined(); // express's default: a weak ETag of every body
    expect(before.headers["x-powered-by"]).toBe("Express");
    expect(installPlainAnswers()).toBe(true);
    expect(installPlainAnswers()).toBe(true);
    const after = await post(10);
    expect(after.status).toBe(200);
    expect(after.headers.etag).toBeUndefined();
    expect(after.headers["x-powered-by"]).toBeUndefined();
  });
});

describe("the admission pods' graceful drain (preStop)", () => {
  /** One request's status and Connection header, on a fresh connection. */
  const call = (port: number, method: string, path: string) =>
    new Promise<{ status: number; connection?: string }>((ok, fail) => {
      const req = request(
        { port, host: "127.0.0.1", method, path, headers: { "content-type": "application/json" } },
        res => {
          res.resume();
          res.on("end", () =>
            ok({
              status: res.statusCode ?? 0,
              connection: res.headers.connection,
            }),
          );
        },
      );
      req.on("error", fail);
      req.end(method === "POST" ? "{}" : undefined);
    });

  it("answers as usual until the drain call; then every answer says Connection: close, and the drain call returns after the delay", async () => {
    expect(installGracefulDrain(2000)).toBe(true);
    expect(installGracefulDrain(2000)).toBe(true); // once, whatever the calls
    expect(raiseWebhookBodyLimit()).toBe(true); // both wraps together
    const app = express();
    app.use(express.json({ limit: "2mb" }));
    app.post("/validate/x", (_req: unknown, res: { json(v: unknown): void }) =>
      res.json({ ok: true }),
    );
    const server = app.listen(0);
    await new Promise(ok => server.once("listening", ok));
    const port = (server.address() as AddressInfo).port;
    try {
      const before = await call(port, "POST", "/validate/x");
      expect(before).toMatchObject({ status: 200 });
      expect(before.connection).not.toBe("close");
      let drainReturned = false;
      const drained = call(port, "GET", DRAIN_PATH).then(r => ((drainReturned = true), r));
      await new Promise(r => setTimeout(r, 50));
      expect(await call(port, "POST", "/validate/x")).toMatchObject({
        status: 200,
        connection: "close",
      });
      // Still draining: the hook (and so SIGTERM) waits while requests are answered.
      expect(drainReturned).toBe(false);
      expect((await drained).status).toBe(200);
    } finally {
      server.close();
    }
  });
});

describe("Pepr's own annotations are not counted", () => {
  it("drops <uuid>.pepr.dev/ keys and an emptied map, keeps everything else", () => {
    const pepr = "4473f691-a31f-4e7a-acc9-f7166d266bae.pepr.dev/payload-size";
    const only = { kind: "Pod", metadata: { name: "p", annotations: { [pepr]: "succeeded" } } };
    expect(withoutPeprAnnotations(only).metadata).toEqual({ name: "p" });
    expect(jsonBytes(withoutPeprAnnotations(only))).toBe(
      jsonBytes({ kind: "Pod", metadata: { name: "p" } }),
    );
    const mixed = { kind: "Pod", metadata: { annotations: { [pepr]: "x", "pepr.dev/user": "y" } } };
    expect(withoutPeprAnnotations(mixed).metadata?.annotations).toEqual({ "pepr.dev/user": "y" });
    expect(only.metadata.annotations[pepr]).toBe("succeeded"); // input unchanged
  });
});
