// After `pepr build`: the module's alerts and Grafana dashboard (deploy/monitoring/) shipped with
// the build, opt-in. Run with tsx (`node --import tsx`): the metric names are the ones
// lib/metrics/index.ts registers (METRIC_NAMES), not a copy.
// - dist/admission-guard-alerts.yaml: the plain Prometheus rule file (promtool, or a Prometheus
//   without the operator), with pepr-UUID replaced by pepr-<uuid> (the admission Service, Prometheus'
//   job for the chart's ServiceMonitor targets) and WEBHOOK_TIMEOUT by package.json
//   pepr.webhookTimeout;
// - dist/admission-guard-monitoring.yaml: a PrometheusRule and the dashboard's ConfigMap (label
//   grafana_dashboard: "1", for Grafana's dashboard sidecar), for `kubectl apply -f`;
// - the Helm chart: templates/prometheus-rule.yaml and templates/grafana-dashboard.yaml behind
//   values monitoring.prometheusRule.enabled and monitoring.dashboard.enabled (both false), in
//   values.yaml and, when it refuses unknown keys, values.schema.json.
// The build fails if an expression names a metric the module does not export: every admission_guard_*
// name must be in METRIC_NAMES (a histogram's with _bucket, _sum or _count); otherwise only `up`,
// process_* and nodejs_* (prom-client's default metrics, lib/metrics/serve.ts).
// Idempotent. The sources are deploy/monitoring/, or the directory given as the second argument.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { parse, parseDocument, stringify } from "yaml";
import metricsModule from "../lib/metrics/index.ts";
import { addChartValues, chart, dist, pepr } from "./build-output.mjs";

const { METRIC_NAMES, registry } = metricsModule;

const NAMESPACE = "pepr-system"; // where Pepr's chart puts the controllers and their ServiceMonitors
const RULE_NAME = "admission-guard";
const DASHBOARD_NAME = "admission-guard-dashboard";
const DASHBOARD_KEY = "admission-guard.json";
const SEVERITIES = new Set(["critical", "warning", "info"]);
const HISTOGRAM_SUFFIXES = ["_bucket", "_sum", "_count"];

function fail(message) {
  console.error(`monitoring: ${message}`);
  process.exit(1);
}

const sources = process.argv[3]
  ? new URL(`file://${process.argv[3].replace(/\/?$/, "/")}`)
  : new URL("../deploy/monitoring/", import.meta.url);
const read = name => {
  const file = new URL(name, sources);
  if (!existsSync(file)) fail(`${file.pathname} is missing`);
  return readFileSync(file, "utf8");
};

if (!(Number(pepr.webhookTimeout) > 0)) fail("package.json pepr.webhookTimeout is not a number");
/** The build's names and numbers in place of the sources' placeholders. */
const substitute = text =>
  text
    .replaceAll("pepr-UUID", `pepr-${pepr.uuid}`)
    .replaceAll("WEBHOOK_TIMEOUT", String(pepr.webhookTimeout));

// ---- the metric names an expression uses ----

const HISTOGRAMS = new Set(
  registry
    .getMetricsAsArray()
    .filter(m => m.type === "histogram")
    .map(m => m.name),
);
const EXPORTED = new Set(METRIC_NAMES);
// Operators and aggregations (`sum by (x) (…)`: not followed by a parenthesis).
const KEYWORDS = new Set(
  [
    "and or unless by without on ignoring group_left group_right bool offset inf nan",
    "sum min max avg group stddev stdvar count count_values bottomk topk quantile limitk",
  ]
    .join(" ")
    .split(" "),
);

/** The metric names in a PromQL expression (Grafana's $variables allowed). */
function metricNames(expr) {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""') // strings
    .replace(/\{[^}]*\}/g, "") // label matchers
    .replace(/\[[^\]]*\]/g, "") // ranges and subqueries
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, "$1") // label lists
    .replace(/\boffset\s+-?[\w$]+/g, "")
    .replace(/@\s*[\w.()]+/g, "")
    .replace(/\$\{?\w+\}?/g, "");
  const names = new Set();
  for (const m of bare.matchAll(/(\d*\.?\d+(?:e[+-]?\d+)?)|([A-Za-z_:][\w:]*)(\s*\()?/gi)) {
    const [, number, name, call] = m;
    if (number || call || KEYWORDS.has(name.toLowerCase())) continue;
    names.add(name);
  }
  return [...names];
}

