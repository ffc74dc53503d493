// Latency at a fixed request rate, measured open-loop: request i is due at start + i/rate whether or
// not earlier answers have come back, and its latency counts from when it was due, not from when it
// went out (so a stalled server or a late generator shows up in the figures instead of hiding).
//
// Why not autocannon's `overallRate`: autocannon 9 paces per second, not per request — each
// connection sends back-to-back until it has made its share of the second, then waits for the next
// second (autocannon/lib/httpClient.js `reqsMadeThisSecond`). At 200 req/s that is a burst of 200 requests at
// the start of every second: its "p99 at 200 req/s" is the tail of a saturation burst (a bare Node
// server showed 10 ms). Its histogram also has a 1 ms resolution.
import { Agent, request } from "node:https";

export interface PacedResult {
  /** Answers with a 2xx status. */
  responses: number;
  errors: number;
  seconds: number;
  /** Milliseconds, from when each request was due to its last byte of answer. */
  latency: { p50: number; p90: number; p99: number; max: number };
  /** Largest delay between a request being due and being sent (the generator's own lateness). */
  maxSendLagMs: number;
}

export interface PacedTarget {
  url: string;
  /** Tried in turn: [path, body]. */
  requests: { path: string; body: string }[];
}

/** Percentile of sorted values (nearest rank). */
export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

export async function pacedLoad(
  target: PacedTarget,
  opts: { rate: number; seconds: number; timeoutMs?: number },
): Promise<PacedResult> {
  const { rate, seconds } = opts;
  const timeoutMs = opts.timeoutMs ?? 10_000;
  // Keep-alive like an API server's webhook client; enough sockets that a slow answer never holds
  // back the next request (open loop).
  const agent = new Agent({ keepAlive: true, maxSockets: 64, rejectUnauthorized: false });
  const total = Math.max(1, Math.round(rate * seconds));
  const latencies: number[] = [];
  let errors = 0;
  let maxSendLagMs = 0;
  let sent = 0;
  let settled = 0;
  const url = new URL(target.url);

  /** POSTs request i; resolves with whether a 2xx answer came back. */
  const post = (i: number) =>
    new Promise<boolean>(answered => {
      const { path, body } = target.requests[i % target.requests.length];
      const req = request(
        {
          agent,
          host: url.hostname,
          port: url.port,
          path,
          method: "POST",
          headers: {
            "content-type": "application/json",
            "content-length": Buffer.byteLength(body),
          },
          timeout: timeoutMs,
        },
        res => {
          res.on("data", () => undefined);
          res.on("end", () =>
            answered((res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 300),
          );
          res.on("error", () => answered(false));
        },
      );
      req.on("timeout", () => req.destroy(new Error("timeout")));
      req.on("error", () => answered(false));
      req.end(body);
    });
  // Connections opened before the clock starts: a TLS handshake is not what is measured.
  await Promise.all(Array.from({ length: 8 }, (_, i) => post(i)));

  const start = performance.now() + 20;
  await new Promise<void>(done => {
    const send = (i: number) => {
      const due = start + (i * 1000) / rate;
      maxSendLagMs = Math.max(maxSendLagMs, performance.now() - due);
      void post(i).then(ok => {
        if (ok) latencies.push(performance.now() - due);
        else errors++;
        if (++settled === total) done();
      });
    };
    // Wake up at each due time; send everything that is due (timers may fire late under load).
    const tick = () => {
      const now = performance.now();
      while (sent < total && start + (sent * 1000) / rate <= now) send(sent++);
      if (sent < total)
        setTimeout(tick, Math.max(0, start + (sent * 1000) / rate - performance.now()));
    };
    setTimeout(tick, Math.max(0, start - performance.now()));
  });
  agent.destroy();
  const sorted = latencies.sort((a, b) => a - b);
  const ms = (x: number) => Math.round(x * 100) / 100;
  return {
    responses: sorted.length,
    errors,
    seconds,
    latency: {
      p50: ms(percentile(sorted, 50)),
      p90: ms(percentile(sorted, 90)),
      p99: ms(percentile(sorted, 99)),
      max: ms(sorted[sorted.length - 1] ?? NaN),
    },
    maxSendLagMs: ms(maxSendLagMs),
  };
}
