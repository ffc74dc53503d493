// The admission-guard Pepr module: the webhook front door. Settings come from the controller's
// environment (package.json `pepr.env`, Helm values) and are validated before anything starts.
import { Log, PeprModule } from "pepr";
import cfg from "./package.json";
import { capabilities, policies } from "./capabilities";
import { serviceAccountForNewNamespace } from "./capabilities/service-account/rules";
import { LiveCluster } from "./lib/cluster-live";
import { imageInspectorFor } from "./lib/images/inspector";
import { CredentialsStore } from "./lib/images/credentials";
import { configureAdmission } from "./lib/pepr-adapter";
import { installGracefulDrain, raiseWebhookBodyLimit } from "./lib/webhook-body-limit";
import { installLinearClone } from "./lib/pepr-clone";
import { installReviewMetrics, serveWithPepr } from "./lib/metrics/serve";
import { moduleEnvironment, settingsFromEnv, SettingsError, type Settings } from "./lib/settings";
import { installExemptionCrd } from "./lib/crds";
import type { EngineDeps } from "./lib/engine";
import { FixEvents } from "./lib/events";
import { WebhookArming } from "./lib/webhooks/arm-live";
import { LiveReportStore, writeEvent } from "./lib/reports/live-store";
import { ReportScanner } from "./lib/reports/scanner";
import { configureBackground } from "./lib/reports/watcher";
import { ScanWatches, watchIgnoredNamespaces, whenListed } from "./lib/reports/scan-watches";
import { kindsInForce } from "./lib/workload-kinds/in-force";

// `pepr build` loads this module to read its bindings (see moduleEnvironment for where settings
// come from then). The settings that change bindings, and so what `pepr build` writes, are
// workloads.mutate, .kinds and .builtInKinds (the webhook rules: capabilities/workloads) and reports.enabled with
// events.enabled (the watcher: capabilities/reports).
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
{
  // The kinds judged at apply decide the webhook's rules too: set at deploy time only, the webhook
  // is not sent them (or still sends the kinds dropped), while the engine and `check` judge others.
  const atBuild = settingsFromEnv(controllerEnv).workloads;
  const differ = (key: "kinds" | "builtInKinds") =>
    !building && JSON.stringify(settings.workloads[key]) !== JSON.stringify(atBuild[key]);
  for (const key of ["kinds", "builtInKinds"] as const)
    if (differ(key))
      Log.warn(
        `workloads.${key} differs from package.json pepr.env: the webhook's rules were written from the build's value, so it receives other kinds than the ones judged (set it there and rebuild)`,
      );
}
// Pepr runs this module twice when deployed: the admission controller, and the watcher
// (PEPR_WATCH_MODE=true) whose Watch bindings feed the reports (capabilities/reports).
const watcher = process.env.PEPR_WATCH_MODE === "true";
// Registry credentials for reading image configs (images.credentialsSecrets), kept fresh.
const credentials = new CredentialsStore(settings.images.credentialsSecrets, Log);
if (!building && settings.images.inspect) credentials.start();
const cluster = new LiveCluster(Log, {
  exemptionsNamespace: settings.exemptions.enabled ? settings.exemptions.namespace : undefined,
  // Exemptions count only in the namespace the install created (scripts/namespace-guards.mjs).
  exemptionsOwner: cfg.pepr.uuid,
  // New namespaces get their ServiceAccount from the admission controller only.
  serviceAccountFor: watcher ? undefined : ns => serviceAccountForNewNamespace(ns, settings),
  images: settings.images.inspect
    ? imageInspectorFor(settings, Log, registry => credentials.get(registry))
    : undefined,
});
// The caches live in each process that judges (not in a Watch binding, which runs in the watcher
// pod only). At build time Pepr only loads the module to read its bindings: no cluster then.
if (!building) {
  cluster.start();
  // Ours to apply at every start, as Pepr applies its PeprStore CRD (lib/crds.ts).
  if (!watcher) void installExemptionCrd(Log);
}

