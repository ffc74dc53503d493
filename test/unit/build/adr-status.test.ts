// Every ADR says whether it still holds: "accepted", "superseded by NNNN", or "accepted ...;
// superseded in part by NNNN: <which part>", and every ADR it names as superseding it exists and
// came after it. A reader of an old record learns at its top that a later one changed it.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const ADR_DIR = join(__dirname, "../../../docs/adr");

/** Records whose status line keeps an older shape until the ADR that replaces them rewrites it. */
const OLDER_SHAPE = new Map<string, string>([]);

const CLAUSE =
  /^(?:accepted(?: \([^)]*\))?|superseded by (\d{4})(?:[ :(][^;]*)?|superseded in part by (\d{4}): [^;]+)$/;

interface Status {
  /** The status text, without its code pointers ("Code: ..."). */
  text: string;
  /** The ADRs it names as superseding it (wholly or in part). */
  supersededBy: string[];
  /** Whether every clause has a known shape. */
  known: boolean;
}

/** The status paragraph of a record ("Status: ..." up to a blank line), parsed. */
function statusOf(record: string): Status | undefined {
  const lines = record.split("\n");
  const start = lines.findIndex(l => l.startsWith("Status: "));
  if (start < 0) return undefined;
  const end = lines.findIndex((l, i) => i > start && !l.trim());
  const paragraph = lines
    .slice(start, end < 0 ? undefined : end)
    .join(" ")
    .slice("Status: ".length);
  const text = paragraph
    .split(/\.\s+Code:/)[0]
    .replace(/\.$/, "")
    .trim();
  const clauses = text.split(/;\s+/);
  const supersededBy: string[] = [];
  let known = true;
  for (const clause of clauses) {
    const m = CLAUSE.exec(clause);
    if (!m) known = false;
    else if (m[1] ?? m[2]) supersededBy.push((m[1] ?? m[2])!);
  }
  return { text, supersededBy, known };
}

const records = readdirSync(ADR_DIR)
  .filter(f => /^\d{4}-.*\.md$/.test(f))
  .sort();
const numbers = new Set(records.map(f => f.slice(0, 4)));

describe("ADR statuses", () => {
  it("every ADR has a Status line of a known shape", () => {
    const unknown: string[] = [];
    for (const file of records) {
      const status = statusOf(readFileSync(join(ADR_DIR, file), "utf8"));
      if (!status) unknown.push(`${file}: no "Status:" line`);
      else if (!status.known && !OLDER_SHAPE.has(file.slice(0, 4)))
        unknown.push(`${file}: "${status.text}"`);
    }
    expect(unknown).toEqual([]);
    expect(records.length).toBeGreaterThanOrEqual(29);
  });

  it("every ADR named as superseding another exists and came after it", () => {
    const wrong: string[] = [];
    for (const file of records) {
      const self = file.slice(0, 4);
      for (const by of statusOf(readFileSync(join(ADR_DIR, file), "utf8"))?.supersededBy ?? [])
        if (!numbers.has(by) || by <= self) wrong.push(`${file}: superseded by ${by}`);
    }
    expect(wrong).toEqual([]);
  });

  it("reads the shapes, and refuses others", () => {
    const parse = (line: string) => statusOf(`# x\n\n${line}\n\n## Context`);
    expect(parse("Status: accepted. Code: `lib/x.ts`.")).toEqual({
      text: "accepted",
      supersededBy: [],
      known: true,
    });
    expect(
      parse(
        "Status: accepted (issue 2); superseded in part by 0022: the user\nonly where restricted. Code: `x`",
      ),
    ).toEqual({
      text: "accepted (issue 2); superseded in part by 0022: the user only where restricted",
      supersededBy: ["0022"],
      known: true,
    });
    expect(parse("Status: superseded by 0030 (issue 42).")?.supersededBy).toEqual(["0030"]);
    expect(parse("Status: accepted; superseded in part: something")?.known).toBe(false);
    expect(parse("Status: proposed")?.known).toBe(false);
    expect(parse("Status: superseded by ADR 30")?.known).toBe(false);
    expect(parse("No status here")).toBeUndefined();
  });
});
