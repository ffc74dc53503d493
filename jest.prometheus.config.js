// The Prometheus tier (npm run test:prometheus): test/prometheus/*.test.ts against a real
// Prometheus (Debian's `prometheus` binary, started on loopback by test/prometheus/support/
// prometheus.ts) scraping the real built controller. Not part of `npm test`, which needs no
// Prometheus; .ci/run installs the package and runs this tier after it.
const base = require("./jest.config.js");

/** @type {import('jest').Config} */
module.exports = {
  ...base,
  roots: ["<rootDir>/test/prometheus"],
  testPathIgnorePatterns: ["/node_modules/"],
  // Fails the run at once, with the `apt-get install prometheus` hint, when the binary is missing.
  globalSetup: "<rootDir>/test/prometheus/support/global-setup.ts",
  maxWorkers: 1,
  testTimeout: 60_000,
};
