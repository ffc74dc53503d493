// The metric catalog (lib/metrics): names and types in Prometheus' idiom, bounded labels, the
// review buckets up to the webhook's timeout, and our registry served after Pepr's.
import cfg from "../../../package.json";
import { BoundedLabel, OTHER } from "../../../lib/metrics/bounded-label";
import {
  METRIC_NAMES,
  REVIEW_BUCKETS,
  recordDecision,
  recordReview,
  registry,
} from "../../../lib/metrics";
import { outcomeOf, serveWithPepr } from "../../../lib/pepr/metrics-serve";

/** The value of one sample, by its labels (0 when absent). */
async function sample(name: string, labels: Record<string, string>): Promise<number> {
  const metric = registry.getSingleMetric(name);
  if (!metric) throw new Error(`no metric ${name}`);
  const { values } = await metric.get();
  const found = values.find(v =>
    Object.entries(labels).every(([k, want]) => String(v.labels[k]) === want),
  );
  return found?.value ?? 0;
}

describe("the catalog", () => {
  it("names every metric admission_guard_*, counters *_total, durations *_seconds histograms", async () => {
    const metrics = await registry.getMetricsAsJSON();
    expect(metrics.length).toBe(METRIC_NAMES.length);
    expect(metrics.length).toBeGreaterThanOrEqual(19);
    for (const m of metrics) {
      expect(m.name).toMatch(/^admission_guard_[a-z_]+$/);
      const type = String(m.type);
      if (type === "counter") expect(m.name).toMatch(/_total$/);
      if (m.name.endsWith("_total")) expect(type).toBe("counter");
      if (/duration|lag/.test(m.name)) {
        expect(type).toBe("histogram");
        expect(m.name).toMatch(/_seconds$/);
      }
      expect(m.help.length).toBeGreaterThan(20);
    }
  });

  it("never labels by a name a tenant chooses (namespace, pod, image, user)", () => {
    for (const name of METRIC_NAMES) {
      const labels = (registry.getSingleMetric(name) as unknown as { labelNames: string[] })
        .labelNames;
      for (const label of labels)
        expect(["namespace", "pod", "name", "image", "user", "uid"]).not.toContain(label);
    }
  });

  it("review buckets run from 1 ms up to the webhook's timeout", () => {
    expect(REVIEW_BUCKETS[0]).toBe(0.001);
    expect(REVIEW_BUCKETS.at(-1)).toBe(cfg.pepr.webhookTimeout);
    expect([...REVIEW_BUCKETS].sort((a, b) => a - b)).toEqual(REVIEW_BUCKETS);
  });
});

describe("BoundedLabel", () => {
  it("keeps the first max distinct values, then answers other", () => {
    const label = new BoundedLabel(2);
    expect(label.of("Pod")).toBe("Pod");
    expect(label.of("Job")).toBe("Job");
    expect(label.of("Deployment")).toBe(OTHER);
    expect(label.of("Pod")).toBe("Pod");
  });

  it("answers other for empty, long or non-string values without spending a slot", () => {
    const label = new BoundedLabel(1, 10);
    for (const odd of ["", "x".repeat(11), undefined, null, 42, { kind: "Pod" }])
      expect(label.of(odd)).toBe(OTHER);
    expect(label.of("Pod")).toBe("Pod");
  });
});

