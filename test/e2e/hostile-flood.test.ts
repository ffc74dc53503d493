// Issue 40: what a caller without the secret API path (anyone who reaches the webhook port) can
// make the real built controller spend. Pepr 1.1.4 read and parsed every body before its 401; here
// the path comes first, bodies off it are never read, and slow callers are closed by the timeouts
// (set small through Pepr's own variables, so no test waits 32 s).
import { readFileSync } from "node:fs";
import type { KubeObject } from "../../lib/objects/pod";
import { podCreateReview } from "../support/admission";
import { useEnvironment } from "../support/environment";
import { openRaw, postHead, writeBody, type RawConnection } from "../support/raw-tls";
import { clusterObjects, DEMO_NS } from "./cases";

const HEADERS_TIMEOUT_MS = 1500;
const env = useEnvironment({
  objects: clusterObjects,
  env: {
    PEPR_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
    // The harness's keep-alive agent reads the server's hint and closes first (after 1 s).
    PEPR_KEEP_ALIVE_TIMEOUT_MS: "2000",
  },
});

const MiB = 1024 * 1024;

/** The controller's resident memory, MiB (VmRSS). */
const rssMiB = () => {
  const status = readFileSync(`/proc/${env.controller.pid}/status`, "utf8");
  return Number(/^VmRSS:\s+(\d+)/m.exec(status)![1]) / 1024;
};

const pod = (name: string): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: DEMO_NS },
  spec: { containers: [{ name: "app", image: "busybox:1.36" }] },
});

const open = () => openRaw(env.controller.port, env.api.certs.caPem);

describe("bodies on a wrong API path are never read", () => {
  it("48 connections holding half-sent 8 MiB bodies move the controller's memory by a few MiB, are each answered 401 and closed, and a real review answers meanwhile", async () => {
    // Warm: the first reviews and TLS handshakes allocate what every later one reuses.
    await env.controller.mutate(podCreateReview(pod("warm")));
    const before = rssMiB();
    const held = await Promise.all(Array.from({ length: 48 }, () => open()));
    try {
      await Promise.all(
        held.map(async raw => {
          raw.socket.write(postHead("/mutate/not-the-api-path", 8 * MiB));
          // The answer, if one comes before the body (it did not before issue 40)...
          await Promise.race([raw.answered, raw.closed, new Promise(r => setTimeout(r, 1000))]);
          // ...then half of the body, until the controller closes the connection: Pepr 1.1.4
          // buffered all of it (48 × 4 MiB) to parse it before its 401.
          return writeBody(raw, 4 * MiB);
        }),
      );
      const answer = await env.controller.mutate(podCreateReview(pod("while-held")));
      expect(answer.response?.allowed).toBe(true);
      expect(rssMiB() - before).toBeLessThan(16);
      await Promise.all(held.map(raw => raw.closed));
      for (const raw of held) {
        expect(raw.received()).toMatch(/^HTTP\/1\.1 401 /);
        expect(raw.received()).toMatch(/\r\nConnection: close\r\n/i);
      }
    } finally {
      for (const raw of held) raw.socket.destroy();
    }
  }, 60_000);

  it("a complete body that is not JSON gets the 401, not the parser's 400: it was not parsed", async () => {
    const res = await env.controller.post(
      "/validate/not-the-api-path",
      `{not json${" ".repeat(1024)}`,
    );
    expect(res.status).toBe(401);
  });

  it("a body over the 8 MiB limit on a wrong path is answered 401 before a byte of it is sent, and not read", async () => {
    const raw = await open();
    raw.socket.write(postHead("/validate/not-the-api-path", 9 * MiB));
    await Promise.race([raw.answered, raw.closed, new Promise(r => setTimeout(r, 1000))]);
    expect(raw.received()).toMatch(/^HTTP\/1\.1 401 /);
    expect(raw.received()).toMatch(/\r\nConnection: close\r\n/i);
    // The upload then stops where the controller closed the connection, far short of 9 MiB.
    let sent = 0;
    const chunk = Buffer.alloc(64 * 1024, "x");
    while (sent < 9 * MiB && !raw.socket.destroyed) {
      raw.socket.write(chunk);
      sent += chunk.length;
      await new Promise(r => setImmediate(r));
    }
    await raw.closed;
    expect(sent).toBeLessThan(9 * MiB);
  });

  it("GET /healthz and /metrics keep their kept-alive connection (no body, nothing to refuse)", async () => {
    for (const path of ["/healthz", "/metrics"]) {
      const raw = await open();
      raw.socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
      while (!/\r\n\r\n/.test(raw.received())) await new Promise(r => setTimeout(r, 20));
      expect(raw.received()).toMatch(/^HTTP\/1\.1 200 /);
      expect(raw.received()).toMatch(/\r\nConnection: keep-alive\r\n/i);
      raw.socket.destroy();
    }
  });
});

