// The build overlay: what admission-guard adds to what `pepr build` writes, as data. Each entry
// names what it adds or changes in dist/pepr-module-<uuid>.yaml (what `kubectl apply -f` installs)
// and in the Helm chart, so both install the same. scripts/build-overlay.ts applies them
// (scripts/overlay/apply.ts says how); names and numbers come from the module's code (lib/).
// `npx pepr deploy` writes Pepr's own objects from package.json, and none of these.
import {
  type Settings,
  NS_KEY_PREFIX,
  OWNED_BY_LABEL,
  SYSTEM_NAMESPACES,
} from "../../lib/settings";
import { ownedExemptionsNamespace } from "../../lib/exemptions";
import { DRAIN_PATH } from "../../lib/pepr/webhook-body-limit";
import { OPEN_REPORT_GVK } from "../../lib/reports/openreports";
import { type Route, webhookRules } from "../../lib/engine/routes";
import { stringify } from "yaml";
import { type KubeObject, type ListUpdate, type OverlayEntry, helmObjects } from "./apply";
import { monitoring } from "./monitoring";
import { type CloudIdentityValues, cloudIdentity } from "./cloud-identity";

/** package.json `pepr`, as far as the overlay reads it. */
export interface PeprConfig {
  uuid: string;
  webhookTimeout?: number;
  alwaysIgnore?: { namespaces?: string[] };
  admission?: { alwaysIgnore?: { namespaces?: string[] } };
  env?: Record<string, string>;
}

export interface OverlayContext {
  pepr: PeprConfig;
  /** The module's settings as the deployed controller reads them (lib/settings). */
  settings: Settings;
  /** Whether the module has a watcher (lib/settings backgroundBindingsWanted). */
  watcher: boolean;
  /** deploy/monitoring/, where the alerts and the dashboard come from. */
  monitoringSources: URL;
  /** The module's declaration of what runs where (lib/engine/routes.ts), as built. */
  routes: readonly Route[];
  /** How each webhook of Pepr's manifest reaches the controller: its path and CA (webhookClientOf). */
  webhookClients: Record<"mutate" | "validate", WebhookClient>;
  /** deploy/cloud-identity.yaml, read (scripts/overlay/cloud-identity.ts). */
  cloudIdentity: CloudIdentityValues;
}

export interface WebhookClient {
  path: string;
  caBundle: string;
}

/** Where Pepr installs the module. */
const NAMESPACE = "pepr-system";
/** The port the admission pods serve the webhook (and /metrics) on: Pepr's, fixed. */
export const WEBHOOK_PORT = 3000;
/** Measured by `npm run bench:scale -- --memory-limit 512`: at 100,000 pods the watcher settles at
 * 285 MiB (peak 357 MiB with churn); Pepr's 512Mi limit holds, the request is what it settles at. */
export const WATCHER_MEMORY = { request: "384Mi", limit: "512Mi" };
/** Covers the drain (lib/pepr/webhook-body-limit DRAIN_MS) and the hook's own 10 s timeout. */
const GRACE_SECONDS = 15;

/**
 * The preStop drain, run by the image's node inside the container: the server honours the drain
 * from a loopback peer only. It waits for the answer (the drain's 5 s) and fails the hook visibly
 * (a FailedPreStopHook Event) on an error or after 10 s. The certificate is the module's own, for
 * its Service name, so it is not verified on 127.0.0.1.
 */
const DRAIN_SCRIPT = [
  `const r=require("https").get({host:"127.0.0.1",port:${WEBHOOK_PORT},path:"${DRAIN_PATH}",rejectUnauthorized:false},`,
  `s=>{s.resume();s.on("end",()=>process.exit(s.statusCode===200?0:1))});`,
  `r.on("error",()=>process.exit(1));setTimeout(()=>process.exit(1),10000).unref()`,
].join("");
const PRE_STOP = { exec: { command: ["node", "-e", DRAIN_SCRIPT] } };

