// Test support for the security-context tests: is an object a Pod the Kubernetes API accepts?
// The answer `check` gives (cli/schema.ts): kubernetes-models' validators for types, enums and
// required fields, and the API's model metadata (@kubernetes/client-node) for unknown fields,
// which kubernetes-models lets through (a pod-level readOnlyRootFilesystem passes its validate()).
import { schemaProblems, unknownFields as unknownFieldsOf } from "../../../cli/schema";
import type { KubeObject } from "../../../lib/objects/pod";

/** Paths of fields the API does not know, e.g. ["spec.securityContext.readOnlyRootFilesystem"]. */
export function unknownFields(value: unknown, type = "V1Pod", path = ""): string[] {
  return unknownFieldsOf(value, type, path).map(f => f.path);
}

/** Throws, naming the problem, unless the object is a Pod the API schema accepts. */
export function assertValidPod(obj: unknown): void {
  const problems = schemaProblems({ apiVersion: "v1", kind: "Pod", ...(obj as KubeObject) });
  if (problems.length) throw new Error(`not a Pod the API accepts: ${problems.join("; ")}`);
}
