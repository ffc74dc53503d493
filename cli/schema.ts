// `check` reads a manifest as the API server would: before any rule runs, the object must be one
// the API accepts. Two published schemas answer that:
//  - kubernetes-models (the Kubernetes OpenAPI schemas compiled to validators): types, required
//    fields, enumerations — but it lets unknown fields through;
//  - @kubernetes/client-node's generated models (the same OpenAPI): every field each type has, to
//    find the fields Kubernetes does not know, such as a pod-level `readOnlyRootFilesystem`, which
//    `kubectl apply` refuses (strict field validation) and a lenient client silently drops.
// Where a misplaced field belongs is said when its sibling type has it (pod ↔ container
// securityContext, pod spec ↔ container, object ↔ metadata).
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import type { KubeObject } from "../lib/pod";

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
  ReplicationController: "v1",
  Deployment: "apps/v1",
  StatefulSet: "apps/v1",
  DaemonSet: "apps/v1",
  ReplicaSet: "apps/v1",
  Job: "batch/v1",
  CronJob: "batch/v1",
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

function typeProblems(obj: KubeObject, validatable: Validatable): string[] {
  try {
    new validatable(obj).validate();
    return [];
  } catch (e) {
    const errors = (e as { errors?: AjvError[] }).errors;
    if (!errors) return [(e as Error).message];
    return errors.map(err => {
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
  return [...unknown, ...typeProblems(obj, models[kind])];
}
