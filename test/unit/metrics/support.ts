// Reading the module's metrics in unit tests. They are process-wide (one registry, as in the
// controller), so a test reads what its own actions changed: a snapshot before, the deltas after.
import type { Metric } from "prom-client";

type Series = Map<string, number>;

/** "name" or "name{a="x",b="y"}" (labels sorted), as Prometheus writes a series. */
function keyOf(name: string, labels: Record<string, unknown>): string {
  const parts = Object.keys(labels)
    .filter(k => k !== "le")
    .sort()
    .map(k => `${k}="${String(labels[k])}"`);
  return parts.length ? `${name}{${parts.join(",")}}` : name;
}

/** Every series of the metrics: counters and gauges by value, histograms by _count and _sum. */
async function read(metrics: readonly Metric[]): Promise<Series> {
  const series: Series = new Map();
  for (const metric of metrics) {
    const { name, values } = await metric.get();
    for (const v of values) {
      const metricName = (v as { metricName?: string }).metricName ?? name;
      if (metricName.endsWith("_bucket")) continue;
      series.set(keyOf(metricName, v.labels), v.value);
    }
  }
  return series;
}

/** What the metrics were when it was taken; `moved()` says what changed since. */
export class MetricsDelta {
  private constructor(
    private readonly metrics: readonly Metric[],
    private readonly before: Series,
  ) {}

  static async of(...metrics: Metric[]): Promise<MetricsDelta> {
    return new MetricsDelta(metrics, await read(metrics));
  }

  /** The series that changed and by how much (histograms: their _count only). */
  async moved(): Promise<Record<string, number>> {
    const after = await read(this.metrics);
    const moved: Record<string, number> = {};
    for (const [key, value] of after) {
      if (key.includes("_sum")) continue;
      const change = value - (this.before.get(key) ?? 0);
      if (change !== 0) moved[key] = change;
    }
    return moved;
  }

  /** How much a histogram's _sum grew (seconds observed, in all). */
  async sum(name: string, labels: Record<string, string> = {}): Promise<number> {
    const key = keyOf(`${name}_sum`, labels);
    return ((await read(this.metrics)).get(key) ?? 0) - (this.before.get(key) ?? 0);
  }
}

/** A gauge's (or counter's) value now for these labels; undefined when it has no such series. */
export async function valueOf(
  metric: Metric,
  labels: Record<string, string> = {},
): Promise<number | undefined> {
  const { name } = await metric.get();
  return (await read([metric])).get(keyOf(name, labels));
}
