// The build overlay's cloud-identity entry: what EKS (IRSA, Pod Identity), GKE Workload Identity and
// Azure Workload Identity need of the install so that the controller can read images in ECR,
// Artifact Registry and ACR with its own identity (images.cloudCredentials; docs/deploy.md, "Cloud
// registries"). Its input is a Helm values file, deploy/cloud-identity.yaml (or the overlay's third
// argument): the manifest gets what it says, and the chart has it as its defaults.
// - cloudIdentity.serviceAccountAnnotations: on the controller's ServiceAccount (Pepr's chart has no
//   value for them: its template is a literal object);
// - admission.podLabels and watcher.podLabels: Pepr's own chart values (the pods' labels), also in
//   the manifest; written once in the file (the watcher's is an alias of the admission pods');
// - cloudIdentity.projectedToken: a projected ServiceAccount token mounted in the admission and the
//   watcher containers, and the variable naming its file, for clusters without the clouds' webhooks.
//   Not through Pepr's admission.env / watcher.env: lists, which a Helm value replaces whole, the
//   module's settings with them.
// Both kinds of pod get the same identity: the watcher's report scan judges pods with the same
// rules, which read the same images (capabilities/security-context/image-user.ts), so the reports
// agree with admission. Empty (the defaults), it changes nothing.
import { readFileSync } from "node:fs";
import { posix } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { parse } from "yaml";
import { isRecord } from "../../lib/objects/record";
import type { OverlayEntry, Select, TemplateInsert } from "./apply";

/** The values file's shape (the keys the overlay reads; any other is an error). */
export interface CloudIdentityValues {
  serviceAccountAnnotations: Record<string, string>;
  podLabels: Record<string, string>;
  projectedToken: {
    enabled: boolean;
    audience: string;
    path: string;
    expirationSeconds: number;
    env: string;
  };
}

