// `npm run test:node`: the node tier, or, on a machine with only what envtest provides (etcd,
// kube-apiserver, kube-controller-manager), a loud skip: no registry serves the kubelet, so a fresh
// machine has none, and `npm run test:cluster` must still pass there. Arguments go to jest.
import { spawnSync } from "node:child_process";
import { findBinaries, findNodeBinaries } from "../../cluster/support/binaries";

const missing = [...findBinaries().missing, ...findNodeBinaries().missing];
if (missing.length) {
  const bar = "#".repeat(74);
  console.log(
    [
      bar,
      "## skipped: the node tier (test/node) did not run",
      ...missing.map(m => `## missing ${m}`),
      "## (see docs/node.md)",
      bar,
    ].join("\n"),
  );
  process.exit(0);
}
const jest = spawnSync(
  "npx",
  ["--no-install", "jest", "--config", "jest.node.config.js", ...process.argv.slice(2)],
  { stdio: "inherit" },
);
process.exit(jest.status ?? 1);
