// Pepr's own floor for the benchmark: the same Pepr module and adapter as pepr.ts, with only the
// hello-pepr capability, acting in every namespace (so each request runs one real Mutate and one
// real Validate action through lib/pepr/adapter.ts, bound as hello-pepr.ts binds them). No live
// cluster caches: an empty snapshot. Built by bench/floor.ts into bench/runs/floor/; never deployed.
import { Capability, PeprModule, a } from "pepr";
import cfg from "../package.json";
import { helloPeprPolicy } from "../hello-pepr";
import { SnapshotCluster } from "../lib/cluster/view";
import { configureAdmission, policyActions } from "../lib/pepr/adapter";
import { defaultSettings } from "../lib/settings";

const everywhere = { ...helloPeprPolicy, namespaces: undefined };
const Floor = new Capability({ name: everywhere.name, description: everywhere.description });
const { mutatePod, validate } = policyActions(Floor, everywhere);
Floor.When(a.Pod).IsCreated().Mutate(mutatePod);
Floor.When(a.Pod).IsCreatedOrUpdated().Validate(validate);

configureAdmission({
  settings: defaultSettings(),
  cluster: new SnapshotCluster(),
  policies: [everywhere],
});
const module = new PeprModule(cfg, [Floor], { deferStart: true });
if (process.env.PEPR_MODE !== "build")
  module.start(Number(process.env.ADMISSION_GUARD_PORT || 3000));
