// Reads Kubernetes manifests for tests and the demo: YAML files (multi-document), `kind: List`
// flattened, files of a directory in name order.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseAllDocuments } from "yaml";
import type { KubeObject } from "../../lib/objects/pod";
import { REPO_ROOT } from "./controller";

export interface Manifest {
  file: string;
  object: KubeObject;
}

function flatten(doc: unknown): KubeObject[] {
  if (!doc || typeof doc !== "object") return [];
  const obj = doc as KubeObject;
  if (obj.kind === "List" || (obj.kind?.endsWith("List") && Array.isArray(obj.items)))
    return (obj.items as unknown[]).flatMap(flatten);
  return [obj];
}

/** Every object of a YAML file, or of every .yaml/.yml/.json file directly in a directory. */
export function loadManifests(path: string): Manifest[] {
  if (!existsSync(path)) return [];
  const files = statSync(path).isDirectory()
    ? readdirSync(path)
        .filter(f => /\.(ya?ml|json)$/.test(f))
        .sort()
        .map(f => join(path, f))
    : [path];
  return files.flatMap(file =>
    parseAllDocuments(readFileSync(file, "utf8")).flatMap(doc => {
      if (doc.errors.length) throw new Error(`${file}: ${doc.errors[0].message}`);
      return flatten(doc.toJS()).map(object => ({ file, object }));
    }),
  );
}

/**
 * Workloads (*.yaml of a directory) and their cluster (its cluster/ subdirectory): the given
 * directory, else examples/ when the repo has it, else the e2e fixtures.
 */
export function seedWorkloads(dir?: string): {
  workloads: Manifest[];
  cluster: KubeObject[];
  from: string;
} {
  const examples = resolve(REPO_ROOT, "examples");
  const from = dir
    ? resolve(dir)
    : loadManifests(examples).length
      ? examples
      : resolve(REPO_ROOT, "test/fixtures/e2e");
  return {
    workloads: loadManifests(from),
    cluster: loadManifests(join(from, "cluster")).map(m => m.object),
    from,
  };
}
