// The build overlay's monitoring entry: the module's alerts and Grafana dashboard (deploy/monitoring/)
// shipped with the build, opt-in.
// - dist/admission-guard-alerts.yaml: the plain Prometheus rule file (promtool, or a Prometheus
//   without the operator), with pepr-UUID replaced by pepr-<uuid> (the admission Service, Prometheus'
//   job for the chart's ServiceMonitor targets) and WEBHOOK_TIMEOUT by package.json
//   pepr.webhookTimeout;
// - dist/admission-guard-monitoring.yaml: a PrometheusRule and the dashboard's ConfigMap (label
//   grafana_dashboard: "1", for Grafana's dashboard sidecar), for `kubectl apply -f`;
// - the Helm chart: templates/prometheus-rule.yaml and templates/grafana-dashboard.yaml behind
//   values monitoring.prometheusRule.enabled and monitoring.dashboard.enabled (both false).
// The build fails if an expression names a metric the module does not export: every admission_guard_*
// name must be in lib/metrics METRIC_NAMES (a histogram's with _bucket, _sum or _count); otherwise
// only `up`, process_* and nodejs_* (prom-client's default metrics, lib/pepr/metrics-serve.ts).
import { existsSync, readFileSync } from "node:fs";
import { parse, parseDocument, stringify } from "yaml";
import { METRIC_NAMES, registry } from "../../lib/metrics";
import type { OverlayEntry } from "./apply";
import type { OverlayContext } from "./entries";

const NAMESPACE = "pepr-system"; // where Pepr's chart puts the controllers and their ServiceMonitors
const RULE_NAME = "admission-guard";
const DASHBOARD_NAME = "admission-guard-dashboard";
const DASHBOARD_KEY = "admission-guard.json";
const SEVERITIES = new Set(["critical", "warning", "info"]);
const HISTOGRAM_SUFFIXES = ["_bucket", "_sum", "_count"];
const APP_LABELS = { "app.kubernetes.io/part-of": "admission-guard" };

// ---- the metric names an expression uses ----

const HISTOGRAMS = new Set(
  registry
    .getMetricsAsArray()
    // prom-client types `type` as a numeric enum; at run time it is the name.
    .filter(m => String(m.type) === "histogram")
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
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""') // strings
    .replace(/\{[^}]*\}/g, "") // label matchers
    .replace(/\[[^\]]*\]/g, "") // ranges and subqueries
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, "$1") // label lists
    .replace(/\boffset\s+-?[\w$]+/g, "")
    .replace(/@\s*[\w.()]+/g, "")
    .replace(/\$\{?\w+\}?/g, "");
  const names = new Set<string>();
  for (const m of bare.matchAll(/(\d*\.?\d+(?:e[+-]?\d+)?)|([A-Za-z_:][\w:]*)(\s*\()?/gi)) {
    const [, number, name, call] = m;
    if (number || call || KEYWORDS.has(name.toLowerCase())) continue;
    names.add(name);
  }
  return [...names];
}

/** Why a metric name is not one the module's targets export, or undefined. */
function unexported(name: string): string | undefined {
  if (name === "up" || /^(process|nodejs)_/.test(name)) return undefined;
  if (!name.startsWith("admission_guard_"))
    return "not a metric of the module (admission_guard_*, up, process_*, nodejs_*)";
  if (EXPORTED.has(name)) return undefined;
  const suffix = HISTOGRAM_SUFFIXES.find(s => name.endsWith(s));
  if (suffix && HISTOGRAMS.has(name.slice(0, -suffix.length))) return undefined;
  return "not in lib/metrics/index.ts METRIC_NAMES";
}

/**
 * Text Helm renders as it is: each `{{ … }}` (Prometheus' and Grafana's templating) becomes
 * {{`{{ … }}`}}, a Go template raw string.
 */
