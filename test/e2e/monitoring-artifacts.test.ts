// The alerts and the Grafana dashboard `npm run build` ships (scripts/overlay/monitoring.ts): they query
// only metrics the module exports (lib/metrics/index.ts), the dashboard draws every one of them and
// every panel an alert points at, each panel reads the ${datasource} variable, and the Helm chart
// has them opt-in with templates Helm renders literally (Prometheus' and Grafana's own {{ }}).
// Reads dist/: run `npm run build` first.
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, parseAllDocuments } from "yaml";
import { METRIC_NAMES, registry } from "../../lib/metrics";

const REPO_ROOT = join(__dirname, "../..");
const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8"));
const UUID: string = pkg.pepr.uuid;
const DIST = join(REPO_ROOT, "dist");
const CHART = join(DIST, `${UUID}-chart`);
const SOURCES = join(REPO_ROOT, "deploy", "monitoring");
const SCRIPT = join(REPO_ROOT, "scripts", "build-overlay.ts");

interface Target {
  refId: string;
  expr: string;
  datasource?: { type?: string; uid?: string };
}
interface Panel {
  type: string;
  title?: string;
  datasource?: { type?: string; uid?: string };
  targets?: Target[];
  panels?: Panel[];
}
interface Dashboard {
  uid: string;
  schemaVersion: number;
  panels: Panel[];
  templating: { list: { name: string; type: string; query: string }[] };
}
interface Rule {
  alert: string;
  expr: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}
interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec?: { groups: { rules: Rule[] }[] };
  data?: Record<string, string>;
}

const read = (...path: string[]) => readFileSync(join(...path), "utf8");
const yamlObjects = (text: string) =>
  parseAllDocuments(text)
    .map(d => d.toJS() as KubeObject | null)
    .filter((o): o is KubeObject => !!o);

beforeAll(() => {
  for (const file of ["admission-guard-alerts.yaml", "admission-guard-monitoring.yaml"])
    if (!existsSync(join(DIST, file)))
      throw new Error(`dist/${file} is missing: run \`npm run build\` first`);
});

const monitoring = () => yamlObjects(read(DIST, "admission-guard-monitoring.yaml"));
const rules = (): Rule[] =>
  parse(read(DIST, "admission-guard-alerts.yaml")).groups.flatMap(
    (g: { rules: Rule[] }) => g.rules,
  );
/** The dashboard as shipped: the ConfigMap's JSON. */
const dashboard = (): Dashboard => {
  const map = monitoring().find(o => o.kind === "ConfigMap")!;
  return JSON.parse(map.data!["admission-guard.json"]);
};
const panelsOf = (list: Panel[] = []): Panel[] => list.flatMap(p => [p, ...panelsOf(p.panels)]);
const drawn = (d: Dashboard) => panelsOf(d.panels).filter(p => p.type !== "row");

// An independent reading of PromQL's metric names (the build step has its own): strings, label
// matchers, ranges and label lists removed; what is left that is no function, aggregation or
// keyword is a metric.
const NOT_METRICS = new Set(
  (
    "and or unless by without on ignoring group_left group_right bool offset inf nan " +
    "sum min max avg group stddev stdvar count count_values bottomk topk quantile"
  ).split(" "),
);
function metricsIn(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, "")
    .replace(/\[[^\]]*\]/g, "")
    .replace(/\b(by|without|on|ignoring)\s*\([^)]*\)/g, "$1");
  const names = new Set<string>();
  for (const [, number, name, call] of bare.matchAll(
    /(\d*\.?\d+(?:e[+-]?\d+)?)|([A-Za-z_:][\w:]*)(\s*\()?/gi,
  ))
    if (!number && !call && !NOT_METRICS.has(name)) names.add(name);
  return [...names];
}

const histograms = new Set(
  registry
    .getMetricsAsArray()
    .filter(m => (m as unknown as { type: string }).type === "histogram")
    .map(m => (m as unknown as { name: string }).name),
);
/** The catalog name a queried series belongs to (a histogram's _bucket, _sum, _count). */
function catalogName(name: string): string | undefined {
  if (METRIC_NAMES.includes(name)) return name;
  const base = name.replace(/_(bucket|sum|count)$/, "");
  return base !== name && histograms.has(base) ? base : undefined;
}
const exportedByTheTargets = (name: string) =>
  name === "up" || /^(process|nodejs)_/.test(name) || catalogName(name) !== undefined;

