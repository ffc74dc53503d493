// How the build overlay (scripts/overlay/entries.ts) is applied to what `pepr build` wrote: the
// manifest, the Helm chart's values and templates and other files of dist/ are read once, every
// entry is applied to them in memory, and all is written once, so a failing entry leaves dist/ as
// `pepr build` left it. Applying it again to its own output changes nothing (each entry first
// removes what it added before), and anything an entry expects in Pepr's output and does not find
// is an error naming it: a Pepr upgrade that moves something must fail the build, not ship a module
// without the change.
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import {
  type Document,
  isMap,
  isScalar,
  isSeq,
  type Node,
  parseAllDocuments,
  parseDocument,
  stringify,
  type YAMLMap,
} from "yaml";

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [field: string]: unknown;
}

/** Documents of the manifest: of a kind (or kinds), with this name and these labels if given. */
export interface Select {
  kind: string | string[];
  name?: string;
  labels?: Record<string, string>;
}

/**
 * A step into a document: a key; "*", every item of a list (one at least); `{ field: value }`, the
 * one item of a list with these fields.
 */
export type Step = string | Record<string, string>;

/** Pepr's entries of a list that are in `keep`, in its order, then `add`; each once. */
export interface ListUpdate {
  keep: readonly string[];
  add: readonly string[];
}

/**
 * Items of a list of mappings, each named by its `name`: those named in `owns` (what this entry may
 * have added before) removed, then `add` appended.
 */
export interface NamedItems {
  owns: readonly string[];
  add: readonly { name: string }[];
}

/**
 * A value set where a path leads (`set: undefined` removes the key), a list of strings updated
 * there, or named items of a list replaced.
 */
export type Change = { set: unknown } | { list: ListUpdate } | { items: NamedItems };

/** A change to documents Pepr wrote into the manifest; each step must find something. */
export type Patch = { select: Select; path: Step[] } & Change;

/** A key of Pepr's chart values.yaml changed (it must be there: the overlay invents none). */
export type ValueChange = { path: string[] } & Change;

/** A top-level key of ours in values.yaml, and in values.schema.json when it refuses unknown keys. */
export interface NewValues {
  key: string;
  defaults: unknown;
  schema: unknown;
}

/**
 * Objects the install gets: appended to the manifest and, the same, as one template of the chart
 * (removed when there are none).
 */
export interface Objects {
  add: KubeObject[];
  /** Every object this entry may add, with any setting: what an earlier run added goes first. */
  owns: Select[];
  /** The chart template of the same objects; none when the entry writes its own (`templates`). */
  template?: string;
  /** The Helm condition around them, e.g. `.Values.admission.enabled`. */
  helmIf?: string;
}

/**
 * Lines put into one of Pepr's own chart templates. They are YAML with Go template actions, which
 * no YAML parser reads: the lines go before each line equal to `before`, which must be there
 * exactly `count` times (the one place the overlay edits template text).
 */
export interface TemplateInsert {
  template: string;
  before: string;
  lines: string[];
  count: number;
}

/**
 * The lines below a key line of one of Pepr's chart templates (those indented deeper than it)
 * replaced by `lines`; the key line must be there exactly `count` times. For a block of plain YAML
 * inside a template (a webhook's rules), which no YAML parser reads as a whole.
 */
export interface TemplateBlock {
  template: string;
  key: string;
  lines: string[];
  count: number;
}

/**
 * Something in Pepr's manifest an entry names without changing it, checked first: documents that
 * must be there and, with `path`, the value each holds there.
 */
export interface Fact {
  select: Select;
  path?: string[];
  equals?: unknown;
}

/** One addition to what `pepr build` writes: a name, why, and what it adds or changes. */
export interface OverlayEntry {
  name: string;
  why: string;
  /** What the build prints for it. */
  summary: string;
  relies?: Fact[];
  patches?: Patch[];
  objects?: Objects;
  values?: ValueChange[];
  newValues?: NewValues[];
  inserts?: TemplateInsert[];
  blocks?: TemplateBlock[];
  /** Chart templates of ours, whole. */
  templates?: Record<string, string>;
  /** Other files of dist/ (opt-in objects, monitoring). */
  files?: Record<string, string>;
}

/** A template of the chart with these objects in it, under a Helm condition if given. */
export function helmObjects(objects: object[], helmIf?: string): string {
  const body = objects.map(o => stringify(o)).join("---\n");
  return helmIf ? `{{- if ${helmIf} }}\n${body}{{- end }}\n` : body;
}

const kinds = (s: Select) => (Array.isArray(s.kind) ? s.kind : [s.kind]);
const selectorText = (s: Select) =>
  `${kinds(s).join(" or ")}${s.name ? ` ${s.name}` : ""}${s.labels ? ` labelled ${JSON.stringify(s.labels)}` : ""}`;

function selects(s: Select, doc: Document): boolean {
  return (
    kinds(s).includes(String(doc.get("kind"))) &&
    (s.name === undefined || doc.getIn(["metadata", "name"]) === s.name) &&
    Object.entries(s.labels ?? {}).every(([k, v]) => doc.getIn(["metadata", "labels", k]) === v)
  );
}

