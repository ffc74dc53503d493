// KServe's InferenceService: its pods built as KServe's controller builds them, one role per
// component, the model's container from its ServingRuntime. Pure and total.
// Why, and what is not modelled: docs/adr/0020-inference-service-built-as-kserve-builds-it.md
import type { V1ObjectMeta, V1PodSpec } from "@kubernetes/client-node";
import type { KubeObject } from "../objects/pod";
import { isRecord } from "../objects/record";
import {
  chooseRuntime,
  describeFormat,
  type ModelFormat,
  type RuntimeSource,
} from "./serving-runtimes";
import type { PodRole } from "./roles";

export const COMPONENTS = ["predictor", "transformer", "explainer"] as const;

/** The container KServe takes from a runtime for the model, and the one it pairs with a transformer. */
const MODEL_CONTAINER = "kserve-container";
const TRANSFORMER_CONTAINER = "transformer-container";

/** The predictor frameworks KServe's defaulting turns into a model of that format. */
const FRAMEWORKS = [
  "sklearn",
  "xgboost",
  "tensorflow",
  "pytorch",
  "triton",
  "onnx",
  "huggingface",
  "pmml",
  "lightgbm",
  "paddle",
];

/** The fields of a Kubernetes PodSpec: what a component's inline spec contributes to its pods. */
const POD_SPEC_FIELDS = new Set([
  "activeDeadlineSeconds",
  "affinity",
  "automountServiceAccountToken",
  "containers",
  "dnsConfig",
  "dnsPolicy",
  "enableServiceLinks",
  "ephemeralContainers",
  "hostAliases",
  "hostIPC",
  "hostNetwork",
  "hostPID",
  "hostUsers",
  "hostname",
  "imagePullSecrets",
  "initContainers",
  "nodeName",
  "nodeSelector",
  "os",
  "overhead",
  "preemptionPolicy",
  "priority",
  "priorityClassName",
  "readinessGates",
  "resourceClaims",
  "resources",
  "restartPolicy",
  "runtimeClassName",
  "schedulerName",
  "schedulingGates",
  "securityContext",
  "serviceAccount",
  "serviceAccountName",
  "setHostnameAsFQDN",
  "shareProcessNamespace",
  "subdomain",
  "terminationGracePeriodSeconds",
  "tolerations",
  "topologySpreadConstraints",
  "volumes",
]);

/** The fields of a Container: what a model spec contributes to the runtime's kserve-container. */
const CONTAINER_FIELDS = new Set([
  "args",
  "command",
  "env",
  "envFrom",
  "image",
  "imagePullPolicy",
  "lifecycle",
  "livenessProbe",
  "name",
  "ports",
  "readinessProbe",
  "resizePolicy",
  "resources",
  "restartPolicy",
  "securityContext",
  "startupProbe",
  "stdin",
  "stdinOnce",
  "terminationMessagePath",
  "terminationMessagePolicy",
  "tty",
  "volumeDevices",
  "volumeMounts",
  "workingDir",
]);

/** A container list's merge key in a strategic merge patch (the rest of a container's lists are replaced). */
const CONTAINER_LIST_KEYS: Record<string, string> = {
  env: "name",
  ports: "containerPort",
  volumeMounts: "mountPath",
  volumeDevices: "devicePath",
};
/** The pod-level lists KServe merges by key (the runtime's first, the predictor's over them). */
const POD_LIST_KEYS: Record<string, string> = { volumes: "name", imagePullSecrets: "name" };

/** Runtimes whose GPU image KServe tags with "-gpu" when the container asks for GPUs. */
const GPU_TAGGED_RUNTIMES = new Set([
  "kserve-tensorflow-serving",
  "kserve-torchserve",
  "kserve-huggingfaceserver",
]);

