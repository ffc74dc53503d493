// The real-Kubernetes suite (npm run test:cluster): test/cluster/*.test.ts against etcd,
// kube-apiserver and kube-controller-manager started on loopback for the run (see
// test/cluster/support/control-plane.ts). Not part of `npm test`, which needs no cluster.
const base = require("./jest.config.js");

/** @type {import('jest').Config} */
module.exports = {
  ...base,
  roots: ["<rootDir>/test/cluster"],
  testPathIgnorePatterns: [],
  globalSetup: "<rootDir>/test/cluster/support/global-setup.ts",
  globalTeardown: "<rootDir>/test/cluster/support/global-teardown.ts",
  testSequencer: "<rootDir>/test/cluster/support/sequencer.js",
  maxWorkers: 1,
  testTimeout: 60_000,
};