export function overlay(ctx: OverlayContext): OverlayEntry[] {
  const { pepr, settings } = ctx;
  const NAME = `pepr-${pepr.uuid}`;
  const admission = { kind: "Deployment", name: NAME };
  const webhookConfigurations = {
    kind: ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"],
    name: NAME,
  };
  /** The RBAC and the policies name the admission pods' ServiceAccount. */
  const serviceAccount = {
    select: admission,
    path: ["spec", "template", "spec", "serviceAccountName"],
    equals: NAME,
  };
  const ignored: ListUpdate = {
    // The system namespaces and Pepr's alwaysIgnore ones stay; settings ignoredNamespaces follow.
    keep: [
      ...SYSTEM_NAMESPACES,
      ...(pepr.alwaysIgnore?.namespaces ?? []),
      ...(pepr.admission?.alwaysIgnore?.namespaces ?? []),
    ],
    add: settings.ignoredNamespaces,
  };
  const credentials = credentialsRbac(NAME, settings);
  const openReports = ctx.watcher ? openReportsRbac(NAME, settings) : [];
  const exemptionsNamespace = settings.exemptions.enabled
    ? [ownedExemptionsNamespace(settings.exemptions.namespace, pepr.uuid)]
    : [];
  const watcherMemory = (path: string[], value: string) => ({
    select: { kind: "Deployment", name: `${NAME}-watcher` },
    path: ["spec", "template", "spec", "containers", "*", "resources", ...path],
    set: value,
  });
  const budget = {
    apiVersion: "policy/v1",
    kind: "PodDisruptionBudget",
    metadata: { name: NAME, namespace: NAMESPACE },
    spec: {
      minAvailable: 1,
      selector: { matchLabels: { app: NAME, "pepr.dev/controller": "admission" } },
    },
  };
  const armingOnly = armingGuard(NAME);
  const exactRules = (["mutate", "validate"] as const).map(step => ({
    step,
    rules: webhookRules(ctx.routes, step),
    kind: step === "mutate" ? "MutatingWebhookConfiguration" : "ValidatingWebhookConfiguration",
    template: step === "mutate" ? "mutation-webhook.yaml" : "validation-webhook.yaml",
  }));
  const namespaceKeys = namespaceKeysPolicy(NAME);
  const admins = settings.namespaceKeysPolicy;
  const namespaceKeysObjects = namespaceKeys.objects(
    notAnAdmin(JSON.stringify(admins.adminUsers), JSON.stringify(admins.adminGroups)),
  );
  const webhookPolicy = webhookNetworkPolicy(NAME);

  return [
    {
      name: "webhook-client",
      why: 'Pepr 1.1.4 makes the chart\'s webhooks by replacing every "10" in them with the timeout value, its secret API path and its CA included: with any admission.webhookTimeout but 10, a path or CA that held "10" no longer reaches the controller',
      summary: "the chart's webhooks reach the controller at the manifest's path, with its CA",
      blocks: exactRules.flatMap(r => [
        {
          template: r.template,
          key: "      caBundle: >-",
          lines: [`        ${ctx.webhookClients[r.step].caBundle}`],
          count: 1,
        },
        {
          template: r.template,
          key: "        path: >-",
          lines: [`          ${ctx.webhookClients[r.step].path}`],
          count: 1,
        },
      ]),
    },
    {
      name: "webhook-reinvocation",
      why: "a later mutating webhook (a sidecar injector: Istio, Linkerd, Vault) calls ours again, so its containers get the same fixes; Pepr writes no reinvocationPolicy (Never)",
      summary: "reinvocationPolicy IfNeeded on the mutating webhooks",
      patches: [
        {
          select: { kind: "MutatingWebhookConfiguration", name: NAME },
          path: ["webhooks", "*", "reinvocationPolicy"],
          set: "IfNeeded",
        },
      ],
      // Pepr 1.1.4 writes one mutating webhook, one kind of action.
      inserts: [
        {
          template: "mutation-webhook.yaml",
          before: "    sideEffects: None",
          lines: ["    reinvocationPolicy: IfNeeded"],
          count: 1,
        },
      ],
    },
    {
      name: "webhook-rules",
      why: "Pepr binds a whole API group where the module judges two kinds or more of it (one filter pass on every request instead of one per kind, lib/engine/routes.ts bindingsOf) and writes a rule for every resource of that group: the API server sends only the declared kinds",
      summary:
        exactRules.map(r => `${r.rules.length} ${r.step} rules`).join(", ") +
        ", one per declared kind",
      patches: exactRules
        .filter(r => r.rules.length)
        .map(r => ({
          select: { kind: r.kind, name: NAME },
          path: ["webhooks", "*", "rules"],
          set: r.rules,
        })),
      blocks: exactRules
        .filter(r => r.rules.length)
        .map(r => ({
          template: r.template,
          key: "    rules:",
          // At Pepr's indentation and quoting.
          lines: stringify(r.rules, { singleQuote: true })
            .trimEnd()
            .split("\n")
            .map(line => `      ${line}`),
          count: 1,
        })),
    },
    {
      name: "image-credentials-rbac",
      why: "the module reads the docker config Secrets named by images.credentialsSecrets, exactly those, and pods' own pull secrets only with images.workloadPullSecrets",
      summary: credentials.length
        ? `get on Secrets: ${credentials.map(o => `${o.kind} ${o.metadata.name}`).join(", ")}`
        : "no Secret access granted (images.credentialsSecrets empty, images.workloadPullSecrets off)",
      relies: [serviceAccount],
      objects: {
        add: credentials,
        owns: ["Role", "RoleBinding"]
          .map(kind => ({ kind, name: `${NAME}-image-credentials` }))
          .concat(
            ["ClusterRole", "ClusterRoleBinding"].map(kind => ({
              kind,
              name: `${NAME}-workload-pull-secrets`,
            })),
          ),
        template: "image-credentials-role.yaml",
      },
    },
    {
      name: "openreports-rbac",
      why: "the watcher writes openreports.io Reports only when reports.api asks for them (openreports, both, auto): the grant comes with the setting",
      summary: openReports.length
        ? `get, create, patch, delete on openreports.io reports (reports.api=${settings.reports.api})`
        : "no openreports.io access granted (reports.api=wgpolicyk8s, or no reports)",
      relies: [serviceAccount],
      objects: {
        add: openReports,
        owns: ["ClusterRole", "ClusterRoleBinding"].map(kind => ({
          kind,
          name: `${NAME}-openreports`,
        })),
        template: "openreports-role.yaml",
      },
    },
    {
      name: "watcher-memory",
      why: "the watcher caches what the reports need of every Pod and workload: request what it settles at (docs/bench.md), Pepr's limit holds",
      summary: ctx.watcher
        ? `watcher request ${WATCHER_MEMORY.request}, limit ${WATCHER_MEMORY.limit}`
        : "no watcher in this build (reports and events off)",
      patches: ctx.watcher
        ? [
            watcherMemory(["requests", "memory"], WATCHER_MEMORY.request),
            watcherMemory(["limits", "memory"], WATCHER_MEMORY.limit),
          ]
        : [],
      values: ctx.watcher
        ? [
            { path: ["watcher", "resources", "requests", "memory"], set: WATCHER_MEMORY.request },
            { path: ["watcher", "resources", "limits", "memory"], set: WATCHER_MEMORY.limit },
          ]
        : [],
    },
    {
      name: "admission-drain",
      why: "an admission pod stops taking requests before Pepr closes its server, so no request fails on a kept-alive connection (measured on the node tier: 1 in ~550 during a rollout)",
      summary: `preStop drain (exec, loopback only), terminationGracePeriodSeconds ${GRACE_SECONDS}`,
      patches: [
        {
          select: admission,
          path: ["spec", "template", "spec", "terminationGracePeriodSeconds"],
          set: GRACE_SECONDS,
        },
        {
          select: admission,
          path: [
            "spec",
            "template",
            "spec",
            "containers",
            { name: "server" },
            "lifecycle",
            "preStop",
          ],
          set: PRE_STOP,
        },
      ],
      values: [{ path: ["admission", "terminationGracePeriodSeconds"], set: GRACE_SECONDS }],
      inserts: [
        {
          template: "admission-deployment.yaml",
          before: "          ports:",
          // The manifest's hook, at the container's indentation; quoted, each string stays a line.
          lines: stringify(
            { lifecycle: { preStop: PRE_STOP } },
            { defaultStringType: "QUOTE_DOUBLE", defaultKeyType: "PLAIN", lineWidth: 0 },
          )
            .trimEnd()
            .split("\n")
            .map(line => `          ${line}`),
          count: 1,
        },
      ],
    },
    {
      name: "admission-disruption-budget",
      why: "a node drain never takes both admission replicas at once",
      summary: "PodDisruptionBudget minAvailable 1",
      relies: [
        {
          select: admission,
          path: ["spec", "template", "metadata", "labels", "app"],
          equals: NAME,
        },
        {
          select: admission,
          path: ["spec", "template", "metadata", "labels", "pepr.dev/controller"],
          equals: "admission",
        },
      ],
      objects: {
        add: [budget],
        owns: [{ kind: "PodDisruptionBudget", name: NAME }],
        template: "admission-pdb.yaml",
        helmIf: ".Values.admission.enabled",
      },
    },
    {
      name: "webhook-arming-guard",
      why: "the controller may patch its webhook configurations to arm them (lib/webhooks); this ValidatingAdmissionPolicy lets it change nothing in them but failurePolicy",
      summary: `ValidatingAdmissionPolicy ${armingOnly[0].metadata.name}`,
      relies: [serviceAccount, { select: webhookConfigurations }],
      objects: {
        add: armingOnly,
        owns: armingOnly.map(o => ({ kind: o.kind, name: o.metadata.name })),
        template: "arming-guard.yaml",
        helmIf: ".Values.admission.enabled",
      },
    },
    // Helm refuses to adopt a namespace it did not create; `kubectl apply` says `configured` then.
    {
      name: "exemptions-namespace",
      why: "Exemptions count only in a namespace labelled as the install's own (lib/exemptions/index.ts), so the install creates it; one a tenant made first grants nothing",
      summary: exemptionsNamespace.length
        ? `namespace ${settings.exemptions.namespace} owned by the install`
        : "no Exemptions namespace (exemptions off)",
      objects: {
        add: exemptionsNamespace,
        owns: [{ kind: "Namespace", labels: { [OWNED_BY_LABEL]: pepr.uuid } }],
        template: "exemptions-namespace.yaml",
      },
    },
    {
      name: "ignored-namespaces",
      why: "the API server never sends objects of settings ignoredNamespaces, so a CNI, CSI or GPU-operator namespace keeps working while the controller is down",
      summary: `ignored namespaces [${settings.ignoredNamespaces.join(", ")}] in the webhooks' namespaceSelector`,
      patches: [
        {
          select: webhookConfigurations,
          path: [
            "webhooks",
            "*",
            "namespaceSelector",
            "matchExpressions",
            { key: "kubernetes.io/metadata.name", operator: "NotIn" },
            "values",
          ],
          list: ignored,
        },
      ],
      values: [{ path: ["additionalIgnoredNamespaces"], list: ignored }],
    },
    // Why: docs/adr/0027-namespace-keys-are-admins-by-default.md. After the Exemptions namespace:
    // the install labels it (owned-by) before the policy exists, so a first `kubectl apply` passes
    // whoever runs it; the binding follows its policy in the same apply.
    {
      name: "namespace-keys-policy",
      why: `only admins may set, change or remove ${NS_KEY_PREFIX}* namespace labels and annotations, the module's per-namespace choices and its ownership label: they give more than Pod Security's labels (registries, image volumes, ServiceAccount, secret access, quota)`,
      summary: admins.enabled
        ? `ValidatingAdmissionPolicy ${namespaceKeys.name} in the manifest (admins: groups [${admins.adminGroups.join(", ")}], users [${admins.adminUsers.join(", ")}]); chart namespaceKeysPolicy.enabled true`
        : `no namespace-keys policy in the manifest (namespaceKeysPolicy.enabled false): dist/admission-guard-namespace-keys-vap.yaml, chart namespaceKeysPolicy.enabled false`,
      objects: {
        add: admins.enabled ? namespaceKeysObjects : [],
        owns: namespaceKeysObjects.map(o => ({ kind: o.kind, name: o.metadata.name })),
      },
      files: {
        "admission-guard-namespace-keys-vap.yaml": `# The namespace-keys policy on its own (it is in the manifest unless namespaceKeysPolicy.enabled
# was false at build): only the admins below may set admission-guard.dev/* namespace labels and
# annotations. Edit the lists to your cluster's admin groups and users before applying.
${helmObjects(namespaceKeysObjects)}`,
      },
      newValues: [
        {
          key: "namespaceKeysPolicy",
          defaults: {
            enabled: admins.enabled,
            adminGroups: admins.adminGroups,
            adminUsers: admins.adminUsers,
          },
          schema: {
            type: "object",
            additionalProperties: false,
            properties: { enabled: { type: "boolean" }, adminGroups: strings, adminUsers: strings },
            required: ["enabled"],
          },
        },
      ],
      templates: {
        "namespace-keys-policy.yaml": helmObjects(
          namespaceKeys.objects("CONDITION"),
          ".Values.namespaceKeysPolicy.enabled",
        ).replace(
          "expression: CONDITION",
          `expression: {{ printf ${JSON.stringify(notAnAdmin("%s", "%s"))} (toJson .Values.namespaceKeysPolicy.adminUsers) (toJson .Values.namespaceKeysPolicy.adminGroups) | quote }}`,
        ),
      },
    },
    {
      name: "webhook-network-policy",
      why: "opt-in: only admin-listed sources (the API server, metrics scrapers) reach the admission pods' port; anyone else who reaches the Service can still open connections and send requests, bounded but not free",
      summary: `opt-in NetworkPolicy ${webhookPolicy.name} (dist/admission-guard-webhook-networkpolicy.yaml, chart webhookNetworkPolicy.enabled with cidrs / peers)`,
      files: {
        "admission-guard-webhook-networkpolicy.yaml": `# Opt-in (kubectl apply -f): only the sources below reach the admission pods' port ${WEBHOOK_PORT}.
# Replace API-SERVER-CIDR with the addresses the API server calls webhooks from (docs/deploy.md,
# "Who may reach the webhook port"): until then this file does not apply. Add your metrics
# scraper (an ipBlock, or a namespaceSelector/podSelector peer) or /metrics is cut off too.
# Leave a source out and, once the webhooks are armed (failurePolicy Fail), pod writes are refused.
${helmObjects(webhookPolicy.objects([{ ipBlock: { cidr: "API-SERVER-CIDR" } }]))}`,
      },
      newValues: [
        {
          key: "webhookNetworkPolicy",
          defaults: { enabled: false, cidrs: [], peers: [] },
          schema: {
            type: "object",
            additionalProperties: false,
            properties: {
              enabled: { type: "boolean" },
              cidrs: strings,
              peers: { type: "array", items: { type: "object" } },
            },
            required: ["enabled"],
          },
        },
      ],
      templates: {
        "webhook-network-policy.yaml": helmObjects(
          webhookPolicy.objects("SOURCES"),
          ".Values.webhookNetworkPolicy.enabled",
        )
          // An ingress rule without sources admits every source: refuse to render one.
          .replace(
            /^/,
            `{{- if and .Values.webhookNetworkPolicy.enabled (not (or .Values.webhookNetworkPolicy.cidrs .Values.webhookNetworkPolicy.peers)) }}
{{- fail "webhookNetworkPolicy.enabled needs cidrs or peers: the API server's addresses at least (docs/deploy.md)" }}
{{- end }}
`,
          )
          .replace(
            "from: SOURCES",
            `from:
        {{- range .Values.webhookNetworkPolicy.cidrs }}
        - ipBlock:
            cidr: {{ . | quote }}
        {{- end }}
        {{- with .Values.webhookNetworkPolicy.peers }}
        {{- toYaml . | nindent 8 }}
        {{- end }}`,
          ),
      },
    },
    cloudIdentity(NAME, ctx.cloudIdentity, pepr.env ?? {}, ctx.watcher),
    monitoring(ctx),
  ];
}

