// docs/settings.md's tables are the schema's settings and defaults (scripts/docs/settings-table.ts,
// `npm run docs:tables`): a setting added, renamed or given another default makes the page stale.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { defaultSettings } from "../../../lib/settings";
import {
  schemaMeanings,
  settingDefaults,
  settingsDocProblems,
  TO_WRITE,
  withSettings,
} from "../../../scripts/docs/settings-table";

const page = readFileSync(join(__dirname, "../../../docs/settings.md"), "utf8");

test("every setting of the schema has its row, with the schema's default and a meaning", () => {
  expect(settingsDocProblems(page)).toEqual([]);
  // The schema's leaves, not a list kept by hand: as many rows as the defaults have keys.
  const leaves = Object.values(defaultSettings()).reduce<number>(
    (n, v) =>
      n + (typeof v === "object" && v !== null && !Array.isArray(v) ? Object.keys(v).length : 1),
    0,
  );
  expect(settingDefaults()).toHaveLength(leaves);
});

test("a setting the page lacks is named, and the generator adds its row to its section", () => {
  const settings = defaultSettings();
  const grown = { ...settings, payload: { ...settings.payload, maxPorts: 64 } };
  expect(settingsDocProblems(page, settingDefaults(grown))).toEqual([
    "`payload.maxPorts`: a setting with no row in docs/settings.md",
  ]);
  const written = withSettings(page, settingDefaults(grown));
  const lines = written.split("\n");
  const added = lines.findIndex(l => l.startsWith("| `payload.maxPorts` |"));
  // Right after the last payload row, its meaning left to write (and refused until written).
  expect(lines[added - 1]).toMatch(/^\| `payload\.[a-zA-Z]+` /);
  expect(lines[added]).toBe(`| \`payload.maxPorts\` | \`64\` | ${TO_WRITE} |`);
  expect(settingsDocProblems(written, settingDefaults(grown))).toEqual([
    "`payload.maxPorts`: no meaning written",
  ]);
});

test("a new section gets its own table under Every setting", () => {
  const grown = { ...defaultSettings(), gpuLimits: { enabled: true, maxPerPod: 8 } };
  const written = withSettings(page, settingDefaults(grown));
  const section = written.indexOf("### `gpuLimits`");
  expect(section).toBeGreaterThan(written.indexOf("## Every setting"));
  expect(written.slice(section)).toMatch(
    /\| Setting \| Default \| Meaning \|\n\| --- \| --- \| --- \|\n\| `gpuLimits\.enabled` \| `true` \| \(to write\) \|\n\| `gpuLimits\.maxPerPod` \| `8` /,
  );
});

test("another default, a setting the schema dropped and a second row are each named", () => {
  const settings = defaultSettings();
  const changed = settingDefaults({ ...settings, images: { ...settings.images, budgetMs: 5000 } });
  expect(settingsDocProblems(page, changed)).toEqual([
    "`images.budgetMs`: the page says `2000`, the schema's default is `5000`",
  ]);
  // The generator writes the schema's default into the cell.
  expect(settingsDocProblems(withSettings(page, changed), changed)).toEqual([]);

  const dropped = settingDefaults().filter(d => d.key !== "events.perSecond");
  expect(settingsDocProblems(page, dropped)).toEqual([
    "`events.perSecond`: no such setting in the schema",
  ]);

  const row = page.split("\n").find(l => l.startsWith("| `mode` "));
  expect(settingsDocProblems(page.replace(row!, `${row}\n${row}`))).toEqual(["`mode`: two rows"]);
});

test("an empty string is written quoted, a long list by its size", () => {
  const settings = defaultSettings();
  const cells = settingDefaults({ ...settings, x: { name: "", kinds: [1, 2, 3, 4, 5] } });
  expect(cells.filter(c => c.key.startsWith("x."))).toEqual([
    { key: "x.name", cell: '`""`' },
    { key: "x.kinds", cell: "`[5 entries]`" },
  ]);
});

test("a default may carry a remark after it, never instead of it", () => {
  const layerBytes = page.split("\n").find(l => l.startsWith("| `images.layerBytes` "))!;
  expect(layerBytes).toContain("`1073741824` (1 GiB)");
  expect(settingsDocProblems(page.replace("`1073741824` (1 GiB)", "1 GiB"))).toEqual([
    "`images.layerBytes`: the page says 1 GiB, the schema's default is `1073741824`",
  ]);
});

test("a new setting's meaning is the first sentence of its doc comment in the schema", () => {
  const meanings = schemaMeanings(
    readFileSync(join(__dirname, "../../../lib/settings/schema.ts"), "utf8"),
  );
  // A section's key, and a top-level one; the sentence ends at its period, begun in lower case.
  expect(meanings.get("teamLabel.key")).toBe(
    "the label every pod carries, given the namespace's value of the same label when absent",
  );
  expect(meanings.get("mode")).toBe("mode of namespaces without the mode label");
  const settings = defaultSettings();
  const grown = { ...settings, teamLabel: { ...settings.teamLabel, owner: "x" } };
  const source = `const S = z.strictObject({ teamLabel: z.strictObject({
    /** Who answers for the pod | the on-call team. More words. */
    owner: z.string() }) });`;
  const written = withSettings(page, settingDefaults(grown), schemaMeanings(source));
  // A | in a meaning would end the cell: escaped.
  expect(written).toContain(
    "| `teamLabel.owner` | `x` | who answers for the pod \\| the on-call team |",
  );
  expect(settingsDocProblems(written, settingDefaults(grown))).toEqual([]);
});
