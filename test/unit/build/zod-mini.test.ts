// The module bundle holds zod/mini, never classic zod: one `import ... from "zod"` in code the
// module bundles brings back all of zod, JSON-schema code included (~26 KB of the module Secret that
// `kubectl apply` must fit in its last-applied annotation: docs/deploy.md). cli/ is not bundled.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(__dirname, "../../..");
/** `from "zod"`, `require("zod")`, `import("zod")`: zod itself or a classic subpath (zod/v4). */
const CLASSIC = /(?:from\s*|require\(\s*|import\(\s*)["']zod(?:\/v4|\/v3)?["']/;

/** The lines of bundled code that import classic zod, as `file: line`. */
function classicZodImports(files: Record<string, string>): string[] {
  return Object.entries(files).flatMap(([file, text]) =>
    text
      .split("\n")
      .filter(line => CLASSIC.test(line))
      .map(line => `${file}: ${line.trim()}`),
  );
}

describe("the module bundle's zod", () => {
  it("tells classic zod from zod/mini", () => {
    expect(
      classicZodImports({
        "a.ts": 'import * as z from "zod";\nimport * as m from "zod/mini";',
        "b.ts": 'import { en } from "zod/locales";\nconst z = require("zod/v4");',
      }),
    ).toEqual(['a.ts: import * as z from "zod";', 'b.ts: const z = require("zod/v4");']);
  });

  it("no file the module bundles imports classic zod", () => {
    const bundled = execFileSync("git", ["ls-files", "-z", "lib", "capabilities", "pepr.ts"], {
      cwd: ROOT,
      encoding: "utf8",
    })
      .split("\0")
      .filter(f => f.endsWith(".ts"));
    expect(bundled.length).toBeGreaterThan(50);
    const texts = Object.fromEntries(bundled.map(f => [f, readFileSync(join(ROOT, f), "utf8")]));
    expect(classicZodImports(texts)).toEqual([]);
  });
});