/** Ingress to the admission pods' port from `from` only (NetworkPolicy peers). */
function webhookNetworkPolicy(NAME: string) {
  const name = `${NAME}-webhook`;
  const objects = (from: object[] | string): KubeObject[] => [
    {
      apiVersion: "networking.k8s.io/v1",
      kind: "NetworkPolicy",
      metadata: { name, namespace: NAMESPACE },
      spec: {
        podSelector: { matchLabels: { app: NAME, "pepr.dev/controller": "admission" } },
        policyTypes: ["Ingress"],
        ingress: [{ ports: [{ port: WEBHOOK_PORT, protocol: "TCP" }], from }],
      },
    },
  ];
  return { name, objects };
}

const strings = { type: "array", items: { type: "string" } };

/** images.credentialsSecrets: `get` on exactly those Secrets; images.workloadPullSecrets: on all. */
function credentialsRbac(NAME: string, settings: Settings): KubeObject[] {
  const subjects = [{ kind: "ServiceAccount", name: NAME, namespace: NAMESPACE }];
  const grant = (kind: "Role" | "ClusterRole", name: string, rule: object): KubeObject[] => [
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind,
      metadata: kind === "Role" ? { name, namespace: NAMESPACE } : { name },
      rules: [{ apiGroups: [""], resources: ["secrets"], ...rule, verbs: ["get"] }],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: `${kind}Binding`,
      metadata: kind === "Role" ? { name, namespace: NAMESPACE } : { name },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind, name },
      subjects,
    },
  ];
  const { credentialsSecrets, workloadPullSecrets } = settings.images;
  return [
    ...(credentialsSecrets.length
      ? grant("Role", `${NAME}-image-credentials`, { resourceNames: credentialsSecrets })
      : []),
    ...(workloadPullSecrets ? grant("ClusterRole", `${NAME}-workload-pull-secrets`, {}) : []),
  ];
}