function helmLiteral(text: string): string {
  const escaped = text.replace(/\{\{[\s\S]*?\}\}/g, m => {
    if (m.includes("`")) throw new Error(`cannot escape ${m} for Helm: it holds a backtick`);
    return `{{\`${m}\`}}`;
  });
  if (/\{\{(?!`)/.test(escaped.replace(/\{\{`[^`]*`\}\}/g, "")))
    throw new Error("an unclosed {{ is left for Helm");
  return escaped;
}

/** metadata labels and annotations: fixed ones, then those of `.Values.monitoring.<key>`. */
const helmMetadata = (name: string, key: string, fixed: Record<string, string>) =>
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

// As the chart's own (Pepr's admission.serviceMonitor / watcher.serviceMonitor), for kubectl users:
// the job is then the Service's name, which AdmissionGuardNoReadyReplica reads.
const serviceMonitor = (controller: string) => ({
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

interface Rule {
  alert?: string;
  record?: string;
  expr?: unknown;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface Panel {
  title?: string;
  panels?: Panel[];
  targets?: { refId?: string; expr?: unknown }[];
}

/** The entry, once the alerts and the dashboard name only metrics the module exports. */
export function monitoring({ pepr, monitoringSources }: OverlayContext): OverlayEntry {
  const read = (name: string) => {
    const file = new URL(name, monitoringSources);
    if (!existsSync(file)) throw new Error(`${file.pathname} is missing`);
    return readFileSync(file, "utf8");
  };
  if (!(Number(pepr.webhookTimeout) > 0))
    throw new Error("package.json pepr.webhookTimeout is not a number");
  /** The build's names and numbers in place of the sources' placeholders. */
  const substitute = (text: string) =>
    text
      .replaceAll("pepr-UUID", `pepr-${pepr.uuid}`)
      .replaceAll("WEBHOOK_TIMEOUT", String(pepr.webhookTimeout));

  const problems: string[] = [];
  const checkExpression = (where: string, expr: unknown) => {
    if (typeof expr !== "string" || !expr.trim()) return problems.push(`${where}: no expression`);
    for (const name of metricNames(expr)) {
      const why = unexported(name);
      if (why) problems.push(`${where}: ${name} is ${why}`);
    }
  };

  // ---- the alerts ----
  const alertsText = substitute(read("alerts.yaml"));
  const alertsDoc = parseDocument(alertsText);
  if (alertsDoc.errors.length) throw new Error(`alerts.yaml: ${alertsDoc.errors[0].message}`);
  const { groups } = alertsDoc.toJS() as { groups?: { rules?: Rule[] }[] };
  if (!Array.isArray(groups) || !groups.length) throw new Error("alerts.yaml has no groups");
  const alertNames: string[] = [];
  for (const group of groups)
    for (const rule of group.rules ?? []) {
      const name = rule.alert ?? rule.record;
      checkExpression(`alerts.yaml ${name}`, rule.expr);
      if (!rule.alert) continue;
      alertNames.push(rule.alert);
      if (!SEVERITIES.has(rule.labels?.severity ?? ""))
        problems.push(`alerts.yaml ${name}: severity must be one of ${[...SEVERITIES].join(", ")}`);
      for (const key of ["summary", "description"])
        if (!rule.annotations?.[key]) problems.push(`alerts.yaml ${name}: no ${key} annotation`);
      const runbook = `docs/operations.md#${rule.alert.toLowerCase()}`;
      if (rule.annotations?.runbook_url !== runbook)
        problems.push(`alerts.yaml ${name}: runbook_url must be ${runbook}`);
    }
  if (!alertNames.length) throw new Error("alerts.yaml has no alert");

  // ---- the dashboard ----
  let dashboard: { title?: string; panels?: Panel[] };
  try {
    dashboard = JSON.parse(substitute(read("dashboard.json")));
  } catch (e) {
    throw new Error(`dashboard.json: ${(e as Error).message}`);
  }
  const allPanels = (list: Panel[] | undefined): Panel[] =>
    (list ?? []).flatMap(p => [p, ...allPanels(p.panels)]);
  for (const panel of allPanels(dashboard.panels))
    for (const target of panel.targets ?? [])
      checkExpression(`dashboard.json panel "${panel.title}" ${target.refId}`, target.expr);

  if (problems.length)
    throw new Error(
      `an expression names a metric the module does not export (or a rule is incomplete):\n  ${problems.join("\n  ")}`,
    );

  // ---- the texts: dist/ and the chart ----
  alertsDoc.commentBefore =
    ` admission-guard's alerts (module ${pepr.uuid}), a Prometheus rule file: written by\n` +
    ` scripts/overlay/monitoring.ts from deploy/monitoring/alerts.yaml. As a PrometheusRule: the\n` +
    ` chart's monitoring.prometheusRule.enabled, or dist/admission-guard-monitoring.yaml.`;
  const yaml = (value: unknown) => stringify(value, { lineWidth: 0 });
  const dashboardLabels = { ...APP_LABELS, grafana_dashboard: "1" };
  const prometheusRule = {
    apiVersion: "monitoring.coreos.com/v1",
    kind: "PrometheusRule",
    metadata: { name: RULE_NAME, namespace: NAMESPACE, labels: APP_LABELS },
  };
  const dashboardMap = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: DASHBOARD_NAME, namespace: NAMESPACE, labels: dashboardLabels },
  };
  // The rules' spec and the ConfigMap's data: the same text in dist/ and the chart.
  const ruleSpec = yaml({ spec: { groups: parse(alertsText).groups } });
  const dashboardData = yaml({ data: { [DASHBOARD_KEY]: JSON.stringify(dashboard, null, 2) } });

  return {
    name: "monitoring",
    why: "the module's alerts and dashboard ship with it, opt-in, checked against the metrics it exports",
    summary: `alerts ${alertNames.join(", ")} (dist/admission-guard-alerts.yaml), dashboard "${dashboard.title}" and the PrometheusRule in dist/admission-guard-monitoring.yaml and the chart (monitoring.prometheusRule.enabled, monitoring.dashboard.enabled)`,
    files: {
      "admission-guard-alerts.yaml": alertsDoc.toString({ lineWidth: 0 }),
      "admission-guard-monitoring.yaml": `# Opt-in (kubectl apply -f): admission-guard's alerts as a PrometheusRule (the Prometheus
# operator's CRD; add the labels your Prometheus' ruleSelector asks for) and its Grafana dashboard
# as a ConfigMap for Grafana's dashboard sidecar (label grafana_dashboard: "1"). The Helm chart has
# both behind monitoring.prometheusRule.enabled and monitoring.dashboard.enabled, and ServiceMonitors
# like these behind admission.serviceMonitor.enabled and watcher.serviceMonitor.enabled.
${yaml(prometheusRule)}${ruleSpec}---
${yaml(dashboardMap)}${dashboardData}---
${yaml(serviceMonitor("admission"))}---
${yaml(serviceMonitor("watcher"))}`,
    },
    newValues: [
      {
        key: "monitoring",
        defaults: {
          prometheusRule: { enabled: false, labels: {}, annotations: {} },
          dashboard: { enabled: false, labels: {}, annotations: {} },
        },
        schema: {
          type: "object",
          additionalProperties: false,
          properties: { prometheusRule: switches, dashboard: switches },
        },
      },
    ],
    templates: {
      "prometheus-rule.yaml": `{{- if .Values.monitoring.prometheusRule.enabled }}
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
${helmMetadata(RULE_NAME, "prometheusRule", APP_LABELS)}${helmLiteral(ruleSpec)}{{- end }}
`,
      "grafana-dashboard.yaml": `{{- if .Values.monitoring.dashboard.enabled }}
apiVersion: v1
kind: ConfigMap
${helmMetadata(DASHBOARD_NAME, "dashboard", dashboardLabels)}${helmLiteral(dashboardData)}{{- end }}
`,
    },
  };
}
