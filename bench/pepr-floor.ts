// Pepr's own floor for the benchmark: the same Pepr module and adapter as pepr.ts, with only the
// hello-pepr capability, acting in every namespace (so each request runs one real Mutate and one
// real Validate action through lib/pepr-adapter.ts). No live cluster caches: an empty snapshot.
// Built by bench/run.ts into bench/runs/floor/; never deployed.
import { PeprModule } from "pepr";
import cfg from "../package.json";
import { helloPepr } from "../hello-pepr";
import { SnapshotCluster } from "../lib/cluster";
import { capabilityFor } from "../lib/pepr-adapter";
import { defaultSettings } from "../lib/settings";

const everywhere = { ...helloPepr, namespaces: undefined };
const deps = {
  settings: defaultSettings(),
  cluster: new SnapshotCluster(),
  policies: [everywhere],
};
const module = new PeprModule(cfg, [capabilityFor(everywhere, deps)], { deferStart: true });
if (process.env.PEPR_MODE !== "build")
  module.start(Number(process.env.ADMISSION_GUARD_PORT || 3000));