/** Labels and annotations KServe does not copy to the pods (its default disallowed list, in part). */
const NOT_PROPAGATED = new Set([
  "kubectl.kubernetes.io/last-applied-configuration",
  "autoscaling.knative.dev/min-scale",
  "autoscaling.knative.dev/max-scale",
]);

/** Items of a user-sized list read at most (containers, env, volumes): KServe's own API caps none. */
const MAX_ITEMS = 1000;

const json = <T>(x: T): T => JSON.parse(JSON.stringify(x)) as T;
const list = (x: unknown): Record<string, unknown>[] =>
  Array.isArray(x) ? x.slice(0, MAX_ITEMS).filter(isRecord) : [];
const strings = (x: unknown): Record<string, string> => {
  const out: Record<string, string> = {};
  if (isRecord(x))
    for (const [k, v] of Object.entries(x).slice(0, MAX_ITEMS))
      if (typeof v === "string" && !NOT_PROPAGATED.has(k)) out[k] = v;
  return out;
};
const picked = (x: Record<string, unknown>, fields: Set<string>) => {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(x))
    if (fields.has(k) && v !== undefined && v !== null) out[k] = v;
  return json(out);
};

/** A keyed list merged as a strategic merge patch does: an item of `over` replaces `base`'s of the same key, the rest appended. */
function mergeKeyed(base: unknown, over: unknown, key: string): Record<string, unknown>[] {
  const out = list(base).map(x => ({ ...x }));
  for (const item of list(over)) {
    const at = out.findIndex(x => x[key] !== undefined && x[key] === item[key]);
    if (at >= 0) out[at] = { ...out[at], ...item };
    else out.push(item);
  }
  return out;
}

/** Maps merged recursively, lists replaced (a strategic merge of fields without a merge key). */
function mergeDeep(base: unknown, over: unknown): unknown {
  if (!isRecord(base) || !isRecord(over)) return over === undefined ? base : over;
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) out[k] = mergeDeep(base[k], v);
  return out;
}

/** The runtime's container with the InferenceService's fields over it (KServe's MergeRuntimeContainers). */
function mergeContainer(runtime: Record<string, unknown>, own: Record<string, unknown>) {
  const merged: Record<string, unknown> = { ...runtime };
  for (const [k, v] of Object.entries(own)) {
    if (k === "args") continue;
    merged[k] = CONTAINER_LIST_KEYS[k]
      ? mergeKeyed(runtime[k], v, CONTAINER_LIST_KEYS[k])
      : mergeDeep(runtime[k], v);
  }
  // KServe appends the InferenceService's args to the runtime's (a merge patch would replace them).
  const args = [
    ...(Array.isArray(runtime.args) ? runtime.args : []),
    ...(Array.isArray(own.args) ? own.args : []),
  ];
  if (args.length) merged.args = args;
  if (!merged.name) merged.name = runtime.name;
  return json(merged);
}

/** The runtime's pod-level fields with the predictor's over them (KServe's MergePodSpec). */
function mergePodSpec(runtime: Record<string, unknown>, own: Record<string, unknown>) {
  const merged: Record<string, unknown> = {};
  for (const k of ["nodeSelector", "affinity", "tolerations", "volumes", "imagePullSecrets"])
    if (runtime[k] !== undefined) merged[k] = runtime[k];
  for (const [k, v] of Object.entries(own))
    merged[k] = POD_LIST_KEYS[k]
      ? mergeKeyed(merged[k], v, POD_LIST_KEYS[k])
      : mergeDeep(merged[k], v);
  return json(merged);
}

/**
 * What filling the placeholders may add to one InferenceService's pods, in characters, over all
 * its components and containers. A runtime (a namespace admin's) may hold thousands of
 * {{.Annotations.x}} and the InferenceService 256 KiB of annotations: filled without a cap,
 * gigabytes. Past it the rest stay as written.
 */
export const MAX_PLACEHOLDER_CHARS = 1024 * 1024;

