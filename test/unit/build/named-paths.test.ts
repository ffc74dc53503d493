// Every repository path the docs and the code's comments name exists: a moved or deleted file
// leaves no pointer to nowhere (`lib/engine.ts` after it became `lib/engine/`, say). Read from the
// files git tracks; a path counts as named in Markdown anywhere, in code only inside a comment
// (strings in code are fixtures and outputs, the tests' own business).
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(__dirname, "../../..");
const TOP_FOLDERS =
  "lib|capabilities|test|bench|scripts|cli|docs|deploy|examples|bin|patches|\\.ci";
/** A path under a top folder, not part of a longer word or path, not a glob or a placeholder. */
const NAMED = new RegExp(`(?<![\\w./@-])((?:${TOP_FOLDERS})/[\\w.@+/-]*[\\w/])(?![<*{\\w/])`, "g");
const CODE = /\.(ts|mjs|js)$/;
const COMMENT = /^\s*(\/\/|\/?\*|#)/;

/** Named on purpose though not in the repository: what a reader is told to create, or passes. */
const NOT_IN_THE_REPOSITORY = new Map([
  ["capabilities/gpu-limits/index.ts", "the capability docs/add-a-capability.md has you write"],
  ["examples/bad.yaml", "an example argument to `check`"],
  ["bench/package.json", "what `pepr build -e bench/...` would look for, and does not find"],
  ["capabilities/greeter/index.ts", "the capability test/e2e/add-a-capability.test.ts writes"],
]);

const tracked = execFileSync("git", ["ls-files", "-z"], { cwd: ROOT, encoding: "utf8" })
  .split("\0")
  .filter(Boolean);
const trackedSet = new Set(tracked);

/** Exists as written, as a module named without its extension, or as a file name's prefix. */
function resolves(path: string): boolean {
  const bare = path.replace(/\/$/, "");
  if (existsSync(join(ROOT, bare))) return true;
  if ([".ts", ".js", ".mjs"].some(ext => trackedSet.has(bare + ext))) return true;
  // "test/cluster/15" for test/cluster/15-pod-security-levels.test.ts, "docs/adr/0025" for its ADR.
  return tracked.some(f => f.startsWith(bare) && /^[-+.]/.test(f.slice(bare.length)));
}

const ignoredByGit = (path: string): boolean => {
  try {
    execFileSync("git", ["check-ignore", "-q", "--no-index", path], { cwd: ROOT });
    return true;
  } catch {
    return false;
  }
};

function namedPaths(file: string, text: string): string[] {
  const lines = text.split("\n");
  const read = CODE.test(file) ? lines.filter(l => COMMENT.test(l) || /\s\/\/\s/.test(l)) : lines;
  // "docs/adr/NNNN-....md" is a placeholder.
  return read
    .flatMap(line => [...line.matchAll(NAMED)].map(m => m[1]))
    .filter(p => !p.includes(".."));
}

/** Files not read: this one names missing paths as examples; a dated record names those of its day. */
const NOT_READ = new Set([
  "test/unit/build/named-paths.test.ts",
  // docs/bench.md links each dated run there; its files are the files of that run's commit.
  "docs/bench-archive.md",
]);

describe("paths named in docs and comments", () => {
  it("exist in the repository", () => {
    const missing: string[] = [];
    for (const file of tracked.filter(f => (/\.md$/.test(f) || CODE.test(f)) && !NOT_READ.has(f))) {
      for (const path of namedPaths(file, readFileSync(join(ROOT, file), "utf8"))) {
        if (NOT_IN_THE_REPOSITORY.has(path) || resolves(path) || ignoredByGit(path)) continue;
        missing.push(`${file}: ${path}`);
      }
    }
    expect([...new Set(missing)]).toEqual([]);
  });

  it("finds a path that does not exist, in Markdown and in a comment, not in a string", () => {
    const doc = namedPaths("docs/x.md", "See `lib/engine.ts` and lib/objects/pod.ts.");
    expect(doc).toEqual(["lib/engine.ts", "lib/objects/pod.ts"]);
    expect(resolves("lib/engine.ts")).toBe(false);
    expect(resolves("lib/objects/pod.ts")).toBe(true);
    expect(resolves("lib/pepr/webhook-body-limit")).toBe(true);
    expect(resolves("test/cluster/15")).toBe(true);
    const code = namedPaths("lib/x.ts", '// see lib/metrics.ts\nconst f = "lib/fixture.ts";');
    expect(code).toEqual(["lib/metrics.ts"]);
    expect(namedPaths("docs/x.md", "test/unit/<concern>/ and capabilities/*/index.ts")).toEqual([]);
  });
});
