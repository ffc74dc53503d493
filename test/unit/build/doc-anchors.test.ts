// Every link from one Markdown page to a section of another (or of itself) lands on a heading or
// an explicit anchor there: a section renamed or moved (docs/bench.md's dated runs went to
// docs/bench-archive.md) leaves no link to the top of a page. Anchors as GitHub makes them.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";

const ROOT = join(__dirname, "../../..");

/** A heading's anchor as GitHub writes it: lower case, punctuation dropped, spaces to hyphens. */
function slugOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
    .replace(/ /g, "-");
}

/** The anchors of a page: its headings' (a repeated one numbered -1, -2...) and explicit ids. */
function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of text.split("\n")) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    if (fenced) continue;
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      const slug = slugOf(heading[1]);
      const n = seen.get(slug) ?? 0;
      seen.set(slug, n + 1);
      anchors.add(n ? `${slug}-${n}` : slug);
    }
    for (const m of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(m[1]);
  }
  return anchors;
}

/** The links to a section in a page: [target file or "" for the page itself, anchor]. */
function sectionLinks(text: string): [string, string][] {
  return [...text.matchAll(/\]\(((?:[^)\s#]*\.md)?)#([^)\s]+)\)/g)].map(m => [m[1], m[2]]);
}

const pages = execFileSync("git", ["ls-files", "-z", "*.md"], { cwd: ROOT, encoding: "utf8" })
  .split("\0")
  .filter(f => f && !f.startsWith("node_modules/"));

describe("links to a section of a page", () => {
  it("land on a heading or an anchor of that page", () => {
    const broken: string[] = [];
    const cache = new Map<string, Set<string>>();
    for (const page of pages) {
      for (const [target, anchor] of sectionLinks(readFileSync(join(ROOT, page), "utf8"))) {
        const file = target ? normalize(join(dirname(page), target)) : page;
        if (!existsSync(join(ROOT, file))) {
          broken.push(`${page}: ${target}#${anchor} (no such page)`);
          continue;
        }
        if (!cache.has(file)) cache.set(file, anchorsOf(readFileSync(join(ROOT, file), "utf8")));
        if (!cache.get(file)!.has(decodeURIComponent(anchor)))
          broken.push(`${page}: ${target}#${anchor}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("docs/bench.md keeps the anchors of the sections that moved to the archive", () => {
    const before = [
      "capabilities-per-policy-area-what-the-bindings-cost",
      "memory-as-the-cluster-grows-npm-run-benchscale-issue-28",
      "pinned-ratios-per-round-answers-without-an-etag",
      "the-engines-own-cost-issue-22",
    ];
    const bench = anchorsOf(readFileSync(join(ROOT, "docs/bench.md"), "utf8"));
    const archive = anchorsOf(readFileSync(join(ROOT, "docs/bench-archive.md"), "utf8"));
    for (const anchor of before) {
      expect(bench).toContain(anchor);
      expect(archive).toContain(anchor);
    }
  });

  it("reads anchors as GitHub makes them, and finds a link that misses", () => {
    expect(slugOf("Memory as the cluster grows (`npm run bench:scale`, issue 28)")).toBe(
      "memory-as-the-cluster-grows-npm-run-benchscale-issue-28",
    );
    expect(slugOf("Profiling (`npm run profile -- validate|mutate`)")).toBe(
      "profiling-npm-run-profile----validatemutate",
    );
    const page = '# A\n## Results\n```sh\n# not a heading\n```\n## Results\n<a id="old"></a>';
    expect([...anchorsOf(page)]).toEqual(["a", "results", "results-1", "old"]);
    expect(sectionLinks("see [x](bench.md#results) and [y](#a), not [z](bench.md)")).toEqual([
      ["bench.md", "results"],
      ["", "a"],
    ]);
  });
});
