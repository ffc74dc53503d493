// The controller's /metrics as a real Prometheus reads it: the real built controller (in front of
// the stand-in API) scraped every second over HTTPS by Debian's prometheus, then PromQL of the kind
// docs, alerts and dashboards use. Proves the exposition parses (Pepr's series and ours in one
// answer, no duplicate), the counters reach Prometheus exactly as the answers the test got, and the
// review histogram gives a sane p99 for both steps.
import { randomUUID } from "node:crypto";
import { admit } from "../support/admission";
import { useEnvironment } from "../support/environment";
import { eventually } from "../support/wait";
import { clusterObjects, demoPod, deniedDemoPod } from "../e2e/cases";
import { REVIEW_BUCKETS } from "../../lib/metrics";
import { startPrometheus, type Prometheus, type Sample } from "./support/prometheus";

const JOB = "admission-guard";
const REQUESTS = "admission_guard_admission_requests_total";
const DENIED = `{job="${JOB}",step="validate",outcome="denied"}`;

const env = useEnvironment({ objects: clusterObjects });
let prometheus: Prometheus;

beforeAll(async () => {
  prometheus = await startPrometheus({
    scrape: [{ job: JOB, targets: [`127.0.0.1:${env.controller.port}`] }],
    selfScrape: true,
  });
}, 60_000);

afterAll(async () => {
  await prometheus?.stop();
});

/** The samples of /metrics as the controller answers it now: `name{labels}` and value. */
async function readMetrics(): Promise<{ name: string; labels: string; value: number }[]> {
  const res = await env.controller.get("/metrics");
  expect(res.status).toBe(200);
  const samples = [];
  for (const line of res.body.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)(\{.*\})? (\S+)$/.exec(line);
    if (m) samples.push({ name: m[1], labels: m[2] ?? "", value: Number(m[3]) });
  }
  return samples;
}

/** The validate answers with outcome "denied" on /metrics, over every kind and operation. */
async function deniedOnMetrics(): Promise<number> {
  return (await readMetrics())
    .filter(
      s =>
        s.name === REQUESTS &&
        s.labels.includes('step="validate"') &&
        s.labels.includes('outcome="denied"'),
    )
    .reduce((sum, s) => sum + s.value, 0);
}

/** The single value of a query that must answer one series. */
async function single(promql: string): Promise<number> {
  const samples = await prometheus.query(promql);
  if (samples.length !== 1)
    throw new Error(`${promql}: ${samples.length} series, not 1: ${JSON.stringify(samples)}`);
  return samples[0].value;
}

/**
 * Nothing of any scrape dropped so far: a series twice in one answer (Pepr's text, then ours)
 * would count in these, not in `up`. Prometheus' own counters, from its scrape of itself.
 */
async function nothingDropped(): Promise<void> {
  for (const dropped of [
    "prometheus_target_scrapes_sample_duplicate_timestamp_total",
    "prometheus_target_scrapes_sample_out_of_order_total",
    "prometheus_target_scrapes_sample_out_of_bounds_total",
    "prometheus_target_scrapes_exceeded_sample_limit_total",
  ])
    expect(await eventually(() => single(`${dropped}{job="prometheus"}`), 10_000, 250)).toBe(0);
}

/** Each series' value keyed by one label. */
const byLabel = (samples: Sample[], label: string) =>
  Object.fromEntries(samples.map(s => [s.metric[label], s.value]));

interface Answers {
  /** Reviews answered per step. */
  mutate: number;
  validate: number;
  /** Validate answers that denied. */
  denied: number;
  /** The longest admit() round trip (both webhooks), seconds. */
  slowest: number;
}

/** One round as the API server would send it: `fixed` pods that get fixed, then one denied. */
async function round(fixed: number, answers: Answers): Promise<void> {
  const pods = Array.from({ length: fixed }, () => demoPod({ run: randomUUID() }));
  for (const pod of [...pods, deniedDemoPod()]) {
    const started = process.hrtime.bigint();
    const result = await admit(env.controller, pod);
    answers.slowest = Math.max(answers.slowest, Number(process.hrtime.bigint() - started) / 1e9);
    answers.mutate++;
    // Sent to the validating webhook only when the mutating one allowed it.
    if (!result.mutateResponse?.allowed) continue;
    answers.validate++;
    if (result.allowed) expect(result.mutateResponse.patchType).toBe("JSONPatch");
    else {
      expect(result.message).toContain("admission-guard/hello-pepr");
      answers.denied++;
    }
  }
}