describe("the metrics the alerts and the dashboard query", () => {
  it("are all exported by the module (lib/metrics/index.ts), or up, process_*, nodejs_*", () => {
    const queried = [
      ...rules().map(r => ({ where: r.alert, expr: r.expr })),
      ...drawn(dashboard()).flatMap(p =>
        (p.targets ?? []).map(t => ({ where: p.title, expr: t.expr })),
      ),
    ];
    expect(queried.length).toBeGreaterThan(30);
    const unknown = queried.flatMap(q =>
      metricsIn(q.expr)
        .filter(n => !exportedByTheTargets(n))
        .map(n => `${q.where}: ${n}`),
    );
    expect(unknown).toEqual([]);
    // The reading finds names at all: each alert queries one of the module's metrics.
    for (const rule of rules())
      expect({ alert: rule.alert, ours: metricsIn(rule.expr).some(n => catalogName(n)) }).toEqual({
        alert: rule.alert,
        ours: true,
      });
  });

  it("the dashboard draws every metric of the catalog", () => {
    const onDashboard = new Set(
      drawn(dashboard()).flatMap(p =>
        (p.targets ?? []).flatMap(t => metricsIn(t.expr)).map(catalogName),
      ),
    );
    expect(METRIC_NAMES.filter(n => !onDashboard.has(n))).toEqual([]);
  });

  it("every alert's metrics are on the dashboard, and every panel an alert names exists", () => {
    const d = dashboard();
    const onDashboard = new Set(
      drawn(d).flatMap(p => (p.targets ?? []).flatMap(t => metricsIn(t.expr))),
    );
    const titles = new Set(drawn(d).map(p => p.title));
    for (const rule of rules()) {
      const missing = metricsIn(rule.expr).filter(n => !onDashboard.has(n));
      expect({ alert: rule.alert, missing }).toEqual({ alert: rule.alert, missing: [] });
      // `panel "A"`, `panels "A", "B" and "C"`: the titles quoted after the word.
      const named = [
        ...rule.annotations.description.matchAll(/[Pp]anels? ((?:"[^"]+"(?:, | and )?)+)/g),
      ]
        .flatMap(m => [...m[1].matchAll(/"([^"]+)"/g)])
        .map(m => m[1]);
      expect({ alert: rule.alert, panels: named.length > 0 }).toEqual({
        alert: rule.alert,
        panels: true,
      });
      expect({ alert: rule.alert, absent: named.filter(t => !titles.has(t)) }).toEqual({
        alert: rule.alert,
        absent: [],
      });
    }
  });
});

describe("the dashboard", () => {
  it("has uid admission-guard, a prometheus ${datasource} variable, and every panel a title and that datasource", () => {
    const d = dashboard();
    expect(d.uid).toBe("admission-guard");
    expect(d.schemaVersion).toBeGreaterThanOrEqual(39);
    expect(d.templating.list).toContainEqual(
      expect.objectContaining({ name: "datasource", type: "datasource", query: "prometheus" }),
    );
    const panels = drawn(d);
    expect(panels.length).toBeGreaterThan(20);
    const source = { type: "prometheus", uid: "${datasource}" };
    for (const p of panels) {
      expect({ title: p.title, datasource: p.datasource }).toEqual({
        title: expect.any(String),
        datasource: source,
      });
      expect(p.title!.trim()).not.toBe("");
      expect((p.targets ?? []).length).toBeGreaterThan(0);
      for (const t of p.targets ?? [])
        expect({ title: p.title, ds: t.datasource }).toEqual({ title: p.title, ds: source });
    }
    expect(new Set(panels.map(p => p.title)).size).toBe(panels.length);
  });

  it("is the source with the module's job filled in", () => {
    const source = read(SOURCES, "dashboard.json");
    expect(source).toContain("pepr-UUID");
    expect(dashboard()).toEqual(JSON.parse(source.replaceAll("pepr-UUID", `pepr-${UUID}`)));
    expect(JSON.stringify(dashboard())).toContain(`job=~\\"pepr-${UUID}|pepr-${UUID}-watcher\\"`);
  });
});

describe("the alerts", () => {
  it("each has a severity, a summary, a description and its runbook in docs/operations.md", () => {
    const list = rules();
    expect(list.map(r => r.alert)).toEqual(
      expect.arrayContaining([
        "AdmissionGuardWebhookErrors",
        "AdmissionGuardSlowReviews",
        "AdmissionGuardNoReadyReplica",
        "AdmissionGuardImageLookupsFailing",
        "AdmissionGuardReportsLagging",
        "AdmissionGuardCacheNotSynced",
        "AdmissionGuardBudgetExhausted",
      ]),
    );
    for (const r of list) {
      expect(["critical", "warning", "info"]).toContain(r.labels.severity);
      expect(r.annotations).toEqual({
        summary: expect.stringMatching(/\S/),
        description: expect.stringMatching(/\S/),
        runbook_url: `docs/operations.md#${r.alert.toLowerCase()}`,
      });
    }
  });

  it("the slow-review threshold is 70% of package.json pepr.webhookTimeout, and the job the module's", () => {
    const byName = Object.fromEntries(rules().map(r => [r.alert, r]));
    expect(byName.AdmissionGuardSlowReviews.expr).toMatch(
      new RegExp(`> 0\\.7 \\* ${pkg.pepr.webhookTimeout}\\s*$`),
    );
    expect(byName.AdmissionGuardNoReadyReplica.expr).toContain(`up{job="pepr-${UUID}"}`);
    expect(read(DIST, "admission-guard-alerts.yaml")).not.toMatch(/pepr-UUID|WEBHOOK_TIMEOUT/);
  });

  it("the PrometheusRule for kubectl apply holds the same groups as the plain rule file", () => {
    const rule = monitoring().find(o => o.kind === "PrometheusRule")!;
    expect(rule.apiVersion).toBe("monitoring.coreos.com/v1");
    expect(rule.metadata.namespace).toBe("pepr-system");
    expect(rule.spec!.groups).toEqual(parse(read(DIST, "admission-guard-alerts.yaml")).groups);
    const map = monitoring().find(o => o.kind === "ConfigMap")!;
    expect(map.metadata.labels).toMatchObject({ grafana_dashboard: "1" });
  });

  it("has a ServiceMonitor per controller, selecting the Service the manifest writes", () => {
    const manifest = yamlObjects(read(DIST, `pepr-module-${UUID}.yaml`));
    const monitors = monitoring().filter(o => o.kind === "ServiceMonitor");
    expect(monitors).toHaveLength(2);
    for (const monitor of monitors) {
      const spec = monitor.spec as unknown as {
        selector: { matchLabels: Record<string, string> };
        endpoints: { targetPort: number; scheme: string }[];
      };
      const selected = manifest.filter(
        o =>
          o.kind === "Service" &&
          Object.entries(spec.selector.matchLabels).every(([k, v]) => o.metadata.labels?.[k] === v),
      );
      expect(selected).toHaveLength(1);
      expect(spec.endpoints).toEqual([
        expect.objectContaining({ targetPort: 3000, scheme: "https" }),
      ]);
    }
  });
});

/**
 * What Helm renders of a template with the switch on and no labels: the `if`, `with` and `end`
 * actions dropped, each {{`…`}} raw string as its text. Fails if any other action is left.
 */
function renderLiterally(template: string, key: string): string {
  const values = `.Values.monitoring.${key}`;
  expect(template.startsWith(`{{- if ${values}.enabled }}\n`)).toBe(true);
  expect(template.endsWith("{{- end }}\n")).toBe(true);
  // The labels and annotations of the values, none here: each `with` block renders nothing.
  const withBlock = (field: string, indent: string, heading = "") =>
    `${indent}{{- with ${values}.${field} }}\n${heading}    {{- toYaml . | nindent 4 }}\n${indent}{{- end }}\n`;
  const labels = withBlock("labels", "    ");
  const annotations = withBlock("annotations", "  ", "  annotations:\n");
  expect(template).toContain(labels);
  expect(template).toContain(annotations);
  const body = template
    .slice(`{{- if ${values}.enabled }}\n`.length, -"{{- end }}\n".length)
    .replace(labels, "")
    .replace(annotations, "");
  expect(body.replace(/\{\{`[^`]*`\}\}/g, "")).not.toContain("{{");
  return body.replace(/\{\{`([^`]*)`\}\}/g, "$1");
}

describe("the Helm chart", () => {
  it("has both opt-in, off by default, in values.yaml", () => {
    const values = parse(read(CHART, "values.yaml"));
    expect(values.monitoring).toEqual({
      prometheusRule: { enabled: false, labels: {}, annotations: {} },
      dashboard: { enabled: false, labels: {}, annotations: {} },
    });
  });

  it("admits the switches in values.schema.json when it refuses unknown keys", () => {
    const schema = JSON.parse(read(CHART, "values.schema.json"));
    const root = schema.$ref ? schema.definitions[schema.$ref.split("/").pop()] : schema;
    if (root.additionalProperties !== false) return; // a schema that takes any key takes these
    const monitoringSchema = root.properties.monitoring;
    expect(monitoringSchema.additionalProperties).toBe(false);
    for (const key of ["prometheusRule", "dashboard"]) {
      const s = monitoringSchema.properties[key];
      expect(s.properties.enabled).toEqual({ type: "boolean" });
      expect(Object.keys(s.properties).sort()).toEqual(["annotations", "enabled", "labels"]);
    }
  });

  it("renders the PrometheusRule and the dashboard ConfigMap as dist/ has them, {{ }} literal", () => {
    const shipped = monitoring();
    for (const [file, key, kind] of [
      ["prometheus-rule.yaml", "prometheusRule", "PrometheusRule"],
      ["grafana-dashboard.yaml", "dashboard", "ConfigMap"],
    ]) {
      const template = read(CHART, "templates", file);
      // Prometheus' and Grafana's templating is there, escaped.
      expect(template).toMatch(/\{\{`\{\{[^`]*\}\}`\}\}/);
      const [object] = yamlObjects(renderLiterally(template, key));
      const expected = shipped.find(o => o.kind === kind)!;
      expect(object).toEqual(expected);
    }
  });
});

describe("the build overlay's monitoring entry (scripts/overlay/monitoring.ts)", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "admission-guard-monitoring-"));
    // The overlay's input: the manifest and the chart, as `pepr build` and the overlay left them.
    cpSync(CHART, join(dir, "dist", `${UUID}-chart`), { recursive: true });
    const manifest = `pepr-module-${UUID}.yaml`;
    cpSync(join(DIST, manifest), join(dir, "dist", manifest));
    cpSync(SOURCES, join(dir, "sources"), { recursive: true });
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const run = () =>
    spawnSync(
      process.execPath,
      ["--import", "tsx", SCRIPT, join(dir, "dist"), join(dir, "sources")],
      { cwd: REPO_ROOT, encoding: "utf8", timeout: 60_000 },
    );

  it("writes what the build has, and writes it again the same (idempotent)", () => {
    const first = run();
    expect({ status: first.status, stderr: first.stderr }).toEqual({ status: 0, stderr: "" });
    for (const file of ["admission-guard-alerts.yaml", "admission-guard-monitoring.yaml"])
      expect(read(dir, "dist", file)).toBe(read(DIST, file));
    const chartFiles = [
      "values.yaml",
      "values.schema.json",
      "templates/prometheus-rule.yaml",
      "templates/grafana-dashboard.yaml",
    ];
    const after = chartFiles.map(f => read(dir, "dist", `${UUID}-chart`, f));
    expect(run().status).toBe(0);
    expect(chartFiles.map(f => read(dir, "dist", `${UUID}-chart`, f))).toEqual(after);
  });

  it.each([
    [
      "the dashboard",
      "admission_guard_image_cache_bytez",
      "dashboard.json",
      "admission_guard_image_cache_bytes)",
    ],
    // Not a histogram: no _bucket series.
    [
      "an alert",
      "admission_guard_cache_synced_bucket",
      "alerts.yaml",
      "admission_guard_cache_synced ==",
    ],
    ["an alert", "kube_pod_status_ready", "alerts.yaml", "admission_guard_watcher_queue_depth)"],
  ])(
    "fails the build when %s names a metric the module does not export (%s)",
    (_, name, file, from) => {
      const path = join(dir, "sources", file);
      const text = readFileSync(path, "utf8");
      expect(text).toContain(from);
      writeFileSync(path, text.replace(from, from.replace(/^[a-z_]+/, name)));
      const result = run();
      expect(result.status).toBe(1);
      expect(result.stderr).toContain(`${name} is not`);
      expect(result.stderr).toMatch(/METRIC_NAMES|not a metric of the module/);
      expect(existsSync(join(dir, "dist", "admission-guard-alerts.yaml"))).toBe(false);
    },
  );
});