/** A plain value as a node of `doc`; a scalar stays plain, so YAML keeps the quoting it had. */
const valueFor = (doc: Document, value: unknown) =>
  value !== null && typeof value === "object" ? doc.createNode(value) : value;

const unique = (list: string[]) => [...new Set(list)];

/** What `pepr build` wrote into a dist/ directory, parsed once, changed in memory, written once. */
export class BuildOutput {
  private readonly manifestFile: URL;
  private readonly chart: URL;
  private readonly manifestDocs: Document[];
  private readonly added: KubeObject[] = [];
  private readonly values: Document;
  private readonly schema?: { whole: Record<string, unknown>; changed: boolean };
  /** Chart templates and other files to write (undefined: to remove), by path. */
  private readonly writes = new Map<string, string | undefined>();

  constructor(
    private readonly dist: URL,
    uuid: string,
  ) {
    this.manifestFile = new URL(`pepr-module-${uuid}.yaml`, dist);
    this.chart = new URL(`${uuid}-chart/`, dist);
    if (!existsSync(this.manifestFile))
      throw new Error(`${this.manifestFile.pathname} is missing: run pepr build first`);
    this.manifestDocs = parseAllDocuments(readFileSync(this.manifestFile, "utf8")) as Document[];
    const values = new URL("values.yaml", this.chart);
    if (!existsSync(values)) throw new Error(`${this.chart.pathname}: no Helm chart there`);
    this.values = parseDocument(readFileSync(values, "utf8"));
    const schema = new URL("values.schema.json", this.chart);
    if (existsSync(schema))
      this.schema = { whole: JSON.parse(readFileSync(schema, "utf8")), changed: false };
  }

  apply(entry: OverlayEntry): void {
    for (const fact of entry.relies ?? []) this.check(fact);
    for (const patch of entry.patches ?? []) this.patch(patch);
    if (entry.objects) this.addObjects(entry.objects);
    for (const change of entry.values ?? []) this.changeValue(change);
    for (const values of entry.newValues ?? []) this.addValues(values);
    for (const insert of entry.inserts ?? []) this.insert(insert);
    for (const block of entry.blocks ?? []) this.replaceBlock(block);
    for (const [name, text] of Object.entries(entry.templates ?? {}))
      this.writes.set(this.template(name).href, text);
    for (const [name, text] of Object.entries(entry.files ?? {}))
      this.writes.set(new URL(name, this.dist).href, text);
  }

  write(): void {
    writeFileSync(
      this.manifestFile,
      this.manifestDocs.map(d => d.toString()).join("") +
        this.added.map(o => `---\n${stringify(o)}`).join(""),
    );
    writeFileSync(new URL("values.yaml", this.chart), this.values.toString());
    if (this.schema?.changed)
      writeFileSync(
        new URL("values.schema.json", this.chart),
        `${JSON.stringify(this.schema.whole, null, 2)}\n`,
      );
    for (const [href, text] of this.writes) {
      if (text === undefined) rmSync(new URL(href), { force: true });
      else writeFileSync(new URL(href), text);
    }
  }

  /** The scalar at `path` (list indexes as numbers) in the one document `select` picks. */
  read(select: Select, path: (string | number)[]): unknown {
    const [doc, ...more] = this.documents(select);
    if (more.length) throw new Error(`the manifest has more than one ${selectorText(select)}`);
    return doc.getIn(path);
  }

  private template(name: string): URL {
    return new URL(`templates/${name}`, this.chart);
  }

  private documents(select: Select): Document[] {
    const docs = this.manifestDocs.filter(d => selects(select, d));
    if (!docs.length) throw new Error(`the manifest has no ${selectorText(select)}`);
    return docs;
  }

  private check({ select, path, equals }: Fact): void {
    for (const doc of this.documents(select)) {
      const found = path && doc.getIn(path);
      if (path && found !== equals)
        throw new Error(
          `${selectorText(select)}: ${path.join(".")} is ${JSON.stringify(found)}, expected ${JSON.stringify(equals)}`,
        );
    }
  }

  private patch(patch: Patch): void {
    for (const doc of this.documents(patch.select)) {
      const where = `${selectorText(patch.select)}: ${patch.path.map(s => (typeof s === "string" ? s : JSON.stringify(s))).join(".")}`;
      // Walk to the nodes holding the last key; keys after the last list step may be created.
      let nodes: Node[] = [doc.contents as Node];
      let keys: string[] = [];
      for (const step of patch.path.slice(0, -1)) {
        if (typeof step === "string" && step !== "*") {
          keys.push(step);
          continue;
        }
        const lists = nodes.map(n => (isMap(n) ? n.getIn(keys, true) : undefined));
        keys = [];
        nodes = lists.flatMap(list => {
          if (!isSeq(list) || !list.items.length) throw new Error(`${where}: no list to step into`);
          if (step === "*") return list.items as Node[];
          const matching = list.items.filter(
            item => isMap(item) && Object.entries(step).every(([k, v]) => item.get(k) === v),
          );
          if (matching.length !== 1)
            throw new Error(`${where}: ${matching.length} items match, expected one`);
          return matching as Node[];
        });
      }
      const last = patch.path[patch.path.length - 1] as string;
      for (const node of nodes) {
        if (!isMap(node)) throw new Error(`${where}: not a mapping`);
        this.change(doc, node, [...keys, last], patch, where);
      }
    }
  }

