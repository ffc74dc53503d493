// Mutation testing of the unit tests (StrykerJS): `npm run test:mutation`. Slow (the whole run
// takes on the order of an hour on a 2-core machine), so not part of CI. One area at a time:
//   npx stryker run --mutate 'capabilities/security-context/**/*.ts'
// Reports: reports/mutation/mutation.html (and mutation.json), the score per file in the terminal.
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
      testMatch: ["<rootDir>/test/unit/**/*.test.ts"],
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
  // The unit tests type-check nothing (ts-jest isolatedModules) and `tsc` over the project for each
  // mutant costs more than running the few tests that cover it: no TypeScript checker.
  checkers: [],
  // On top of 1.5 times the tests' own time and jest's start-up (measured by the initial run).
  timeoutMS: 5000,
  ignorePatterns: ["/dist", "/.e2e", "/coverage", "/bench/runs", "/reports"],
  reporters: ["clear-text", "progress", "html", "json"],
  htmlReporter: { fileName: "reports/mutation/mutation.html" },
  jsonReporter: { fileName: "reports/mutation/mutation.json" },
  tempDirName: ".stryker-tmp",
  cleanTempDir: true,
};