/**
 * reports.api openreports, both or auto: the watcher (the module's ServiceAccount) reads, writes
 * and removes each namespace's Report, as it does PolicyReports (package.json pepr.rbac). It finds
 * whether the API is served by discovery, which needs no rule.
 */
function openReportsRbac(NAME: string, settings: Settings): KubeObject[] {
  if (!settings.reports.enabled || settings.reports.api === "wgpolicyk8s") return [];
  const name = `${NAME}-openreports`;
  return [
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name },
      rules: [
        {
          apiGroups: [OPEN_REPORT_GVK.group],
          resources: [OPEN_REPORT_GVK.plural],
          verbs: ["get", "create", "patch", "delete"],
        },
      ],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name },
      subjects: [{ kind: "ServiceAccount", name: NAME, namespace: NAMESPACE }],
    },
  ];
}

/** The ValidatingAdmissionPolicy and its binding that let the module only arm its webhooks. */
function armingGuard(NAME: string): KubeObject[] {
  const POLICY = `${NAME}-arming-only`;
  // A field the API server may leave unset, the same before and after (unset in both, or equal).
  const same = (field: string) =>
    `(has(o.${field}) ? has(w.${field}) && o.${field} == w.${field} : !has(w.${field}))`;
  const unchangedButFailurePolicy = [
    "size(object.webhooks) == size(oldObject.webhooks)",
    `object.webhooks.all(w, oldObject.webhooks.exists(o, ${[
      "o.name == w.name",
      "o.clientConfig == w.clientConfig",
      "o.sideEffects == w.sideEffects",
      "o.admissionReviewVersions == w.admissionReviewVersions",
      ...[
        "rules",
        "namespaceSelector",
        "objectSelector",
        "timeoutSeconds",
        "matchPolicy",
        "matchConditions",
      ].map(same),
    ].join(" && ")}))`,
  ].join(" && ");
  return [
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicy",
      metadata: { name: POLICY },
      spec: {
        failurePolicy: "Fail",
        matchConstraints: {
          resourceRules: [
            {
              apiGroups: ["admissionregistration.k8s.io"],
              apiVersions: ["v1"],
              operations: ["UPDATE"],
              resources: ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
              resourceNames: [NAME],
            },
          ],
        },
        matchConditions: [
          {
            name: "the-module-itself",
            expression: `request.userInfo.username == "system:serviceaccount:${NAMESPACE}:${NAME}"`,
          },
        ],
        validations: [
          {
            expression: unchangedButFailurePolicy,
            message: `admission-guard's controller (ServiceAccount ${NAMESPACE}/${NAME}) may change only its webhooks' failurePolicy (arming); anything else is for an admin`,
            reason: "Forbidden",
          },
        ],
      },
    },
    policyBinding(POLICY),
  ];
}

