// docs/add-a-capability.md promises that a capability needs no edit outside its folder,
// capabilities/index.ts, its settings section and its tests (and what `npm run docs:tables`
// writes). Held here on its worked example, team-label: every file of the repository that names
// it is one of those, or a page that explains it.
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

const ROOT = join(__dirname, "../../..");
const NAMES = /team-label|teamLabel|TeamLabel|TEAM_LABEL/;
const SKIPPED = new Set(["node_modules", "dist", ".git", "coverage", "reports", ".stryker-tmp"]);
/** Folders of generated files, not in git (benchmarks' bundles). */
const GENERATED_DIRS = new Set(["bench/runs"]);

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap(entry =>
    SKIPPED.has(entry.name) || GENERATED_DIRS.has(relative(ROOT, join(dir, entry.name)))
      ? []
      : entry.isDirectory()
        ? files(join(dir, entry.name))
        : [relative(ROOT, join(dir, entry.name))],
  );
}

/** Where the capability may be named: its own places, and the pages that explain it. */
const ALLOWED = [
  /^capabilities\/team-label\//,
  /^capabilities\/index\.ts$/,
  /^lib\/settings\/schema\.ts$/,
  /^test\//,
  /^docs\/add-a-capability\.md$/,
  /^CHANGELOG\.md$/,
];
/** Pages docs:tables writes: named only on the lines it wrote. */
const GENERATED: Record<string, RegExp> = {
  "docs/policies.md": /^\| `team-label` +\| (fix|check) /,
  "docs/settings.md": /^(\| `teamLabel\.[a-zA-Z]+` +\||### `teamLabel`$)/,
};

test("team-label is named only in its folder, the list, its settings section, its tests and docs", () => {
  const outside = files(ROOT)
    .filter(path => !ALLOWED.some(allowed => allowed.test(path)))
    .flatMap(path => {
      if (!/\.(ts|js|mjs|json|md|yaml|yml)$/.test(path)) return [];
      const lines = readFileSync(join(ROOT, path), "utf8").split("\n");
      return lines
        .filter(line => NAMES.test(line) && !GENERATED[path]?.test(line))
        .map(line => `${path}: ${line.trim().slice(0, 120)}`);
    });
  expect(outside).toEqual([]);
});

test("the section of the settings schema that names it is its own", () => {
  const schema = readFileSync(join(ROOT, "lib/settings/schema.ts"), "utf8").split("\n");
  const named = schema.flatMap((line, i) => (NAMES.test(line) ? [i] : []));
  const start = schema.findIndex(line => line.startsWith("    teamLabel: z.prefault("));
  const end = schema.findIndex((line, i) => i > start && line === "    ),");
  expect(start).toBeGreaterThan(0);
  expect(named.every(i => i >= start && i <= end)).toBe(true);
});
