// docs/settings.md's tables held to the settings schema (lib/settings/schema.ts): one row per
// setting, its Default cell the schema's default. `npm run docs:tables` writes the Default cells
// and adds a row for a setting the page lacks (its Meaning left for you to write);
// test/unit/build/settings-table.test.ts fails while a setting, a default or a meaning is missing.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { defaultSettings } from "../../lib/settings";

/**
 * The first sentence of each setting's doc comment in lib/settings/schema.ts, by `section.key`:
 * what a new row's Meaning says. Only the sections written there (not those a feature exports).
 */
export function schemaMeanings(source: string): Map<string, string> {
  const file = ts.createSourceFile("schema.ts", source, ts.ScriptTarget.Latest, true);
  const meanings = new Map<string, string>();
  const nameOf = (node: ts.PropertyAssignment) => node.name.getText(file);
  const visit = (node: ts.Node): void => {
    if (ts.isPropertyAssignment(node)) {
      const comment = ts
        .getJSDocCommentsAndTags(node)
        .filter(ts.isJSDoc)
        .map(doc => ts.getTextOfJSDocComment(doc.comment) ?? "")
        .join(" ")
        .replace(/\s+/g, " ")
        .trim();
      let outer: ts.Node | undefined = node.parent;
      while (outer && !ts.isPropertyAssignment(outer)) outer = outer.parent;
      const key = outer ? `${nameOf(outer)}.${nameOf(node)}` : nameOf(node);
      // Its first sentence, begun in lower case as the page's meanings are.
      const sentence = (/^(.*?)\.(\s|$)/.exec(comment)?.[1] ?? comment).trim();
      if (sentence) meanings.set(key, sentence[0].toLowerCase() + sentence.slice(1));
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return meanings;
}

/** What the generator writes in a new row's Meaning: the test refuses it until replaced. */
export const TO_WRITE = "(to write)";

/** A list longer than this is written by its size: the page explains it in prose. */
const LONGEST_LIST = 4;

export interface SettingDefault {
  /** `section.key`, or a top-level key (`mode`). */
  key: string;
  /** The Default cell, as the page must begin it. */
  cell: string;
}

const isSection = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** How a default is written: `value`, or `[N entries]` for a long list. */
export function defaultCell(value: unknown): string {
  if (Array.isArray(value) && value.length > LONGEST_LIST) return `\`[${value.length} entries]\``;
  // A string as it is, but the empty one quoted ("``" is no Markdown).
  return `\`${typeof value === "string" && value !== "" ? value : JSON.stringify(value)}\``;
}

/**
 * Every setting and its default, in the schema's order: a section's keys (`images.budgetMs`), a
 * top-level key that is no section (`mode`). A map-valued setting (`registries.mirrors`) is one.
 */
export function settingDefaults(settings: object = defaultSettings()): SettingDefault[] {
  return Object.entries(settings).flatMap(([name, value]) =>
    isSection(value)
      ? Object.entries(value).map(([key, v]) => ({ key: `${name}.${key}`, cell: defaultCell(v) }))
      : [{ key: name, cell: defaultCell(value) }],
  );
}

interface Row {
  key: string;
  cell: string;
  meaning: string;
  line: number;
}

const ROW = /^\| `([A-Za-z][A-Za-z0-9.]*)` +\| (.*?) +\| (.*?) +\|$/;

function rowsOf(page: string): Row[] {
  return page.split("\n").flatMap((text, line) => {
    const match = ROW.exec(text);
    return match ? [{ key: match[1], cell: match[2].trim(), meaning: match[3].trim(), line }] : [];
  });
}

/** A cell holds the default when it is that, or that and a remark: `1073741824` (1 GiB). */
const holds = (cell: string, expected: string) =>
  cell === expected || cell.startsWith(`${expected} (`);

/** What is wrong with the page's tables against the schema; empty when they agree. */
export function settingsDocProblems(
  page: string,
  defaults: SettingDefault[] = settingDefaults(),
): string[] {
  const rows = rowsOf(page);
  const problems: string[] = [];
  const known = new Map(defaults.map(d => [d.key, d.cell]));
  const seen = new Set<string>();
  for (const row of rows) {
    const expected = known.get(row.key);
    if (seen.has(row.key)) problems.push(`\`${row.key}\`: two rows`);
    seen.add(row.key);
    if (expected === undefined) problems.push(`\`${row.key}\`: no such setting in the schema`);
    else if (!holds(row.cell, expected))
      problems.push(
        `\`${row.key}\`: the page says ${row.cell}, the schema's default is ${expected}`,
      );
    if (!row.meaning || row.meaning === TO_WRITE)
      problems.push(`\`${row.key}\`: no meaning written`);
  }
  for (const { key } of defaults)
    if (!seen.has(key)) problems.push(`\`${key}\`: a setting with no row in docs/settings.md`);
  return problems;
}

/**
 * The page with every Default cell the schema's, and a row added for each setting it lacks: after
 * the last row of its section, or in a new `### \`section\`` table at the end of "Every setting".
 */
export function withSettings(
  page: string,
  defaults: SettingDefault[] = settingDefaults(),
  meanings: ReadonlyMap<string, string> = new Map(),
): string {
  const lines = page.split("\n");
  const known = new Map(defaults.map(d => [d.key, d.cell]));
  for (const row of rowsOf(page)) {
    const expected = known.get(row.key);
    if (expected !== undefined && !holds(row.cell, expected))
      lines[row.line] = `| \`${row.key}\` | ${expected} | ${row.meaning} |`;
  }
  const present = new Set(rowsOf(page).map(r => r.key));
  const section = (key: string) => (key.includes(".") ? key.slice(0, key.indexOf(".")) : "");
  for (const { key, cell } of defaults.filter(d => !present.has(d.key))) {
    const meaning = (meanings.get(key) ?? TO_WRITE).replace(/\|/g, "\\|");
    const row = `| \`${key}\` | ${cell} | ${meaning} |`;
    const last = rowsOf(lines.join("\n"))
      .filter(r => section(r.key) === section(key))
      .at(-1);
    if (last) {
      lines.splice(last.line + 1, 0, row);
      continue;
    }
    const everySetting = lines.indexOf("## Every setting");
    const next = lines.findIndex((l, i) => i > everySetting && l.startsWith("## "));
    const at = next < 0 ? lines.length : next;
    lines.splice(
      at,
      0,
      `### \`${section(key)}\``,
      "",
      "| Setting | Default | Meaning |",
      "| --- | --- | --- |",
      row,
      "",
    );
  }
  return lines.join("\n");
}

async function main(): Promise<void> {
  const path = join(__dirname, "..", "..", "docs", "settings.md");
  const schema = readFileSync(join(__dirname, "..", "..", "lib", "settings", "schema.ts"), "utf8");
  const written = withSettings(
    readFileSync(path, "utf8"),
    settingDefaults(),
    schemaMeanings(schema),
  );
  // Aligned as the repository's prettier aligns Markdown tables (format:check holds the page);
  // loaded here, not at the top: the test imports this file, and prettier will not load in jest.
  const prettier = await import("prettier");
  const options = { ...(await prettier.resolveConfig(path)), filepath: path };
  writeFileSync(path, await prettier.format(written, options));
  const problems = settingsDocProblems(readFileSync(path, "utf8"));
  console.log(`${path}: settings tables written`);
  for (const problem of problems) console.log(`  to do: ${problem}`);
}

if (require.main === module) void main();
