// Pepr's own floor for the benchmark: the same Pepr module and adapter as pepr.ts, with only the
// hello-pepr capability, acting in every namespace (so each request runs one real Mutate and one
// real Validate action through lib/pepr/adapter.ts, bound as the module's admission capability binds
// them, on Pods alone). No live
// cluster caches: an empty snapshot. Built by bench/floor.ts into bench/runs/floor/; never deployed.
import { Capability, PeprModule } from "pepr";
import cfg from "../package.json";
import { helloPeprPolicy } from "../hello-pepr";
import { SnapshotCluster } from "../lib/cluster/view";
import { policyOf } from "../lib/engine/policy";
import { bindAdmission, configureAdmission } from "../lib/pepr/adapter";
import { defaultSettings } from "../lib/settings";

// On Pods alone: one Mutate and one Validate binding.
const everywhere = policyOf(
  { ...helloPeprPolicy, namespaces: undefined },
  { fix: { pods: ["CREATE"] }, check: { pods: ["CREATE", "UPDATE"] } },
);
const Floor = new Capability({ name: everywhere.name, description: everywhere.description });
bindAdmission(Floor, [everywhere], defaultSettings().workloads);

configureAdmission({
  settings: defaultSettings(),
  cluster: new SnapshotCluster(),
  policies: [everywhere],
});
const module = new PeprModule(cfg, [Floor], { deferStart: true });
if (process.env.PEPR_MODE !== "build")
  module.start(Number(process.env.ADMISSION_GUARD_PORT || 3000));
