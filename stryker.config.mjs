// Mutation testing of the unit tests (StrykerJS): `npm run test:mutation`. Slow (the whole run
// takes on the order of an hour on a 2-core machine), so not part of CI. One area at a time:
//   npx stryker run --mutate 'capabilities/security-context/**/*.ts'
// With MUTATION_TESTS (comma-separated paths under the root) only those unit tests run, which
// makes one area fit in minutes instead of hours:
//   MUTATION_TESTS=test/unit/payload-size/policy.test.ts npx stryker run --mutate 'capabilities/payload-size/*.ts'
// Reports: reports/mutation/mutation.html (and mutation.json), the score per file in the terminal;
// MUTATION_NAME=<name> writes reports/mutation/<name>.html and .json and works in its own
// temporary directory, so that runs over different areas can go side by side.
const onlyTests = process.env.MUTATION_TESTS?.split(",")
  .map(path => path.trim())
  .filter(Boolean)
  .map(path => `<rootDir>/${path}`);

const name = process.env.MUTATION_NAME || "mutation";

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  packageManager: "npm",
  testRunner: "jest",
  // The rules of every capability and the engine (lib/engine/).
  // Not the capabilities' Pepr binding files (capabilities/index.ts, capabilities/<area>/index.ts):
  // they only register bindings with Pepr (what the e2e tests exercise through the built module), no
  // rule. capabilities/security-context/checks/index.ts holds logic (the checks of a level) and is
  // mutated.
  mutate: [
    "capabilities/**/*.ts",
    "!capabilities/index.ts",
    "!capabilities/*/index.ts",
    "lib/engine/**/*.ts",
  ],
  jest: {
    projectType: "custom",
    configFile: "jest.config.js",
    // The unit tests only: the e2e tests need the built bundle and real HTTP controllers. Their
    // properties (fast-check) end at the first counterexample and after 3 s of runs here
    // (test/support/mutation-fast-check.js): a mutant that slows one down costs a timeout each.
    config: {
      testMatch: onlyTests?.length ? onlyTests : ["<rootDir>/test/unit/**/*.test.ts"],
      // Jest finds the tests related to a mutated file in its module map, which holds only what
      // is under its roots: with the sources there too, a test reaching the file through
      // capabilities/index.ts (the engine, check and properties tests) counts as related.
      roots: ["<rootDir>/test", "<rootDir>/capabilities", "<rootDir>/lib", "<rootDir>/cli"],
      setupFiles: [
        "<rootDir>/test/support/quiet-pepr.js",
        "<rootDir>/test/support/mutation-fast-check.js",
      ],
    },
    enableFindRelatedTests: true,
  },
  coverageAnalysis: "perTest",
  // A 2-core machine.
  concurrency: 2,
  // No TypeScript checker: it type-checks every mutant against the whole project (`tsc --noEmit`
  // alone takes ~12 s here), not cheap on two cores. Stryker marks mutated files @ts-nocheck, so a
  // mutant that would not compile still runs, and its tests judge it.
  checkers: [],
  // On top of 1.5 times the tests' own time and jest's start-up (measured by the initial run).
  timeoutMS: 5000,
  ignorePatterns: ["/dist", "/.e2e", "/coverage", "/bench/runs", "/reports", "/.stryker-tmp*"],
  reporters: ["clear-text", "progress", "html", "json"],
  htmlReporter: { fileName: `reports/mutation/${name}.html` },
  jsonReporter: { fileName: `reports/mutation/${name}.json` },
  tempDirName: name === "mutation" ? ".stryker-tmp" : `.stryker-tmp-${name}`,
  cleanTempDir: true,
};