describe("recording", () => {
  const requests = "admission_guard_admission_requests_total";

  it("a review: its kind and operation, an unknown operation as other, one observation", async () => {
    const labels = { step: "validate", kind: "Pod", operation: "CREATE", outcome: "denied" };
    const before = await sample(requests, labels);
    const other = { ...labels, operation: "other" };
    const otherBefore = await sample(requests, other);
    const observations = async () =>
      (
        await registry.getSingleMetric("admission_guard_admission_review_duration_seconds")!.get()
      ).values.find(
        v =>
          (v as { metricName?: string }).metricName?.endsWith("_count") &&
          v.labels.step === "validate",
      )?.value ?? 0;
    const countBefore = await observations();
    recordReview("validate", {
      kind: "Pod",
      operation: "CREATE",
      outcome: "denied",
      seconds: 0.003,
    });
    recordReview("validate", {
      kind: "Pod",
      operation: "PATCH",
      outcome: "denied",
      seconds: 0.003,
    });
    expect(await sample(requests, labels)).toBe(before + 1);
    expect(await sample(requests, other)).toBe(otherBefore + 1);
    const { values } = await registry
      .getSingleMetric("admission_guard_admission_review_duration_seconds")!
      .get();
    const le = (bound: number) =>
      values.find(
        v =>
          (v as { metricName?: string }).metricName?.endsWith("_bucket") &&
          v.labels.step === "validate" &&
          v.labels.le === bound,
      )?.value;
    // 3 ms lands in the 5 ms bucket, not in the 2.5 ms one.
    expect((le(0.005) ?? 0) - (le(0.0025) ?? 0)).toBeGreaterThanOrEqual(2);
    expect(await observations()).toBe(countBefore + 2);
    // A request off the API path is counted, but it is nobody's review: its time is not observed.
    const unauthorized = {
      step: "validate",
      kind: "other",
      operation: "other",
      outcome: "unauthorized",
    };
    const unauthorizedBefore = await sample(requests, unauthorized);
    recordReview("validate", {
      kind: "X",
      operation: "CREATE",
      outcome: "unauthorized",
      seconds: 9,
    });
    expect(await sample(requests, { ...unauthorized, kind: "X", operation: "CREATE" })).toBe(0);
    expect(await sample(requests, unauthorized)).toBe(unauthorizedBefore + 1);
    expect(await observations()).toBe(countBefore + 2);
  });

  it("a decision, by capability, rule and outcome", async () => {
    const labels = { capability: "labels", rule: "component-label", outcome: "fixed" };
    const before = await sample("admission_guard_decisions_total", labels);
    recordDecision("labels", "fixed", 3, "component-label");
    expect(await sample("admission_guard_decisions_total", labels)).toBe(before + 3);
  });
});

describe("outcomeOf", () => {
  it.each([
    ["mutate", 200, { allowed: true, patch: "W10=" }, "patched"],
    ["mutate", 200, { allowed: true }, "allowed"],
    ["validate", 200, { allowed: true, patch: "W10=" }, "allowed"],
    ["validate", 200, { allowed: false }, "denied"],
    ["mutate", 200, { allowed: false }, "denied"],
    ["validate", 401, undefined, "unauthorized"],
    ["validate", 413, undefined, "error"],
    ["validate", 500, undefined, "error"],
    ["validate", 200, undefined, "error"],
  ] as const)("%s, HTTP %d, %j: %s", (step, status, answer, want) => {
    expect(outcomeOf(step, status, answer)).toBe(want);
  });
});

describe("serveWithPepr", () => {
  it("answers Pepr's series, then ours and Node's process metrics; a second call changes nothing", async () => {
    const collector = { getMetrics: async () => "# TYPE pepr_errors counter\npepr_errors 0\n" };
    expect(serveWithPepr(collector)).toBe(true);
    const served = collector.getMetrics;
    expect(serveWithPepr(collector)).toBe(true);
    expect(collector.getMetrics).toBe(served);
    const text = await collector.getMetrics();
    expect(text.indexOf("pepr_errors 0")).toBe(text.indexOf("# TYPE pepr_errors") + 27);
    expect(text).toContain("# TYPE admission_guard_admission_requests_total counter");
    expect(text).toMatch(/^process_resident_memory_bytes \d+/m);
    expect(text.match(/# TYPE pepr_errors /g)).toHaveLength(1);
  });

  it("refuses a collector without getMetrics", () => {
    expect(serveWithPepr({} as never)).toBe(false);
  });
});
