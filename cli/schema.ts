// `check` reads a manifest as the API server would: before any rule runs, the object must be one
// the API accepts. Two published schemas answer that:
//  - kubernetes-models (the Kubernetes OpenAPI schemas compiled to validators): types, required
//    fields, enumerations — but it lets unknown fields through;
//  - @kubernetes/client-node's generated models (the same OpenAPI): every field each type has, to
//    find the fields Kubernetes does not know, such as a pod-level `readOnlyRootFilesystem`, which
//    `kubectl apply` refuses (strict field validation) and a lenient client silently drops.
// Where a misplaced field belongs is said when its sibling type has it (pod ↔ container
// securityContext, pod spec ↔ container, object ↔ metadata).
// Where OpenAPI and the API server disagree, the server decides (`serverView` below, and the
// agreement proved on a real kube-apiserver by test/cluster/95-check-vs-api-server.test.ts).
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import type { KubeObject } from "../lib/objects/pod";
import { apiVersionOf } from "../lib/workload-kinds/kind-spec";
import { BUILT_IN_WORKLOADS } from "../lib/workload-kinds/table";

interface Attribute {
  baseName: string;
  type: string;
}
type Model = { getAttributeTypeMap(): Attribute[] };
type Validatable = new (data: unknown) => { validate(): void };
interface AjvError {
  instancePath: string;
  message?: string;
  params?: { allowedValues?: unknown[]; missingProperty?: string };
}

/** Kinds `check` judges, with the group/version their manifests use. */
const KINDS: Record<string, string> = {
  Pod: "v1",
  ConfigMap: "v1",
  Secret: "v1",
  Namespace: "v1",
  ...Object.fromEntries(BUILT_IN_WORKLOADS.map(k => [k.kind, apiVersionOf(k)])),
};

// One generated file per model, loaded on demand: the package index pulls in the whole client.
const MODELS = join(dirname(require.resolve("@kubernetes/client-node")), "gen", "models");

function modelOf(type: string): Model | undefined {
  const file = join(MODELS, `${type}.js`);
  if (!/^\w+$/.test(type) || !existsSync(file)) return undefined;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const candidate = (require(file) as Record<string, unknown>)[type];
  return typeof candidate === "function" && "getAttributeTypeMap" in candidate
    ? (candidate as unknown as Model)
    : undefined;
}

// Asked for every object node of every manifest: each type's fields are read once.
const fieldsByType = new Map<string, Map<string, string>>();

/** A type's fields (name → type); empty for a type that is not a model (a string, a map). */
function fieldsOf(type: string): Map<string, string> {
  let fields = fieldsByType.get(type);
  if (!fields) {
    fields = new Map((modelOf(type)?.getAttributeTypeMap() ?? []).map(a => [a.baseName, a.type]));
    fieldsByType.set(type, fields);
  }
  return fields;
}

/** Where a field that is not in one type may belong instead: its sibling, and how to say where. */
const SIBLINGS: Record<string, { type: string; what: string; at: (parent: string) => string }> = {
  V1PodSecurityContext: {
    type: "V1SecurityContext",
    what: "each container's securityContext",
    at: parent => parent.replace(/securityContext$/, "containers[*].securityContext"),
  },
  V1SecurityContext: {
    type: "V1PodSecurityContext",
    what: "the pod's securityContext",
    at: parent =>
      parent.replace(
        /(initContainers|containers|ephemeralContainers)\[\d+\]\.securityContext$/,
        "securityContext",
      ),
  },
  V1PodSpec: {
    type: "V1Container",
    what: "each container",
    at: parent => `${parent ? `${parent}.` : ""}containers[*]`,
  },
  V1Container: {
    type: "V1PodSpec",
    what: "the pod spec",
    at: parent => parent.replace(/\.(initContainers|containers)\[\d+\]$/, ""),
  },
};

