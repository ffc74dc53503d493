// Unit tests import pure code; e2e tests talk to the built controller over HTTPS. Packages that
// ship only ES modules (kubernetes-fluent-client and friends) are transformed too, as Pepr's docs say.
const esmPackages = [
  "pepr/src",
  "kubernetes-fluent-client",
  "@kubernetes/client-node",
  "openid-client",
  "oauth4webapi",
  "jose",
  "jsep",
  "rfc4648",
].join("|");

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: "node",
  roots: ["<rootDir>/test"],
  testMatch: ["**/*.test.ts"],
  // The real-Kubernetes suite has its own configs (jest.cluster.config.js and, for the node tier,
  // jest.node.config.js: npm run test:cluster), and so has the Prometheus tier
  // (jest.prometheus.config.js: npm run test:prometheus).
  testPathIgnorePatterns: [
    "/node_modules/",
    "<rootDir>/test/cluster/",
    "<rootDir>/test/node/",
    "<rootDir>/test/prometheus/",
  ],
  transform: {
    "^.+\\.[tj]s$": ["ts-jest", { tsconfig: "tsconfig.test.json" }],
  },
  transformIgnorePatterns: [`node_modules/(?!(${esmPackages}))`],
  testTimeout: 30000,
  setupFiles: ["<rootDir>/test/support/quiet-pepr.js"],
};