  /** `set`, `list` or `items` at `path` below `node`, a mapping of `doc`. */
  private change(doc: Document, node: YAMLMap, path: string[], change: Change, where: string) {
    if ("set" in change)
      return change.set === undefined
        ? node.deleteIn(path)
        : node.setIn(path, valueFor(doc, change.set));
    const current = node.getIn(path, true);
    if (!isSeq(current)) throw new Error(`${where}: not a list`);
    if ("items" in change) {
      const { owns, add } = change.items;
      current.items = current.items.filter(
        i => !(isMap(i) && owns.includes(String(i.get("name")))),
      );
      for (const item of add) current.items.push(doc.createNode(item));
      return;
    }
    const pepr = current.items.map(i => String(isScalar(i) ? i.value : i));
    const list = unique([...pepr.filter(n => change.list.keep.includes(n)), ...change.list.add]);
    node.setIn(path, doc.createNode(list));
  }

  private addObjects({ add, owns, template, helmIf }: Objects): void {
    for (let i = this.manifestDocs.length - 1; i >= 0; i--)
      if (owns.some(s => selects(s, this.manifestDocs[i]))) this.manifestDocs.splice(i, 1);
    this.added.push(...add);
    if (template)
      this.writes.set(
        this.template(template).href,
        add.length ? helmObjects(add, helmIf) : undefined,
      );
  }

  private changeValue(change: ValueChange): void {
    const where = `values.yaml ${change.path.join(".")}`;
    if (!this.values.hasIn(change.path)) throw new Error(`${where}: not there`);
    this.change(this.values, this.values.contents as YAMLMap, change.path, change, where);
  }

  /**
   * A key of ours in values.yaml and, because Pepr's values.schema.json refuses keys it does not
   * list, in the schema (as strict): without it `helm install` fails ("Additional property ... is
   * not allowed").
   */
  private addValues({ key, defaults, schema }: NewValues): void {
    this.values.set(key, this.values.createNode(defaults));
    if (!this.schema) return;
    const { whole } = this.schema;
    const ref = whole.$ref;
    const definitions = whole.definitions as Record<string, Record<string, unknown>> | undefined;
    const root =
      typeof ref === "string" && ref.startsWith("#/definitions/")
        ? definitions?.[ref.slice("#/definitions/".length)]
        : whole;
    const properties = root?.properties as Record<string, unknown> | undefined;
    if (!properties) throw new Error("values.schema.json: no root properties");
    if (root?.additionalProperties !== false) return;
    properties[key] = schema;
    this.schema.changed = true;
  }

  /** A template's text as the entries so far left it. */
  private templateText(file: URL): string {
    const pending = this.writes.get(file.href);
    if (pending === undefined && !existsSync(file))
      throw new Error(`${file.pathname} is missing: pepr build wrote no Helm chart there`);
    return pending ?? readFileSync(file, "utf8");
  }

  private insert({ template, before, lines, count }: TemplateInsert): void {
    const file = this.template(template);
    const text = this.templateText(file);
    // What an earlier run inserted goes first, then the anchor is counted: once per place.
    const inserted = ["", ...lines, before].join("\n");
    const lineList = text.split(inserted).join(`\n${before}`).split("\n");
    const found = lineList.filter(l => l === before).length;
    if (found !== count)
      throw new Error(
        `${file.pathname}: expected the line ${JSON.stringify(before)} ${count} time(s), found ${found}: Pepr's template changed, see scripts/overlay/entries.ts`,
      );
    this.writes.set(
      file.href,
      lineList.flatMap(l => (l === before ? [...lines, l] : [l])).join("\n"),
    );
  }

  private replaceBlock({ template, key, lines, count }: TemplateBlock): void {
    const file = this.template(template);
    const indent = (line: string) => line.length - line.trimStart().length;
    const out: string[] = [];
    let found = 0;
    let inBlock = false;
    for (const line of this.templateText(file).split("\n")) {
      if (inBlock && (line.trim() === "" || indent(line) > indent(key))) continue;
      inBlock = false;
      out.push(line);
      if (line === key) {
        found++;
        inBlock = true;
        out.push(...lines);
      }
    }
    if (found !== count)
      throw new Error(
        `${file.pathname}: expected the line ${JSON.stringify(key)} ${count} time(s), found ${found}: Pepr's template changed, see scripts/overlay/entries.ts`,
      );
    this.writes.set(file.href, out.join("\n"));
  }
}