/** Why a metric name is not one the module's targets export, or undefined. */
function unexported(name) {
  if (name === "up" || /^(process|nodejs)_/.test(name)) return undefined;
  if (!name.startsWith("admission_guard_"))
    return "not a metric of the module (admission_guard_*, up, process_*, nodejs_*)";
  if (EXPORTED.has(name)) return undefined;
  const suffix = HISTOGRAM_SUFFIXES.find(s => name.endsWith(s));
  if (suffix && HISTOGRAMS.has(name.slice(0, -suffix.length))) return undefined;
  return "not in lib/metrics/index.ts METRIC_NAMES";
}

const problems = [];
function checkExpression(where, expr) {
  if (typeof expr !== "string" || !expr.trim()) return problems.push(`${where}: no expression`);
  for (const name of metricNames(expr)) {
    const why = unexported(name);
    if (why) problems.push(`${where}: ${name} is ${why}`);
  }
}

// ---- the alerts ----

const alertsText = substitute(read("alerts.yaml"));
const alertsDoc = parseDocument(alertsText);
if (alertsDoc.errors.length) fail(`alerts.yaml: ${alertsDoc.errors[0].message}`);
const { groups } = alertsDoc.toJS();
if (!Array.isArray(groups) || !groups.length) fail("alerts.yaml has no groups");
const alertNames = [];
for (const group of groups)
  for (const rule of group.rules ?? []) {
    const name = rule.alert ?? rule.record;
    checkExpression(`alerts.yaml ${name}`, rule.expr);
    if (!rule.alert) continue;
    alertNames.push(rule.alert);
    if (!SEVERITIES.has(rule.labels?.severity))
      problems.push(`alerts.yaml ${name}: severity must be one of ${[...SEVERITIES].join(", ")}`);
    for (const key of ["summary", "description"])
      if (!rule.annotations?.[key]) problems.push(`alerts.yaml ${name}: no ${key} annotation`);
    const runbook = `docs/operations.md#${name.toLowerCase()}`;
    if (rule.annotations?.runbook_url !== runbook)
      problems.push(`alerts.yaml ${name}: runbook_url must be ${runbook}`);
  }
if (!alertNames.length) fail("alerts.yaml has no alert");

// ---- the dashboard ----

const dashboardText = substitute(read("dashboard.json"));
let dashboard;
try {
  dashboard = JSON.parse(dashboardText);
} catch (e) {
  fail(`dashboard.json: ${e.message}`);
}
const allPanels = list => (list ?? []).flatMap(p => [p, ...allPanels(p.panels)]);
for (const panel of allPanels(dashboard.panels))
  for (const target of panel.targets ?? [])
    checkExpression(`dashboard.json panel "${panel.title}" ${target.refId}`, target.expr);

if (problems.length)
  fail(
    `an expression names a metric the module does not export (or a rule is incomplete):\n  ${problems.join("\n  ")}`,
  );

// ---- dist/: the plain rule file and the objects for kubectl apply ----

alertsDoc.commentBefore =
  ` admission-guard's alerts (module ${pepr.uuid}), a Prometheus rule file: written by\n` +
  ` scripts/monitoring.mjs from deploy/monitoring/alerts.yaml. As a PrometheusRule: the chart's\n` +
  ` monitoring.prometheusRule.enabled, or dist/admission-guard-monitoring.yaml.`;
writeFileSync(new URL("admission-guard-alerts.yaml", dist), alertsDoc.toString({ lineWidth: 0 }));

const APP_LABELS = { "app.kubernetes.io/part-of": "admission-guard" };
const prometheusRule = labels => ({
  apiVersion: "monitoring.coreos.com/v1",
  kind: "PrometheusRule",
  metadata: { name: RULE_NAME, namespace: NAMESPACE, labels },
});
const dashboardMap = labels => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name: DASHBOARD_NAME, namespace: NAMESPACE, labels },
});
// As the chart's own (Pepr's admission.serviceMonitor / watcher.serviceMonitor), for kubectl users:
// the job is then the Service's name, which AdmissionGuardNoReadyReplica reads.
const serviceMonitor = controller => ({
  apiVersion: "monitoring.coreos.com/v1",
  kind: "ServiceMonitor",
  metadata: { name: `admission-guard-${controller}`, namespace: NAMESPACE, labels: APP_LABELS },
  spec: {
    selector: { matchLabels: { "pepr.dev/controller": controller } },
    namespaceSelector: { matchNames: [NAMESPACE] },
    // Pepr's self-signed serving certificate: TLS without verification, as Pepr's chart does.
    endpoints: [{ targetPort: 3000, scheme: "https", tlsConfig: { insecureSkipVerify: true } }],
  },
});
const dashboardJson = JSON.stringify(dashboard, null, 2);
const yaml = value => stringify(value, { lineWidth: 0 });
// The rules' spec and the ConfigMap's data: the same text in dist/ and the chart.
const ruleSpec = yaml({ spec: { groups: parse(alertsText).groups } });
const dashboardData = yaml({ data: { [DASHBOARD_KEY]: dashboardJson } });