/** What is left of MAX_PLACEHOLDER_CHARS for one InferenceService build, shared by its containers. */
interface PlaceholderBudget {
  left: number;
}

/** KServe's placeholders in a runtime container ({{.Name}}, {{.Namespace}}, labels and annotations). */
function withPlaceholders(
  container: Record<string, unknown>,
  meta: V1ObjectMeta,
  namespace: string,
  budget: PlaceholderBudget,
) {
  const text = JSON.stringify(container).replace(
    /\{\{\s*\.(Name|Namespace|Labels\.([\w-]+)|Annotations\.([\w-]+))\s*\}\}/g,
    (all, what: string, label?: string, annotation?: string) => {
      const value =
        what === "Name"
          ? meta.name
          : what === "Namespace"
            ? (meta.namespace ?? namespace)
            : label
              ? meta.labels?.[label]
              : annotation
                ? meta.annotations?.[annotation]
                : undefined;
      if (typeof value !== "string") return all;
      const filled = JSON.stringify(value).slice(1, -1);
      if (filled.length > budget.left) return all;
      budget.left -= filled.length;
      return filled;
    },
  );
  return JSON.parse(text) as Record<string, unknown>;
}

/** KServe's image tag: runtimeVersion replaces it; a GPU container of a few runtimes gets "-gpu" (not for a digest). */
function taggedImage(image: unknown, runtimeVersion: unknown, runtime: string, gpus: boolean) {
  if (typeof image !== "string" || image.includes("@sha256:")) return image;
  const tag = /:([\w.\-_]*)$/;
  if (typeof runtimeVersion === "string" && runtimeVersion)
    return tag.test(image)
      ? image.replace(tag, `:${runtimeVersion}`)
      : `${image}:${runtimeVersion}`;
  if (gpus && tag.test(image) && GPU_TAGGED_RUNTIMES.has(runtime) && !image.endsWith("-gpu"))
    return `${image}-gpu`;
  return image;
}

const asksGpus = (c: Record<string, unknown>) => {
  const r = isRecord(c.resources) ? c.resources : {};
  return [r.limits, r.requests].some(
    l => isRecord(l) && Object.keys(l).some(k => k.endsWith("/gpu")),
  );
};

/** How many pods a component runs: minReplicas (default 1); 0 (scale to zero) counts as the 1 pod the first request starts. */
function replicasOf(component: Record<string, unknown>, at: string) {
  const n = (v: unknown) =>
    typeof v === "number" && Number.isSafeInteger(v) && v >= 0 ? v : undefined;
  const min = n(component.minReplicas);
  const max = n(component.maxReplicas);
  const pods = Math.max(1, min ?? 1);
  return {
    pods,
    field: `${at}.minReplicas`,
    ...(max !== undefined && max > pods ? { atMost: max } : {}),
  };
}

/** A message's field of the built pod spec, renamed to where the InferenceService says it. */
type Renames = [from: string, to: string][];

/** One component's built pod, or why it is not judged. */
interface Built {
  spec: Record<string, unknown>;
  metadata: V1ObjectMeta;
  renames: Renames;
  notes: string[];
}

const subject = (obj: KubeObject, namespace: string) =>
  `InferenceService ${obj.metadata?.namespace ?? namespace}/${obj.metadata?.name ?? ""}`;

/** The model a predictor names: its own `model`, or a framework spec KServe turns into one. */
function modelOf(predictor: Record<string, unknown>, at: string) {
  if (isRecord(predictor.model)) {
    const m = predictor.model;
    const f = isRecord(m.modelFormat) ? m.modelFormat : {};
    const format: ModelFormat = {
      name: typeof f.name === "string" ? f.name : "",
      ...(typeof f.version === "string" ? { version: f.version } : {}),
    };
    return {
      spec: m,
      format,
      runtime: typeof m.runtime === "string" ? m.runtime : undefined,
      field: `${at}.model`,
    };
  }
  for (const fw of FRAMEWORKS)
    if (isRecord(predictor[fw]))
      return {
        spec: predictor[fw] as Record<string, unknown>,
        format: { name: fw },
        runtime: undefined,
        field: `${at}.${fw}`,
      };
  return undefined;
}

