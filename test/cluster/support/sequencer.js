// The cluster suite's files run one at a time (they share one control plane and the module's
// cluster-wide webhook configurations) and in name order: 00-deploy-manifest sees a clean cluster.
const Sequencer = require("@jest/test-sequencer").default;

class ByName extends Sequencer {
  sort(tests) {
    return [...tests].sort((a, b) => a.path.localeCompare(b.path));
  }
}

module.exports = ByName;