const policyBinding = (policyName: string): KubeObject => ({
  apiVersion: "admissionregistration.k8s.io/v1",
  kind: "ValidatingAdmissionPolicyBinding",
  metadata: { name: policyName },
  spec: { policyName, validationActions: ["Deny"] },
});

/** `!(user in [...]) && !(groups ∩ [...])`, from CEL list literals (JSON). */
const notAnAdmin = (users: string, groups: string) =>
  `!(request.userInfo.username in ${users}) && !(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ${groups}))`;

/** The namespace-keys policy: only those matching `notAnAdmin` are held to it. */
function namespaceKeysPolicy(NAME: string) {
  const name = `${NAME}-namespace-keys`;
  /** The CEL that says a map's module keys are the same in the object and the stored one. */
  const keysUnchanged = (field: string) => {
    const ours = `.filter(k, k.startsWith("${NS_KEY_PREFIX}"))`;
    const holds = (from: string, to: string) =>
      `(!has(${from}.metadata.${field}) || ${from}.metadata.${field}${ours}.all(k, has(${to}.metadata.${field}) && k in ${to}.metadata.${field} && ${to}.metadata.${field}[k] == ${from}.metadata.${field}[k]))`;
    // On CREATE there is no stored one: no module key may be set.
    return `oldObject == null ? (!has(object.metadata.${field}) || size(object.metadata.${field}${ours}) == 0) : (${holds("object", "oldObject")} && ${holds("oldObject", "object")})`;
  };
  const objects = (matchExpression: string): KubeObject[] => [
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicy",
      metadata: { name },
      spec: {
        failurePolicy: "Fail",
        matchConstraints: {
          resourceRules: [
            {
              apiGroups: [""],
              apiVersions: ["v1"],
              operations: ["CREATE", "UPDATE"],
              resources: ["namespaces"],
            },
          ],
        },
        matchConditions: [{ name: "not-an-admin", expression: matchExpression }],
        validations: ["labels", "annotations"].map(field => ({
          expression: keysUnchanged(field),
          message: `admission-guard/namespace-keys: only an admin may set, change or remove ${NS_KEY_PREFIX}* namespace ${field}. Fix: ask a cluster admin (kubectl label|annotate namespace <name> ${NS_KEY_PREFIX}<key>=<value>)`,
          reason: "Forbidden",
        })),
      },
    },
    policyBinding(name),
  ];
  return { name, objects };
}