/** A field Kubernetes does not know, and where it belongs when its sibling type has it. */
export interface UnknownField {
  /** e.g. "spec.securityContext.readOnlyRootFilesystem" */
  path: string;
  /** e.g. { what: "each container's securityContext", at: "spec.containers[*].securityContext.readOnlyRootFilesystem" } */
  belongs?: { what: string; at: string };
}

/** Every field of `value` that its type (a client-node model name, e.g. "V1Pod") does not have. */
export function unknownFields(value: unknown, type = "V1Pod", path = ""): UnknownField[] {
  const out: UnknownField[] = [];
  walk(value, type, path, out);
  return out;
}

function walk(value: unknown, type: string, path: string, out: UnknownField[]): void {
  if (value === null || value === undefined) return;
  const list = /^Array<(.+)>$/.exec(type);
  if (list) {
    if (Array.isArray(value)) value.forEach((v, i) => walk(v, list[1], `${path}[${i}]`, out));
    return;
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) {
    if (typeof value === "object")
      for (const [k, v] of Object.entries(value))
        walk(v, map[1], `${path}[${JSON.stringify(k)}]`, out);
    return;
  }
  const known = fieldsOf(type);
  if (!known.size || typeof value !== "object" || Array.isArray(value)) return;
  for (const [key, child] of Object.entries(value as Record<string, unknown>)) {
    const where = path ? `${path}.${key}` : key;
    const childType = known.get(key);
    if (childType !== undefined) {
      walk(child, childType, where, out);
      continue;
    }
    const sibling = SIBLINGS[type];
    const belongs =
      sibling && fieldsOf(sibling.type).has(key)
        ? { what: sibling.what, at: `${sibling.at(path)}.${key}` }
        : !path && fieldsOf("V1ObjectMeta").has(key)
          ? { what: "metadata", at: `metadata.${key}` }
          : undefined;
    out.push({ path: where, belongs });
  }
}

// The API server decodes JSON into Go structs: a null is the Go zero value, a field of a plain Go
// string cannot tell "" from absent, and the server's own validation (not OpenAPI's `required`)
// decides what must be there. So before the OpenAPI validators judge an object, it is turned into
// what the server validates. Each entry below is the answer of a real 1.32 kube-apiserver.

/** Required by OpenAPI, not by the API server, which takes their zero value (or its default). */
const SERVER_FILLS: Record<string, Record<string, unknown>> = {
  V1ScaleIOVolumeSource: { secretRef: {} }, // not validated (the PSA fixtures leave it null)
  V1ISCSIVolumeSource: { lun: 0 }, // LUN 0 is valid
  V1HTTPHeader: { value: "" },
  V1Sysctl: { value: "" },
  V1PreferredSchedulingTerm: { preference: {} }, // an empty term
  V1PodFailurePolicy: { rules: [] },
  V1PodFailurePolicyOnPodConditionsPattern: { status: "True" }, // defaulted
};

/** Required by the API server, not by OpenAPI: absent, null and "" are all refused. */
const SERVER_REQUIRES: Record<string, string[]> = { V1Container: ["image"] };

/** Enumerations held in a plain Go string: "" is unset, which the server defaults (or allows). */
const EMPTY_IS_UNSET = new Set([
  "V1Container.imagePullPolicy",
  "V1Container.terminationMessagePolicy",
  "V1ContainerPort.protocol",
  "V1HTTPGetAction.scheme",
  "V1PodSpec.restartPolicy",
  "V1PodSpec.dnsPolicy",
  "V1Toleration.effect",
  "V1Toleration.operator",
  "V1DeploymentStrategy.type",
  "V1DaemonSetUpdateStrategy.type",
  "V1StatefulSetUpdateStrategy.type",
  "V1StatefulSetSpec.podManagementPolicy",
  "V1CronJobSpec.concurrencyPolicy",
]);

// A null list item decodes to the item type's zero value. For a string, number or boolean that is
// what check judges. An object item is left null, which check refuses: the server's zero object is
// an empty container, volume, toleration, env source... which its validation refuses too, while
// OpenAPI requires nothing of some of them (the exception: an empty imagePullSecrets entry).
const SCALAR_ZERO: Record<string, unknown> = { string: "", number: 0, boolean: false };

