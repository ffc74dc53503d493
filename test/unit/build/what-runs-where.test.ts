// docs/policies.md's "What runs where" is the capabilities' own declarations, as
// scripts/docs/what-runs-where.ts writes them: stale when a capability declares otherwise.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { policies, validators, examples } from "../../../capabilities";
import { policyOf, SECRET } from "../../../lib/engine/policy";
import { END, START, whatRunsWhere, withTable } from "../../../scripts/docs/what-runs-where";

const page = readFileSync(join(__dirname, "../../../docs/policies.md"), "utf8");
// The module as it ships: the examples are registered only where asked (the tests ask).
const shipped = policies.filter(p => !examples.includes(p));

test("docs/policies.md's table is the one the declarations make (npm run docs:tables)", () => {
  const table = whatRunsWhere(shipped, validators);
  expect(page.slice(page.indexOf(START), page.indexOf(END) + END.length)).toBe(table);
  // Each capability appears once with each step it declares.
  for (const p of shipped)
    for (const step of ["fix", "check"] as const)
      expect(table.match(new RegExp(`\\| \`${p.name}\` +\\| ${step} `, "g"))?.length).toBe(
        p.acts[step] ? 1 : undefined,
      );
  expect(table).not.toContain("hello-pepr");
});

test("a declaration changed makes another table, so the page is stale", () => {
  const [first, ...rest] = shipped;
  const changed = policyOf(first, {
    ...first.acts,
    check: { ...first.acts.check, kinds: { refs: [SECRET], operations: ["CREATE"] } },
  });
  const table = whatRunsWhere([changed, ...rest], validators);
  expect(table).toContain("| Secret: CREATE ");
  expect(withTable(page, table)).not.toBe(page);
});