describe("a real Prometheus scraping the controller's /metrics", () => {
  it("scrapes it without errors: target up, every sample kept, process metrics parsed", async () => {
    await eventually(() => single(`up{job="${JOB}"} == 1`), 20_000, 250);
    const targets = (await prometheus.api("/api/v1/targets")) as {
      activeTargets: { labels: { job: string }; health: string; lastError: string }[];
    };
    const ours = targets.activeTargets.find(t => t.labels.job === JOB);
    expect(ours).toMatchObject({ health: "up", lastError: "" });

    expect(await single(`scrape_samples_scraped{job="${JOB}"}`)).toBeGreaterThan(0);
    // Prometheus kept as many samples as /metrics has lines of samples (read once both settled:
    // a series may appear between a scrape and our read).
    await eventually(
      async () => {
        const lines = (await readMetrics()).length;
        expect(await single(`scrape_samples_scraped{job="${JOB}"}`)).toBe(lines);
        expect(await single(`scrape_samples_post_metric_relabeling{job="${JOB}"}`)).toBe(lines);
      },
      10_000,
      500,
    );
    // Node's process metrics (ours: Pepr's collector has none) and one of Pepr's own series.
    expect(await single(`process_resident_memory_bytes{job="${JOB}"}`)).toBeGreaterThan(0);
    expect(await single(`nodejs_heap_size_used_bytes{job="${JOB}"}`)).toBeGreaterThan(0);
    expect(await prometheus.query(`{job="${JOB}",__name__=~"pepr_.+"}`)).not.toEqual([]);
    await nothingDropped();
  });

  it("counts, rates and the review histogram in PromQL match the answers the test got", async () => {
    // A first round makes every series of the known set exist, and be scraped, before it starts:
    // rate() and increase() count nothing for a series' first sample.
    const sent: Answers = { mutate: 0, validate: 0, denied: 0, slowest: 0 };
    await round(1, sent);
    const before = await deniedOnMetrics();
    await eventually(
      async () => expect(await single(`sum(${REQUESTS}${DENIED})`)).toBe(before),
      10_000,
      250,
    );
    const scrapedBefore = await single(`timestamp(up{job="${JOB}"})`);
    await eventually(
      async () =>
        expect(await single(`timestamp(up{job="${JOB}"})`)).toBeGreaterThan(scrapedBefore),
      10_000,
      250,
    );

    // The known set, spread over a few seconds (a few scrapes).
    Object.assign(sent, { mutate: 0, validate: 0, denied: 0 });
    for (let i = 0; i < 4; i++) {
      if (i > 0) await new Promise(r => setTimeout(r, 1_000));
      await round(2, sent);
    }
    expect(sent.denied).toBeGreaterThan(0);

    // The raw counter once a scrape has seen the last answer: exactly what the test was answered.
    await eventually(
      async () => expect(await single(`sum(${REQUESTS}${DENIED})`)).toBe(before + sent.denied),
      10_000,
      250,
    );
    expect(await deniedOnMetrics()).toBe(before + sent.denied);

    expect(await single(`sum(rate(${REQUESTS}{job="${JOB}"}[30s]))`)).toBeGreaterThan(0);
    // increase() is (last - first) stretched to the window, never shrunk: at least the known set,
    // and at most a bit more (half a scrape interval at the start, the time since the last scrape).
    const increase = byLabel(
      await prometheus.query(`sum by (step) (increase(${REQUESTS}{job="${JOB}"}[1m]))`),
      "step",
    );
    expect(Object.keys(increase).sort()).toEqual(["mutate", "validate"]);
    for (const step of ["mutate", "validate"] as const) {
      expect(increase[step]).toBeGreaterThanOrEqual(sent[step] - 1e-9);
      expect(increase[step]).toBeLessThan(sent[step] * 1.5);
    }

    // p99 of the review duration per step: finite, above 0, within the webhook's 10 s timeout, and
    // at most the upper bound of the bucket the slowest round trip the test saw falls in (a review's
    // time on the server is shorter than its round trip).
    const p99 = byLabel(
      await prometheus.query(
        `histogram_quantile(0.99, sum by (le, step) (rate(admission_guard_admission_review_duration_seconds_bucket{job="${JOB}"}[1m])))`,
      ),
      "step",
    );
    expect(Object.keys(p99).sort()).toEqual(["mutate", "validate"]);
    // (1 ms of slack: the server counts a review when its answer is handed to the socket.)
    const bound = REVIEW_BUCKETS.find(le => le >= sent.slowest + 0.001) ?? Infinity;
    for (const step of ["mutate", "validate"]) {
      expect(Number.isFinite(p99[step])).toBe(true);
      expect(p99[step]).toBeGreaterThan(0);
      expect(p99[step]).toBeLessThan(10);
      expect(p99[step]).toBeLessThanOrEqual(bound);
    }
    await nothingDropped();
  });
});