// Before Pepr builds its server: reviews up to the API server's sizes reach our payload-size rules
// instead of failing with an opaque 413 (see lib/webhook-body-limit.ts).
if (!raiseWebhookBodyLimit()) Log.warn("could not raise Pepr's request body limit (2mb)");
// Pepr's copy of each request is quadratic in alike entries: a hostile pod's 35,000 would stall it.
if (!building && !installLinearClone())
  Log.warn("could not replace Pepr's request copy (ramda clone)");
// Our metrics on Pepr's /metrics, and every review timed and counted (docs/operations.md).
if (!building && !serveWithPepr())
  Log.warn("could not add admission-guard's metrics to Pepr's /metrics");
// The watcher serves no reviews.
if (!building && !watcher && !installReviewMetrics())
  Log.warn("could not count admission reviews on /metrics");
// The admission pods' preStop hook drains them before Pepr closes its server (a rollout or a
// deleted pod then refuses no request).
if (!building && !watcher && !installGracefulDrain())
  Log.warn("could not install the graceful drain on Pepr's server");

// Each policy area is a Pepr capability (capabilities/index.ts); their actions answer with these.
const deps = { settings, cluster, policies };
configureAdmission(deps);
// The report scan and the Events run where Pepr runs the Watch bindings: the watcher (and `pepr dev`).
if (!building && (watcher || process.env.PEPR_MODE === "dev"))
  configureBackground(backgroundFor(deps));
const module = new PeprModule(cfg, capabilities, { deferStart: true });
// Pepr listens on 3000 (what its Deployment and Service expect); ADMISSION_GUARD_PORT lets tests
// and the demo run several controllers side by side on one machine.
if (!building) module.start(Number(process.env.ADMISSION_GUARD_PORT || 3000));
// The webhooks are installed failing open (onError: audit) and armed by the admission controller
// once a replica answers behind their Service: an install whose controller never starts locks no
// one out (lib/webhooks/arming.ts).
if (!building && !watcher)
  new WebhookArming({
    name: `pepr-${cfg.pepr.uuid}`,
    wanted: settings.webhooks.failurePolicy,
    log: Log,
  }).start();

/** The watcher's report scan and fix Events, each off when its setting says so. */
function backgroundFor(deps: EngineDeps) {
  const { reports, events } = deps.settings;
  // Pods and workloads listed (paged) and watched by the module itself, none kept: Pepr's Watch
  // bindings keep every object whole (lib/reports/scan-watches.ts).
  const watches = new ScanWatches({
    workloadKinds: kindsInForce(deps.settings.workloads),
    ignoredNamespaces: watchIgnoredNamespaces(cfg.pepr),
    log: Log,
  });
  const scanner = reports.enabled
    ? new ReportScanner(() => deps, new LiveReportStore(), {
        intervalMs: reports.intervalSeconds * 1000,
        maxResults: reports.maxResults,
        // Judging again reads the objects again: the scan keeps none.
        relist: watches.relist,
        log: Log,
      })
    : undefined;
  const fixEvents = events.enabled
    ? new FixEvents({
        perSecond: events.perSecond,
        perNamespacePerSecond: events.perNamespacePerSecond,
        write: writeEvent,
        policies: () => deps.policies,
        instance: process.env.HOSTNAME,
        log: Log,
      })
    : undefined;
  if (scanner) {
    // What the objects are judged with changed: an Exemption, a cache that listed (again). A
    // namespace's labels: capabilities/reports' Namespace binding (lib/reports/watcher.ts).
    cluster.exemptionStore?.listeners.push(() => scanner.rejudgeSoon());
    for (const store of [
      cluster.namespaces,
      cluster.quotas,
      cluster.nodeStore,
      cluster.exemptionStore,
    ])
      store?.listListeners.push(() => scanner.rejudgeSoon());
  }
  // Watched once the caches the objects are judged with have listed (15 s at most): a start
  // judges each object once, not again as each cache lists.
  const caches = scanner ? cluster.caches().map(([, store]) => store) : [];
  void whenListed(caches, 15_000).then(() => watches.start({ scanner, events: fixEvents }));
  return { scanner, events: fixEvents };
}
