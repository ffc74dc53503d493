// The node tier of the real-Kubernetes suite (npm run test:cluster runs it after test/cluster):
// test/node/*.test.ts against a control plane with a real node (kubelet, kube-scheduler, kube-proxy,
// containerd), where pods really start. See test/node/support/node.ts.
const cluster = require("./jest.cluster.config.js");

/** @type {import('jest').Config} */
module.exports = {
  ...cluster,
  roots: ["<rootDir>/test/node"],
  globalSetup: "<rootDir>/test/node/support/global-setup.ts",
  globalTeardown: "<rootDir>/test/node/support/global-teardown.ts",
  testTimeout: 120_000,
};
