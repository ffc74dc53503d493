// The admission-guard Pepr module: the webhook front door. Settings come from the controller's
// environment (package.json `pepr.env`, Helm values) and are validated before anything starts.
import { Log, PeprModule } from "pepr";
import cfg from "./package.json";
import { capabilities, policies } from "./capabilities";
import { serviceAccountForNewNamespace } from "./capabilities/service-account/rules";
import { LiveCluster } from "./lib/cluster-live";
import { configureAdmission } from "./lib/pepr-adapter";
import { raiseWebhookBodyLimit } from "./lib/webhook-body-limit";
import { moduleEnvironment, settingsFromEnv, SettingsError, type Settings } from "./lib/settings";

// `pepr build` loads this module to read its bindings (see moduleEnvironment for where settings
// come from then). The one setting that changes bindings, and so the webhook rules, is
// workloads.mutate (capabilities/workloads).
const building = process.env.PEPR_MODE === "build";
const controllerEnv = cfg.pepr.env as Record<string, string>;

function loadSettings(): Settings {
  try {
    return settingsFromEnv(moduleEnvironment(controllerEnv));
  } catch (e) {
    // A bad setting stops start-up, naming it: better a crash-looping pod with a clear log than
    // a webhook that silently enforces something else.
    Log.error(e instanceof SettingsError ? e.message : String(e));
    process.exit(1);
  }
}

const settings = loadSettings();
if (!building && settings.workloads.mutate && !settingsFromEnv(controllerEnv).workloads.mutate)
  Log.warn(
    "workloads.mutate is on, but not in package.json pepr.env: unless the module was built with it on, its webhook does not send workloads to be mutated (set it there and rebuild)",
  );
const cluster = new LiveCluster(Log, {
  serviceAccountFor: ns => serviceAccountForNewNamespace(ns, settings),
});
// The caches live in the admission process (not in a Watch binding, which runs in the watcher pod).
// At build time Pepr only loads the module to read its bindings: no cluster then.
if (!building && process.env.PEPR_WATCH_MODE !== "true") cluster.start();

// Before Pepr builds its server: reviews up to the API server's sizes reach our payload-size rules
// instead of failing with an opaque 413 (see lib/webhook-body-limit.ts).
if (!raiseWebhookBodyLimit()) Log.warn("could not raise Pepr's request body limit (2mb)");

// Each policy area is a Pepr capability (capabilities/index.ts); their actions answer with these.
configureAdmission({ settings, cluster, policies });
const module = new PeprModule(cfg, capabilities, { deferStart: true });
// Pepr listens on 3000 (what its Deployment and Service expect); ADMISSION_GUARD_PORT lets tests
// and the demo run several controllers side by side on one machine.
if (!building) module.start(Number(process.env.ADMISSION_GUARD_PORT || 3000));
