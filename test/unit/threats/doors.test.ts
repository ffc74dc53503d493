// The operational doors, unit by unit (threat model, issue 26): the drain answers a loopback peer
// only (the preStop hook's exec), and a repeat drain holds no socket. The e2e side (the built controller, the shipped
// hook) is test/e2e/hostile-doors.test.ts.
import { Agent, request } from "node:http";
import type { AddressInfo } from "node:net";
import { createRequire } from "node:module";
import {
  DRAIN_PATH,
  installGracefulDrain,
  isLoopbackPeer,
} from "../../../lib/pepr/webhook-body-limit";

// The express Pepr loads, as the module finds it.
const express = createRequire(require.resolve("pepr"))("express");

describe("isLoopbackPeer: the drain's one gate", () => {
  it.each([
    ["127.0.0.1", true],
    ["127.255.3.4", true],
    ["::1", true],
    ["::ffff:127.0.0.1", true],
    ["::FFFF:127.0.0.9", true],
    // Another pod, a node, the API server, a Service VIP: never.
    ["10.244.1.7", false],
    ["192.168.0.1", false],
    ["::ffff:10.0.0.1", false],
    ["fd00::1", false],
    ["::", false],
    ["0.0.0.0", false],
    ["128.0.0.1", false],
    ["127.0.0.1.evil", false],
    ["", false],
    [undefined, false],
  ])("%s → %s", (address, expected) => {
    expect(isLoopbackPeer(address)).toBe(expected);
  });
});

describe("the drain, from a peer that is not loopback and from one that is", () => {
  /** One request on a fresh connection, appearing to come from `peer`. */
  const call = (port: number, method: string, path: string, peer: string) =>
    new Promise<{ status: number; connection?: string; ms: number }>((ok, fail) => {
      const started = Date.now();
      // A connection of its own, kept alive as the API server's are.
      const agent = new Agent({ keepAlive: true });
      const req = request(
        {
          port,
          host: "127.0.0.1",
          method,
          path,
          agent,
          headers: { "content-type": "application/json", "x-test-peer": peer },
        },
        res => {
          res.resume();
          res.on("end", () => {
            agent.destroy();
            ok({
              status: res.statusCode ?? 0,
              connection: res.headers.connection,
              ms: Date.now() - started,
            });
          });
        },
      );
      req.on("error", fail);
      req.end(method === "POST" ? "{}" : undefined);
    });

  it("another pod's GET is an unknown path (404) and changes nothing; the hook's drains; a repeat answers at once", async () => {
    expect(installGracefulDrain(1500)).toBe(true);
    const app = express();
    // The test's stand-in for where a connection comes from (the server only sees loopback here).
    app.use(
      (
        req: { headers: Record<string, string>; socket: object },
        _res: unknown,
        next: () => void,
      ) => {
        Object.defineProperty(req.socket, "remoteAddress", {
          value: req.headers["x-test-peer"],
          configurable: true,
        });
        next();
      },
    );
    app.use(express.json({ limit: "2mb" }));
    app.post("/validate/x", (_req: unknown, res: { json(v: unknown): void }) =>
      res.json({ ok: true }),
    );
    const server = app.listen(0);
    await new Promise(ok => server.once("listening", ok));
    const port = (server.address() as AddressInfo).port;
    try {
      for (const peer of ["10.244.1.7", "::ffff:10.0.0.1", "fd00::1"]) {
        const drain = await call(port, "GET", DRAIN_PATH, peer);
        expect(drain.status).toBe(404);
        expect(drain.ms).toBeLessThan(1000); // answered, not held
      }
      // Not draining: answers keep their connections.
      const after = await call(port, "POST", "/validate/x", "10.244.1.7");
      expect(after.status).toBe(200);
      expect(after.connection).not.toBe("close");

      // The preStop hook, from inside the pod.
      const drained = call(port, "GET", DRAIN_PATH, "127.0.0.1");
      await new Promise(r => setTimeout(r, 50));
      expect(await call(port, "POST", "/validate/x", "10.244.1.7")).toMatchObject({
        status: 200,
        connection: "close",
      });
      // A repeat, even from loopback, holds nothing: at once, with no second wait.
      const repeat = await call(port, "GET", DRAIN_PATH, "::1");
      expect(repeat).toMatchObject({ status: 200, connection: "close" });
      expect(repeat.ms).toBeLessThan(1000);
      const first = await drained;
      expect(first.status).toBe(200);
      expect(first.ms).toBeGreaterThanOrEqual(1400);
    } finally {
      server.close();
    }
  });
});