writeFileSync(
  new URL("admission-guard-monitoring.yaml", dist),
  `# Opt-in (kubectl apply -f): admission-guard's alerts as a PrometheusRule (the Prometheus
# operator's CRD; add the labels your Prometheus' ruleSelector asks for) and its Grafana dashboard
# as a ConfigMap for Grafana's dashboard sidecar (label grafana_dashboard: "1"). The Helm chart has
# both behind monitoring.prometheusRule.enabled and monitoring.dashboard.enabled, and ServiceMonitors
# like these behind admission.serviceMonitor.enabled and watcher.serviceMonitor.enabled.
${yaml(prometheusRule(APP_LABELS))}${ruleSpec}---
${yaml(dashboardMap({ ...APP_LABELS, grafana_dashboard: "1" }))}${dashboardData}---
${yaml(serviceMonitor("admission"))}---
${yaml(serviceMonitor("watcher"))}`,
);

// ---- the Helm chart ----

/**
 * Text Helm renders as it is: each `{{ … }}` (Prometheus' and Grafana's templating) becomes
 * {{`{{ … }}`}}, a Go template raw string.
 */
function helmLiteral(text) {
  const escaped = text.replace(/\{\{[\s\S]*?\}\}/g, m => {
    if (m.includes("`")) fail(`cannot escape ${m} for Helm: it holds a backtick`);
    return `{{\`${m}\`}}`;
  });
  if (/\{\{(?!`)/.test(escaped.replace(/\{\{`[^`]*`\}\}/g, "")))
    fail("an unclosed {{ is left for Helm");
  return escaped;
}

const switches = {
  type: "object",
  additionalProperties: false,
  properties: {
    enabled: { type: "boolean" },
    labels: { type: "object", additionalProperties: { type: "string" } },
    annotations: { type: "object", additionalProperties: { type: "string" } },
  },
  required: ["enabled"],
};
addChartValues(
  "monitoring",
  {
    prometheusRule: { enabled: false, labels: {}, annotations: {} },
    dashboard: { enabled: false, labels: {}, annotations: {} },
  },
  {
    type: "object",
    additionalProperties: false,
    properties: { prometheusRule: switches, dashboard: switches },
  },
);

/** metadata labels and annotations: fixed ones, then those of `.Values.monitoring.<key>`. */
const helmMetadata = (name, key, fixed) =>
  `metadata:
  name: ${name}
  namespace: ${NAMESPACE}
  labels:
${Object.entries(fixed)
  .map(([k, v]) => `    ${k}: ${JSON.stringify(v)}\n`)
  .join("")}    {{- with .Values.monitoring.${key}.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .Values.monitoring.${key}.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
`;
const template = name => new URL(`templates/${name}`, chart);
writeFileSync(
  template("prometheus-rule.yaml"),
  `{{- if .Values.monitoring.prometheusRule.enabled }}
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
${helmMetadata(RULE_NAME, "prometheusRule", APP_LABELS)}${helmLiteral(ruleSpec)}{{- end }}
`,
);
writeFileSync(
  template("grafana-dashboard.yaml"),
  `{{- if .Values.monitoring.dashboard.enabled }}
apiVersion: v1
kind: ConfigMap
${helmMetadata(DASHBOARD_NAME, "dashboard", { ...APP_LABELS, grafana_dashboard: "1" })}${helmLiteral(dashboardData)}{{- end }}
`,
);

console.log(
  `monitoring: alerts ${alertNames.join(", ")} (dist/admission-guard-alerts.yaml), dashboard "${dashboard.title}" and the PrometheusRule in dist/admission-guard-monitoring.yaml and the chart (monitoring.prometheusRule.enabled, monitoring.dashboard.enabled)`,
);