/** The predictor's own containers kept (`others`) named where the InferenceService has them. */
function renameOthers(
  all: Record<string, unknown>[],
  others: Record<string, unknown>[],
  at: string,
  renames: Renames,
) {
  others.forEach((c, i) =>
    renames.push([`containers[${i}]`, `${at}.containers[${all.indexOf(c)}]`]),
  );
}

function buildComponent(
  obj: KubeObject,
  name: (typeof COMPONENTS)[number],
  component: Record<string, unknown>,
  cluster: RuntimeSource | undefined,
  namespace: string,
  budget: PlaceholderBudget,
): Built {
  const at = `spec.${name}`;
  const meta = (isRecord(obj.metadata) ? obj.metadata : {}) as V1ObjectMeta;
  const own = picked(component, POD_SPEC_FIELDS);
  const ownContainers = list(own.containers);
  const renames: Renames = [];
  const notes: string[] = [];
  const labels = { ...strings(meta.labels), ...strings(component.labels) };
  const annotations = { ...strings(meta.annotations), ...strings(component.annotations) };
  // The pods of the component's own pod fields with these containers, no runtime merged in.
  const ownPodsOnly = (containers: Record<string, unknown>[]): Built => ({
    spec: { ...own, containers },
    metadata: { labels, annotations },
    renames,
    notes,
  });
  const model = name === "predictor" ? modelOf(component, at) : undefined;
  if (isRecord(component.workerSpec))
    notes.push(
      `${subject(obj, namespace)}: ${at}.workerSpec (multi-node workers) is not judged at apply; its pods are judged when they are created`,
    );
  if (!model) {
    // An inline pod spec: the pods are what it says (KServe names a nameless first container kserve-container).
    ownContainers.forEach((_, i) => renames.push([`containers[${i}]`, `${at}.containers[${i}]`]));
    if (name === "explainer" && !ownContainers.length && isRecord(component.art))
      notes.push(
        `${subject(obj, namespace)}: ${at}.art's container comes from KServe's configuration and is not judged at apply`,
      );
    return ownPodsOnly(ownContainers);
  }
  // A model: its container comes from the runtime KServe chooses.
  const protocol =
    typeof model.spec.protocolVersion === "string" ? model.spec.protocolVersion : undefined;
  const choice = chooseRuntime(cluster, namespace, model.format, model.runtime, protocol);
  const others = ownContainers.filter(c => c.name !== TRANSFORMER_CONTAINER);
  // Judged on what is known: the predictor's own containers and pod fields, never the model's. A
  // transformer-container is left out too: the runtime's may complete it.
  const withoutModel = (): Built => {
    renameOthers(ownContainers, others, at, renames);
    return ownPodsOnly(others);
  };
  if (choice.state !== "found") {
    notes.push(
      `${subject(obj, namespace)}: the model's container (${model.field}, model format ${describeFormat(model.format)}) is not judged at apply: ${choice.reason}; it is judged when its pods are created`,
    );
    return withoutModel();
  }
  const rtSpec = isRecord(choice.runtime.spec) ? choice.runtime.spec : {};
  const rtContainers = list(rtSpec.containers);
  const rtWhere = (i: number) =>
    `${at} runtime ${choice.kind}/${choice.name} spec.containers[${i}]`;
  const modelIndex = rtContainers.findIndex(c => c.name === MODEL_CONTAINER);
  if (modelIndex < 0) {
    notes.push(
      `${subject(obj, namespace)}: ${choice.kind} ${choice.name} has no container named ${MODEL_CONTAINER}: KServe makes no pod for ${model.field}`,
    );
    return withoutModel();
  }
  const containers: Record<string, unknown>[] = [];
  const place = (c: Record<string, unknown>, where: string) => {
    renames.push([`containers[${containers.length}]`, where]);
    containers.push(c);
  };
  let main = mergeContainer(
    withPlaceholders(rtContainers[modelIndex], meta, namespace, budget),
    picked(model.spec, CONTAINER_FIELDS),
  );
  main = {
    ...main,
    image: taggedImage(main.image, model.spec.runtimeVersion, choice.name, asksGpus(main)),
  };
  if (main.image === undefined) delete main.image;
  // Named as the model: its fields override the runtime's (model.image, model.resources, ...).
  place(main, model.field);
  // A transformer container: the runtime's and the predictor's merged, or whichever there is.
  const rtT = rtContainers.findIndex(c => c.name === TRANSFORMER_CONTAINER);
  const ownT = ownContainers.findIndex(c => c.name === TRANSFORMER_CONTAINER);
  if (rtT >= 0 && ownT >= 0)
    place(
      mergeContainer(
        withPlaceholders(rtContainers[rtT], meta, namespace, budget),
        ownContainers[ownT],
      ),
      `${at}.containers[${ownT}]`,
    );
  else if (rtT >= 0)
    place(withPlaceholders(rtContainers[rtT], meta, namespace, budget), rtWhere(rtT));
  else if (ownT >= 0) place(ownContainers[ownT], `${at}.containers[${ownT}]`);
  rtContainers.forEach((c, i) => {
    if (c.name !== MODEL_CONTAINER && c.name !== TRANSFORMER_CONTAINER) place(json(c), rtWhere(i));
  });
  ownContainers.forEach((c, i) => {
    if (c.name !== TRANSFORMER_CONTAINER) place(c, `${at}.containers[${i}]`);
  });
  const spec = { ...mergePodSpec(rtSpec, own), containers };
  return {
    spec,
    metadata: {
      labels: { ...strings(rtSpec.labels), ...labels },
      annotations: { ...strings(rtSpec.annotations), ...annotations },
    },
    renames,
    notes,
  };
}