/** The variables the module reads a projected token's path from (lib/images/cloud). */
export const TOKEN_FILE_ENV = ["AWS_WEB_IDENTITY_TOKEN_FILE", "AZURE_FEDERATED_TOKEN_FILE"];
/** The kubelet refuses a projected token that lives shorter (Kubernetes' own minimum). */
export const MIN_EXPIRATION_SECONDS = 600;
export const TOKEN_VOLUME = "cloud-identity-token";
/** A file below a directory of its own (the mount), e.g. /var/run/secrets/<dir>/token. */
const TOKEN_PATH = /^(\/[A-Za-z0-9._-]+){2,}$/;
/** Pepr's selector labels on a kind of the controller's pods: a pod label may not change them. */
const selectorOf = (NAME: string, role: "admission" | "watcher") => ({
  app: role === "admission" ? NAME : `${NAME}-${role}`,
  "pepr.dev/controller": role,
});
const SELECTOR_LABELS = Object.keys(selectorOf("", "admission"));
const LABEL_VALUE = /^([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$/;
const NAME = /^([A-Za-z0-9.-]{1,253}\/)?[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$/;

/** deploy/cloud-identity.yaml, checked: every problem named with its key. */
export function readCloudIdentity(file: URL): CloudIdentityValues {
  const problems: string[] = [];
  const whole = parse(readFileSync(file, "utf8")) ?? {};
  const section = (value: unknown, key: string, known: string[]) => {
    if (value === undefined) return {};
    if (!isRecord(value)) {
      problems.push(`${key}: must be a mapping`);
      return {};
    }
    for (const k of Object.keys(value))
      if (!known.includes(k))
        problems.push(`${key}.${k}: not a key of this file (known: ${known})`);
    return value;
  };
  const top = section(whole, "(top)", ["cloudIdentity", "admission", "watcher"]);
  const cloud = section(top.cloudIdentity, "cloudIdentity", [
    "serviceAccountAnnotations",
    "projectedToken",
  ]);
  const admission = section(top.admission, "admission", ["podLabels"]);
  const watcher = section(top.watcher, "watcher", ["podLabels"]);
  const strings = (value: unknown, key: string, valid: (v: string) => boolean = () => true) => {
    const map = section(value, key, Object.keys(isRecord(value) ? value : {}));
    for (const [k, v] of Object.entries(map)) {
      if (!NAME.test(k))
        problems.push(`${key}: ${JSON.stringify(k)} is not a label or annotation key`);
      if (typeof v !== "string")
        problems.push(`${key}.${k}: must be a string (quote it: "${String(v)}")`);
      else if (!valid(v)) problems.push(`${key}.${k}: ${JSON.stringify(v)} is not a label value`);
    }
    return map as Record<string, string>;
  };
  const serviceAccountAnnotations = strings(
    cloud.serviceAccountAnnotations,
    "cloudIdentity.serviceAccountAnnotations",
  );
  const podLabels = strings(admission.podLabels, "admission.podLabels", v => LABEL_VALUE.test(v));
  for (const k of SELECTOR_LABELS)
    if (k in podLabels)
      problems.push(`admission.podLabels.${k}: Pepr's selector label, not to be set`);
  // The watcher's labels are the admission pods' (the file writes them once, as an alias): there
  // for `helm install -f`, which reads each chart value from the file.
  if (watcher.podLabels !== undefined && !isDeepStrictEqual(watcher.podLabels, podLabels))
    problems.push(
      "watcher.podLabels: must be admission.podLabels (the watcher judges the same images): write `podLabels: &podLabels` under admission and `podLabels: *podLabels` under watcher",
    );
  const token = section(cloud.projectedToken, "cloudIdentity.projectedToken", [
    "enabled",
    "audience",
    "path",
    "expirationSeconds",
    "env",
  ]);
  const projectedToken = {
    enabled: token.enabled ?? false,
    audience: token.audience ?? "",
    path: token.path ?? "/var/run/secrets/admission-guard/cloud-identity/token",
    expirationSeconds: token.expirationSeconds ?? 3600,
    env: token.env ?? "AWS_WEB_IDENTITY_TOKEN_FILE",
  };
  const at = (k: string) => `cloudIdentity.projectedToken.${k}`;
  if (typeof projectedToken.enabled !== "boolean")
    problems.push(`${at("enabled")}: must be true or false`);
  if (typeof projectedToken.audience !== "string")
    problems.push(`${at("audience")}: must be a string`);
  else if (projectedToken.enabled === true && !projectedToken.audience)
    problems.push(
      `${at("audience")}: needed with enabled (sts.amazonaws.com for AWS, api://AzureADTokenExchange for Azure)`,
    );
  if (typeof projectedToken.path !== "string" || !TOKEN_PATH.test(projectedToken.path))
    problems.push(`${at("path")}: must be an absolute file path below a directory of its own`);
  const seconds = projectedToken.expirationSeconds;
  if (!Number.isInteger(seconds) || (seconds as number) < MIN_EXPIRATION_SECONDS)
    problems.push(`${at("expirationSeconds")}: must be a whole number ≥ ${MIN_EXPIRATION_SECONDS}`);
  if (!TOKEN_FILE_ENV.includes(projectedToken.env as string))
    problems.push(`${at("env")}: must be one of ${TOKEN_FILE_ENV.join(", ")}`);
  if (problems.length) throw new Error(`${file.pathname}: ${problems.join("; ")}`);
  return {
    serviceAccountAnnotations,
    podLabels,
    projectedToken: projectedToken as CloudIdentityValues["projectedToken"],
  };
}

/** The projected token as the admission container gets it: its volume, mount and variable. */
export function tokenVolume({
  audience,
  path,
  expirationSeconds,
  env,
}: CloudIdentityValues["projectedToken"]) {
  return {
    volume: {
      name: TOKEN_VOLUME,
      projected: {
        sources: [
          { serviceAccountToken: { audience, expirationSeconds, path: posix.basename(path) } },
        ],
      },
    },
    mount: { name: TOKEN_VOLUME, mountPath: posix.dirname(path), readOnly: true },
    env: { name: env, value: path },
  };
}

const TOKEN = ".Values.cloudIdentity.projectedToken";

/** One kind of the controller's pods, each as Pepr names it: both carry the cloud identity. */
interface Pods {
  /** Its chart values' key (admission.*, watcher.*) and its `pepr.dev/controller` label. */
  role: "admission" | "watcher";
  deployment: string;
  container: string;
  template: string;
}

/** The admission pods, and the watcher's when the module has one (its Watch bindings). */
function identityPods(NAME: string, watcher: boolean): Pods[] {
  const admission: Pods = {
    role: "admission",
    deployment: NAME,
    container: "server",
    template: "admission-deployment.yaml",
  };
  const watcherPods: Pods = {
    role: "watcher",
    deployment: `${NAME}-watcher`,
    container: "watcher",
    template: "watcher-deployment.yaml",
  };
  return watcher ? [admission, watcherPods] : [admission];
}

/** Lines of a Deployment's template, at `indent`, when the chart's token is enabled. */
const whenToken = (
  template: string,
  before: string,
  indent: string,
  lines: string[],
): TemplateInsert => ({
  template,
  before,
  lines: [`{{- if ${TOKEN}.enabled }}`, ...lines, "{{- end }}"].map(line => indent + line),
  count: 1,
});

/**
 * `peprEnv`: package.json pepr.env, which Pepr writes into the containers first. A token variable it
 * sets is the admin's own and stays; the overlay owns the others (removes what it added before).
 * `watcher`: whether the module has a watcher (its Deployment and chart template).
 */
export function cloudIdentity(
  NAME: string,
  values: CloudIdentityValues,
  peprEnv: Record<string, string>,
  watcher: boolean,
): OverlayEntry {
  const { serviceAccountAnnotations: annotations, podLabels, projectedToken } = values;
  const token = projectedToken.enabled ? tokenVolume(projectedToken) : undefined;
  if (token && token.env.name in peprEnv)
    throw new Error(
      `cloudIdentity.projectedToken.env: package.json pepr.env sets ${token.env.name} too; keep one`,
    );
  const named = (add: { name: string }[], owns = [TOKEN_VOLUME]) => ({ items: { owns, add } });
  const ownedEnv = TOKEN_FILE_ENV.filter(name => !(name in peprEnv));
  const annotated = Object.keys(annotations);
  const labelled = Object.keys(podLabels);
  const pods = identityPods(NAME, watcher);
  const which = pods.map(p => p.role).join(" and ");
  return {
    name: "cloud-identity",
    why: "the controller reads ECR, Artifact Registry and ACR with its own workload identity (images.cloudCredentials), in the admission pods and in the watcher's report scan alike: IRSA, GKE and Azure Workload Identity read its ServiceAccount's annotations, Azure's webhook its pods' label; without those webhooks, a projected token and the variable naming it",
    summary:
      annotated.length || labelled.length || token
        ? `ServiceAccount annotations [${annotated.join(", ")}], ${which} pod labels [${labelled.join(", ")}], ${token ? `projected token in the ${which} pods (${token.env.name}=${token.env.value})` : "no projected token"}`
        : "no cloud identity (deploy/cloud-identity.yaml empty); chart values cloudIdentity.*, admission.podLabels, watcher.podLabels",
    relies: pods.flatMap(p =>
      Object.entries(selectorOf(NAME, p.role)).map(([label, value]) => ({
        select: { kind: "Deployment", name: p.deployment },
        path: ["spec", "template", "metadata", "labels", label],
        equals: value,
      })),
    ),
    patches: [
      {
        select: { kind: "ServiceAccount", name: NAME },
        path: ["metadata", "annotations"],
        set: annotated.length ? annotations : undefined,
      },
      ...pods.flatMap(p => {
        const select: Select = { kind: "Deployment", name: p.deployment };
        const container = ["spec", "template", "spec", "containers", { name: p.container }];
        return [
          {
            select,
            path: ["spec", "template", "metadata", "labels"],
            set: { ...selectorOf(NAME, p.role), ...podLabels },
          },
          {
            select,
            path: ["spec", "template", "spec", "volumes"],
            ...named(token ? [token.volume] : []),
          },
          { select, path: [...container, "volumeMounts"], ...named(token ? [token.mount] : []) },
          { select, path: [...container, "env"], ...named(token ? [token.env] : [], ownedEnv) },
        ];
      }),
    ],
    // Pepr's values.yaml has both keys, with or without a watcher.
    values: (["admission", "watcher"] as const).map(role => ({
      path: [role, "podLabels"],
      set: podLabels,
    })),
    newValues: [
      {
        key: "cloudIdentity",
        defaults: { serviceAccountAnnotations: annotations, projectedToken },
        schema: {
          type: "object",
          additionalProperties: false,
          properties: {
            serviceAccountAnnotations: {
              type: "object",
              additionalProperties: { type: "string" },
            },
            projectedToken: {
              type: "object",
              additionalProperties: false,
              properties: {
                enabled: { type: "boolean" },
                audience: { type: "string" },
                path: { type: "string", pattern: TOKEN_PATH.source },
                expirationSeconds: { type: "integer", minimum: MIN_EXPIRATION_SECONDS },
                env: { type: "string", enum: TOKEN_FILE_ENV },
              },
              required: ["enabled", "audience", "path", "expirationSeconds", "env"],
            },
          },
          required: ["serviceAccountAnnotations", "projectedToken"],
        },
      },
    ],
    // Pepr's ServiceAccount template is the literal object: its metadata, with the annotations.
    blocks: [
      {
        template: "service-account.yaml",
        key: "metadata:",
        lines: [
          `  name: ${NAME}`,
          "  namespace: pepr-system",
          "  {{- with .Values.cloudIdentity.serviceAccountAnnotations }}",
          "  annotations:",
          "    {{- toYaml . | nindent 4 }}",
          "  {{- end }}",
        ],
        count: 1,
      },
    ],
    // In each Deployment's template: the variable, before Pepr's own; the mount and the volume
    // before the extra ones.
    inserts: pods.flatMap(({ role, template }) => [
      whenToken(template, "            - name: PEPR_WATCH_MODE", "            ", [
        `- name: {{ ${TOKEN}.env }}`,
        `  value: {{ ${TOKEN}.path | quote }}`,
      ]),
      whenToken(
        template,
        `            {{- if .Values.${role}.extraVolumeMounts }}`,
        "            ",
        [
          `- name: ${TOKEN_VOLUME}`,
          `  mountPath: {{ dir ${TOKEN}.path | quote }}`,
          "  readOnly: true",
        ],
      ),
      whenToken(template, `        {{- if .Values.${role}.extraVolumes }}`, "        ", [
        `- name: ${TOKEN_VOLUME}`,
        "  projected:",
        "    sources:",
        "      - serviceAccountToken:",
        `          audience: {{ required "cloudIdentity.projectedToken.audience: sts.amazonaws.com (AWS) or api://AzureADTokenExchange (Azure)" ${TOKEN}.audience | quote }}`,
        `          expirationSeconds: {{ ${TOKEN}.expirationSeconds }}`,
        `          path: {{ base ${TOKEN}.path | quote }}`,
      ]),
    ]),
  };
}
