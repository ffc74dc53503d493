// The part of autocannon 9's API the benchmark uses (the package ships no types).
declare module "autocannon" {
  namespace autocannon {
    interface Request {
      method?: string;
      path?: string;
      headers?: Record<string, string>;
      body?: string;
    }
    interface Options {
      url: string;
      connections?: number;
      /** Seconds. */
      duration?: number;
      /** Stop after this many requests (overrides duration). */
      amount?: number;
      /** Requests per second across all connections. */
      overallRate?: number;
      requests?: Request[];
      /** Seconds. */
      timeout?: number;
    }
    interface Histogram {
      p50: number;
      p90: number;
      p99: number;
      average: number;
    }
    interface Result {
      latency: Histogram;
      requests: Histogram & { total: number };
      duration: number;
      errors: number;
      timeouts: number;
      non2xx: number;
      "2xx": number;
    }
  }
  function autocannon(
    options: autocannon.Options,
    callback: (err: Error | null, result: autocannon.Result) => void,
  ): unknown;
  export = autocannon;
}
