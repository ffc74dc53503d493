// Reading and writing manifests for `check`: multi-document YAML, JSON, `kind: List` (and
// PodList, DeploymentList, ...) as `helm template`, `kubectl get -o yaml` and `mlflow run
// --dry-run` print them; directories recursively; stdin. Every problem is a message naming the file
// and the document (`examples/bad.yaml: document 2: ...`), never an exception.
import { readdir, readFile, stat } from "node:fs/promises";
import { extname, join, relative, resolve } from "node:path";
import { isMap, isPair, isScalar, isSeq, parseAllDocuments, type Document } from "yaml";
import type { KubeObject } from "../lib/objects/pod";
import { isRecord } from "../lib/objects/record";

/** Where an object came from: 1-based document number, and item number inside a List. */
export interface Source {
  file: string;
  document: number;
  item?: number;
}

export interface InputObject {
  source: Source;
  object: KubeObject;
}

/** One input file (or stdin), parsed. */
export interface ManifestFile {
  /** The name shown in messages: the path as given or found, or "<stdin>". */
  file: string;
  /** Where to write fixes; undefined for stdin. */
  path?: string;
  format: "yaml" | "json";
  /** Each document's value (null for an empty document), in order. */
  values: unknown[];
  /** The parsed YAML documents, kept so that --fix preserves comments and quoting. */
  yamlDocs: Document[];
  /** Whether the source indents sequences under their key (`key:\n  - a`) or not (`key:\n- a`). */
  indentSeq: boolean;
  objects: InputObject[];
  errors: string[];
}

export const STDIN = "<stdin>";
const MANIFEST_EXTENSIONS = [".yaml", ".yml", ".json"];

/**
 * Same plain data. Compared as JSON, not with isDeepStrictEqual: objects cloned in another realm
 * (structuredClone under a test runner's VM) have other prototypes but are the same manifest.
 */
export const sameData = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** `examples/llamaindex-trainer.yaml: document 2, item 3` */
export function describeSource(s: Source): string {
  return `${s.file}: document ${s.document}${s.item ? `, item ${s.item}` : ""}`;
}

function typeName(x: unknown): string {
  if (Array.isArray(x)) return "a list";
  if (typeof x === "string") return "a string";
  return `a ${typeof x}`;
}

/** Why this value is not a Kubernetes object, or undefined when it is one. */
function notAnObject(value: unknown): string | undefined {
  if (!isRecord(value)) return `${typeName(value)}, not a Kubernetes object (a mapping with kind)`;
  if (typeof value.kind !== "string" || !value.kind)
    return "has no kind, so it is not a Kubernetes object (set kind and apiVersion)";
  if (value.metadata !== undefined && value.metadata !== null && !isRecord(value.metadata))
    return `${value.kind}: metadata is ${typeName(value.metadata)}, not a mapping`;
  const meta = (value.metadata ?? {}) as Record<string, unknown>;
  for (const field of ["name", "namespace", "generateName"]) {
    const v = meta[field];
    if (v !== undefined && v !== null && typeof v !== "string")
      return `${value.kind}: metadata.${field} is ${typeName(v)}, not a string`;
  }
  return undefined;
}

/** `List`, and `PodList`, `DeploymentList`, ... when they carry items. */
function isList(value: Record<string, unknown>): boolean {
  return value.kind === "List" || (String(value.kind).endsWith("List") && "items" in value);
}

/** The objects of one document: itself, or a List's items. */
function objectsOfDocument(value: unknown, source: Source, into: ManifestFile): void {
  if (value === null || value === undefined) return; // an empty document (`---` at the end)
  const problem = notAnObject(value);
  if (problem) {
    into.errors.push(`${describeSource(source)}: ${problem}`);
    return;
  }
  const obj = value as KubeObject;
  if (!isList(obj)) {
    into.objects.push({ source, object: obj });
    return;
  }
  if (obj.items === null || obj.items === undefined) return;
  if (!Array.isArray(obj.items)) {
    into.errors.push(`${describeSource(source)}: ${obj.kind} items is ${typeName(obj.items)}`);
    return;
  }
  obj.items.forEach((item, i) => {
    const itemSource = { ...source, item: i + 1 };
    const itemProblem = item === null ? "an empty item" : notAnObject(item);
    if (itemProblem) into.errors.push(`${describeSource(itemSource)}: ${itemProblem}`);
    else into.objects.push({ source: itemSource, object: item as KubeObject });
  });
}

const firstLine = (s: string) => s.split("\n")[0].trim().replace(/:$/, "");