describe("reviews on the API path, within bounds", () => {
  it("a review declaring more than the 8 MiB limit is refused at once (413, a Status), unread", async () => {
    const raw = await open();
    raw.socket.write(postHead(`/validate/${env.controller.apiPath}`, 9 * MiB));
    await raw.closed; // no byte of the body was sent
    expect(raw.received()).toMatch(/^HTTP\/1\.1 413 /);
    expect(raw.received()).toContain("admission-guard/webhook/body-limit:");
  });
});

describe("slow callers are closed by the timeouts", () => {
  /** Sends `parts` one at a time, `gapMs` apart, until the server closes; how many it sent. */
  async function trickle(raw: RawConnection, parts: string[], gapMs: number): Promise<number> {
    let sent = 0;
    for (const part of parts) {
      if (raw.socket.destroyed) break;
      raw.socket.write(part);
      sent++;
      await Promise.race([raw.closed, new Promise(r => setTimeout(r, gapMs))]);
    }
    return sent;
  }

  it("headers sent one line at a time are cut off by the headers timeout (PEPR_HEADERS_TIMEOUT_MS)", async () => {
    const raw = await open();
    // 40 lines, 250 ms apart: 10 s of headers; Node's default (60 s) would take them all.
    const lines = [
      "POST /validate/not-the-api-path HTTP/1.1\r\n",
      ...Array.from({ length: 39 }, (_, i) => `X-Slow-${i}: ${i}\r\n`),
    ];
    const sent = await trickle(raw, lines, 250);
    await raw.closed;
    expect(sent).toBeLessThan(lines.length);
  }, 20_000);

  it("an idle kept-alive connection is closed after PEPR_KEEP_ALIVE_TIMEOUT_MS, which the answers announce", async () => {
    const raw = await open();
    raw.socket.write("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    await raw.closed; // nothing more sent: the controller closed it
    expect(raw.received()).toMatch(/^HTTP\/1\.1 200 /);
    expect(raw.received()).toMatch(/\r\nKeep-Alive: timeout=2\r\n/i); // Node's default: 5
  });

  it("a review's body that trickles is cut off by the request timeout (twice the headers')", async () => {
    const raw = await open();
    const body = JSON.stringify(podCreateReview(pod("trickle")));
    raw.socket.write(postHead(`/validate/${env.controller.apiPath}`, Buffer.byteLength(body)));
    // One byte every 100 ms would take minutes; the request timeout is 3 s here.
    const parts = body.slice(0, 100).split("");
    const sent = await trickle(raw, parts, 100);
    await raw.closed;
    expect(sent).toBeLessThan(parts.length);
    expect(raw.received()).not.toMatch(/^HTTP\/1\.1 200 /);
  }, 20_000);

  it("the controller still answers after all of the above", async () => {
    const answer = await env.controller.validate(podCreateReview(pod("after")));
    expect(answer.response?.allowed).toBeDefined();
    expect(env.controller.logs()).not.toMatch(/"msg":"could not [^"]*Pepr/);
  });
});