/**
 * A copy of `value` (of client-node type `type`, at `path`) as the API server validates it: null
 * fields and map entries dropped (a nil pointer, an absent field; a map entry's zero value — "" for
 * labels, 0 for a quantity — is as valid as none), null scalar list items made zero values, "" of
 * EMPTY_IS_UNSET dropped, SERVER_FILLS filled in; what SERVER_REQUIRES misses goes to `missing`.
 * Types the client does not model are only cleared of nulls.
 */
function serverView(value: unknown, type: string, path: string, missing: string[]): unknown {
  if (Array.isArray(value)) {
    const item = /^Array<(.+)>$/.exec(type)?.[1] ?? "";
    return value.map((v, i) =>
      serverView(v === null ? (SCALAR_ZERO[item] ?? null) : v, item, `${path}[${i}]`, missing),
    );
  }
  if (value === null || typeof value !== "object") return value;
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type)?.[1];
  const out: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(value)) {
    if (child === null || (child === "" && EMPTY_IS_UNSET.has(`${type}.${key}`))) continue;
    const where = map ? `${path}[${JSON.stringify(key)}]` : path ? `${path}.${key}` : key;
    out[key] = serverView(child, map ?? fieldsOf(type).get(key) ?? "", where, missing);
  }
  if (map) return out;
  for (const [key, zero] of Object.entries(SERVER_FILLS[type] ?? {}))
    out[key] ??= structuredClone(zero);
  for (const key of SERVER_REQUIRES[type] ?? [])
    if (out[key] === undefined || out[key] === "")
      missing.push(`${path || "(the object)"}: must have required property ${key}`);
  return out;
}

/** The server resets `status` on create (and keeps the stored one on update): only its types count. */
const ignoredInStatus = (err: AjvError) =>
  /^\/status(\/|$)/.test(err.instancePath) &&
  (err.params?.missingProperty !== undefined || err.params?.allowedValues !== undefined);

function typeProblems(obj: unknown, validatable: Validatable): string[] {
  try {
    new validatable(obj).validate();
    return [];
  } catch (e) {
    const errors = (e as { errors?: AjvError[] }).errors;
    if (!errors) return [(e as Error).message];
    return errors
      .filter(err => !ignoredInStatus(err))
      .map(err => {
        const path =
          err.instancePath
            .split("/")
            .filter(Boolean)
            .map((part, i) => (/^\d+$/.test(part) ? `[${part}]` : `${i ? "." : ""}${part}`))
            .join("") || "(the object)";
        const allowed = err.params?.allowedValues
          ? ` (${err.params.allowedValues.map(v => JSON.stringify(v)).join(", ")})`
          : "";
        return `${path}: ${err.message ?? "invalid"}${allowed}`;
      });
  }
}

/**
 * What the API server would refuse in an object, each problem naming its field; [] when it would
 * accept it, and also for kinds `check` does not judge (their schema is the API server's business).
 */
export function schemaProblems(obj: KubeObject): string[] {
  const kind = String(obj?.kind ?? "");
  const groupVersion = KINDS[kind];
  if (!groupVersion || obj.apiVersion !== groupVersion) return [];
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const models = require(`kubernetes-models/${groupVersion}`) as Record<string, Validatable>;
  const unknown = unknownFields(obj, `V1${kind}`).map(
    f =>
      `${f.path}: unknown field, which the API server refuses${f.belongs ? `; it belongs in ${f.belongs.what}: ${f.belongs.at}` : ""}`,
  );
  // Unknown fields are judged on the object as written: strict decoding refuses them, null or not.
  const missing: string[] = [];
  const validated = serverView(obj, `V1${kind}`, "", missing);
  return [...unknown, ...missing, ...typeProblems(validated, models[kind])];
}
