// The admission-guard Pepr module: the webhook front door, started in the order below (each step
// in lib/pepr/module-start.ts). Settings come from the controller's environment (package.json
// `pepr.env`, Helm values) and are validated before anything starts.
import { PeprModule } from "pepr";
import { description, pepr } from "./package.json";
import { capabilities, policies } from "./capabilities";
import { serviceAccountForNewNamespace } from "./capabilities/service-account/rules";
import { configureAdmission } from "./lib/pepr/adapter";
import {
  armWebhooks,
  checkPeprStarted,
  loadSettings,
  mendPepr,
  moduleRole,
  startBackground,
  startCluster,
} from "./lib/pepr/module-start";

// The admission controller, the watcher, `pepr dev`, or `pepr build` reading the bindings (then
// nothing starts).
const role = moduleRole();
const settings = loadSettings(role);
const cluster = startCluster(settings, role, serviceAccountForNewNamespace);
// Before Pepr builds its server (new PeprModule below).
mendPepr(role);

// Each policy area is a Pepr capability (capabilities/index.ts); their actions answer with these.
const deps = { settings, cluster, policies };
configureAdmission(deps);
startBackground(deps, role);
const module = new PeprModule({ description, pepr }, capabilities, { deferStart: true });
// Pepr listens on 3000 (what its Deployment and Service expect); ADMISSION_GUARD_PORT lets tests
// and the demo run several controllers side by side on one machine.
if (!role.building) module.start(Number(process.env.ADMISSION_GUARD_PORT || 3000));
checkPeprStarted(role);
armWebhooks(settings, role);