/** Detects the sequence style of a YAML source: `- ` under its key, indented or not. */
function detectIndentSeq(text: string): boolean {
  const compact = /^( *)[^\s#-][^\n]*:[ \t]*\n\1- /m.test(text);
  const indented = /^( *)[^\s#-][^\n]*:[ \t]*\n\1 +- /m.test(text);
  return indented || !compact;
}

/** Parses one manifest source. JSON files are read as JSON; everything else as YAML (JSON is YAML). */
export function parseManifest(text: string, file: string, path?: string): ManifestFile {
  const format = path && extname(path).toLowerCase() === ".json" ? "json" : "yaml";
  const out: ManifestFile = {
    file,
    path,
    format,
    values: [],
    yamlDocs: [],
    indentSeq: detectIndentSeq(text),
    objects: [],
    errors: [],
  };
  const add = (value: unknown, i: number) => {
    out.values.push(value);
    objectsOfDocument(value, { file, document: i + 1 }, out);
  };
  if (format === "json") {
    try {
      add(text.trim() ? JSON.parse(text) : null, 0);
    } catch (e) {
      out.errors.push(`${file}: document 1: not valid JSON (${(e as Error).message})`);
    }
    return out;
  }
  const docs = parseAllDocuments(text);
  out.yamlDocs = Array.isArray(docs) ? docs : [];
  out.yamlDocs.forEach((doc, i) => {
    const where = `${file}: document ${i + 1}`;
    if (doc.errors.length) {
      out.errors.push(`${where}: not valid YAML: ${firstLine(doc.errors[0].message)}`);
      out.values.push(undefined);
      return;
    }
    try {
      add(doc.toJS({ maxAliasCount: 100 }), i);
    } catch (e) {
      out.errors.push(`${where}: ${firstLine((e as Error).message)}`);
      out.values.push(undefined);
    }
  });
  return out;
}

/** Manifest files under a directory, recursively, sorted; hidden folders and node_modules skipped. */
async function manifestsUnder(dir: string): Promise<string[]> {
  const found: string[] = [];
  const entries = await readdir(dir, { withFileTypes: true });
  entries.sort((a, b) => a.name.localeCompare(b.name));
  for (const entry of entries) {
    if (entry.name.startsWith(".") || entry.name === "node_modules") continue;
    const full = join(dir, entry.name);
    if (entry.isDirectory()) found.push(...(await manifestsUnder(full)));
    else if (MANIFEST_EXTENSIONS.includes(extname(entry.name).toLowerCase())) found.push(full);
  }
  return found;
}

export interface LoadOptions {
  cwd: string;
  readStdin: () => Promise<string>;
  /** A larger file is an error, not read (`test` bounds what a test file may make it read). */
  maxFileBytes?: number;
}

/**
 * Reads the given files, directories and `-` (stdin, read once). A path that does not exist, or a
 * directory without manifests, is an error of its own (a file named "<path>" with no objects).
 */
export async function loadManifests(paths: string[], opts: LoadOptions): Promise<ManifestFile[]> {
  const out: ManifestFile[] = [];
  let stdinRead = false;
  const seen = new Set<string>(); // a file named twice (a.yaml and ./a.yaml, or inside a dir) is read once
  const failed = (file: string, message: string) => {
    const m = parseManifest("", file);
    m.errors.push(`${file}: ${message}`);
    out.push(m);
  };
  for (const given of paths) {
    if (given === "-") {
      if (stdinRead) continue;
      stdinRead = true;
      out.push(parseManifest(await opts.readStdin(), STDIN));
      continue;
    }
    const abs = resolve(opts.cwd, given);
    let files: string[];
    try {
      files = (await stat(abs)).isDirectory() ? await manifestsUnder(abs) : [abs];
    } catch (e) {
      failed(given, `cannot read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
      continue;
    }
    if (!files.length) {
      failed(given, "no .yaml, .yml or .json files in this directory");
      continue;
    }
    for (const file of files.filter(f => !seen.has(f))) {
      seen.add(file);
      // Shown as the user named it: the path given, or the given directory joined with the rest.
      const shown = file === abs ? given : join(given, relative(abs, file));
      try {
        const max = opts.maxFileBytes;
        if (max !== undefined) {
          const info = await stat(file);
          // A device or a pipe (a link to /dev/zero) has no size to bound: it is not read at all.
          const tooBig = !info.isFile()
            ? "not a regular file"
            : info.size > max && `${info.size} bytes, more than the ${max} a file may have`;
          if (tooBig) {
            failed(shown, tooBig);
            continue;
          }
        }
        out.push(parseManifest(await readFile(file, "utf8"), shown, file));
      } catch (e) {
        failed(shown, `cannot read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Writing fixes back

/**
 * The document values with the given objects replaced (an object at the top of a document, or an
 * item of a List). Objects not in the map are kept as they are.
 */
export function replaceObjects(file: ManifestFile, fixed: Map<KubeObject, KubeObject>): unknown[] {
  return file.values.map(value => {
    if (!isRecord(value)) return value;
    const own = fixed.get(value as KubeObject);
    if (own) return own;
    if (isList(value) && Array.isArray(value.items)) {
      return { ...value, items: value.items.map(item => fixed.get(item as KubeObject) ?? item) };
    }
    return value;
  });
}

/**
 * Brings a YAML node in line with a plain value, changing only what differs, so comments, key
 * order and quoting (`cpu: "4"`) of untouched parts survive a --fix.
 */
function updateNode(doc: Document, node: unknown, value: unknown): unknown {
  if (isMap(node) && isRecord(value)) {
    const keyOf = (pair: unknown) =>
      isPair(pair) && isScalar(pair.key) ? String(pair.key.value) : undefined;
    node.items = node.items.filter(pair => {
      const key = keyOf(pair);
      return key !== undefined && key in value;
    });
    for (const [key, v] of Object.entries(value)) {
      const pair = node.items.find(p => keyOf(p) === key);
      if (pair) pair.value = updateNode(doc, pair.value, v);
      else node.items.push(doc.createPair(key, v));
    }
    return node;
  }
  if (isSeq(node) && Array.isArray(value)) {
    node.items = value.map((v, i) => updateNode(doc, node.items[i], v));
    return node;
  }
  if (isScalar(node) && node.value === value) return node;
  return doc.createNode(value);
}

/** The new text of a file whose documents now have these values. */
export function renderManifest(file: ManifestFile, values: unknown[]): string {
  if (file.format === "json") return JSON.stringify(values[0], null, 2) + "\n";
  return file.yamlDocs
    .map((doc, i) => {
      if (!sameData(file.values[i], values[i])) {
        doc.contents = updateNode(doc, doc.contents, values[i]) as Document["contents"];
      }
      return doc.toString({ lineWidth: 0, indentSeq: file.indentSeq });
    })
    .join("");
}