/** Replaces every field of the built pod (`<at>.spec.containers[0]`, `<at>.spec.x`) with where the InferenceService says it. */
function renamer(at: string, renames: Renames): (text: string) => string {
  const byContainer = new Map(renames);
  const prefix = at.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const pattern = new RegExp(
    `${prefix}\\.(?:spec\\.(containers\\[\\d+\\])|spec\\.|metadata\\.)`,
    "g",
  );
  return text =>
    text.includes(at)
      ? text.replace(pattern, (all, container?: string) =>
          container ? (byContainer.get(container) ?? `${at}.${container}`) : `${at}.`,
        )
      : text;
}

/** The roles of an InferenceService: one per component present, its pods built as KServe builds them. */
export function inferenceServiceRoles(
  obj: KubeObject,
  cluster: RuntimeSource | undefined,
  namespace = "",
): PodRole[] {
  const spec = isRecord(obj?.spec) ? obj.spec : undefined;
  if (!spec) return [];
  const ns = (typeof obj.metadata?.namespace === "string" && obj.metadata.namespace) || namespace;
  const roles: PodRole[] = [];
  // One cap per InferenceService, not per container: a runtime's containers would each add it.
  const budget: PlaceholderBudget = { left: MAX_PLACEHOLDER_CHARS };
  for (const name of COMPONENTS) {
    const component = spec[name];
    if (!isRecord(component)) continue;
    const at = `spec.${name}`;
    const built = buildComponent(obj, name, component, cluster, ns, budget);
    roles.push({
      name,
      template: {
        metadata: built.metadata,
        spec: built.spec as unknown as V1PodSpec,
        path: at,
      },
      ...replicasOf(component, at),
      rename: renamer(at, built.renames),
      ...(built.notes.length ? { notes: built.notes } : {}),
    });
  }
  return roles;
}
