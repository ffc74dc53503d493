// Test support for the security-context tests: is an object a Pod the Kubernetes API accepts?
//  - kubernetes-models validates types, enums and required fields, but (4.5.1) accepts unknown
//    fields: a pod-level readOnlyRootFilesystem passes its validate();
//  - so unknown fields are found with the API's own model metadata (@kubernetes/client-node's
//    generated attributeTypeMap, OpenAPI v1.34), walking the object field by field.
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { Pod } from "kubernetes-models/v1";

interface Attribute {
  baseName: string;
  type: string;
}
type ModelClass = { getAttributeTypeMap(): Attribute[] };

// One generated file per model; loading only the few a Pod needs keeps the test fast (the package
// index pulls in the whole client).
const MODELS = join(dirname(require.resolve("@kubernetes/client-node")), "gen", "models");

function modelOf(type: string): ModelClass | undefined {
  const file = join(MODELS, `${type}.js`);
  if (!/^\w+$/.test(type) || !existsSync(file)) return undefined;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const candidate = (require(file) as Record<string, unknown>)[type];
  return typeof candidate === "function" && "getAttributeTypeMap" in candidate
    ? (candidate as unknown as ModelClass)
    : undefined;
}

/** Paths of fields the API does not know, e.g. ["spec.securityContext.readOnlyRootFilesystem"]. */
export function unknownFields(value: unknown, type = "V1Pod", path = ""): string[] {
  const out: string[] = [];
  if (value === null || value === undefined) return out;
  const list = /^Array<(.+)>$/.exec(type);
  if (list) {
    if (Array.isArray(value))
      value.forEach((v, i) => out.push(...unknownFields(v, list[1], `${path}[${i}]`)));
    return out;
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) {
    if (typeof value === "object")
      for (const [k, v] of Object.entries(value))
        out.push(...unknownFields(v, map[1], `${path}[${JSON.stringify(k)}]`));
    return out;
  }
  const model = modelOf(type);
  if (!model || typeof value !== "object" || Array.isArray(value)) return out;
  const known = new Map(model.getAttributeTypeMap().map(a => [a.baseName, a.type]));
  for (const [key, child] of Object.entries(value as Record<string, unknown>)) {
    const where = path ? `${path}.${key}` : key;
    const childType = known.get(key);
    if (childType === undefined) out.push(where);
    else out.push(...unknownFields(child, childType, where));
  }
  return out;
}

/** Throws, naming the problem, unless the object is a Pod the API schema accepts. */
export function assertValidPod(obj: unknown): void {
  new Pod(obj as ConstructorParameters<typeof Pod>[0]).validate();
  const unknown = unknownFields(obj);
  if (unknown.length) throw new Error(`fields Kubernetes does not know: ${unknown.join(", ")}`);
}
