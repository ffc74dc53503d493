// The start-up of the admission-guard module, step by step, in the order pepr.ts calls them:
// settings, the live cluster, the mends to Pepr, the watcher's background, the webhooks' arming.
import { Log } from "pepr";
import { pepr } from "../../package.json";
import type { NamespaceInfo } from "../objects/keys";
import { LiveCluster } from "../cluster/live";
import { installExemptionCrd } from "../cluster/exemption-crd";
import { createExemptionsNamespace } from "../cluster/exemptions-namespace";
import type { EngineDeps } from "../engine";
import { FixEvents } from "../reports/events";
import { CredentialsStore } from "../images/credentials";
import { CloudCredentials } from "../images/cloud/store";
import { imageInspectorFor } from "../images/inspector";
import { installReviewMetrics, serveWithPepr } from "./metrics-serve";
import { installLinearClone } from "./clone";
import { installBoundedLog } from "./bounded-log";
import { liveReportStore, writeEvent } from "../reports/live-store";
import { ReportScanner } from "../reports/scanner";
import { ScanWatches, watchIgnoredNamespaces, whenListed } from "../reports/scan-watches";
import { configureBackground } from "../reports/watcher";
import { moduleEnvironment, settingsFromEnv, SettingsError, type Settings } from "../settings";
import {
  installGracefulDrain,
  installPlainAnswers,
  raiseWebhookBodyLimit,
} from "./webhook-body-limit";
import { boundWebhookServer, installPathBeforeBody, webhookServerBounded } from "./webhook-doors";
import { WebhookArming } from "../webhooks/arm-live";
import { kindsInForce } from "../workload-kinds/in-force";

/** Which of Pepr's runs of the module this is. */
export interface ModuleRole {
  /**
   * `pepr build` (PEPR_MODE=build), loading the module only to read its bindings: nothing starts,
   * no cluster. The settings that change the bindings, and so what it writes, are workloads.mutate,
   * .kinds and .builtInKinds (the webhook rules: capabilities/admission) and reports.enabled with
   * events.enabled (the watcher: capabilities/reports); see moduleEnvironment for where they come from.
   */
  building: boolean;
  /**
   * Pepr runs the module twice when deployed: the admission controller, and the watcher
   * (PEPR_WATCH_MODE=true) whose Watch bindings feed the reports (capabilities/reports).
   */
  watcher: boolean;
  /** `pepr dev`: one process, which runs the Watch bindings too. */
  dev: boolean;
}

export function moduleRole(env: NodeJS.ProcessEnv = process.env): ModuleRole {
  return {
    building: env.PEPR_MODE === "build",
    watcher: env.PEPR_WATCH_MODE === "true",
    dev: env.PEPR_MODE === "dev",
  };
}

/** What the admission controller works with; the cluster is the live one the background listens to. */
export interface ModuleDeps extends EngineDeps {
  cluster: LiveCluster;
}

/**
 * The settings from the controller's environment (package.json `pepr.env`, Helm values), warning
 * where they differ from those the module was built with.
 */
export function loadSettings(role: ModuleRole): Settings {
  const { settings, atBuild } = parseSettings();
  if (!role.building) warnWhereBuiltOtherwise(settings, atBuild);
  return settings;
}

function parseSettings(): { settings: Settings; atBuild: Settings } {
  const controllerEnv = pepr.env as Record<string, string>;
  try {
    return {
      settings: settingsFromEnv(moduleEnvironment(controllerEnv)),
      atBuild: settingsFromEnv(controllerEnv),
    };
  } catch (e) {
    // A bad setting stops start-up, naming it: better a crash-looping pod with a clear log than
    // a webhook that silently enforces something else.
    Log.error(e instanceof SettingsError ? e.message : String(e));
    process.exit(1);
  }
}

/**
 * The workload settings also decide the webhook's rules, written by `pepr build`: set at deploy
 * time only, the webhook is not sent what the engine and `check` judge (or still sends what they
 * dropped).
 */
function warnWhereBuiltOtherwise(settings: Settings, atBuild: Settings): void {
  if (settings.workloads.mutate && !atBuild.workloads.mutate)
    Log.warn(
      "workloads.mutate is on, but not in package.json pepr.env: unless the module was built with it on, its webhook does not send workloads to be mutated (set it there and rebuild)",
    );
  for (const key of ["kinds", "builtInKinds"] as const)
    if (JSON.stringify(settings.workloads[key]) !== JSON.stringify(atBuild.workloads[key]))
      Log.warn(
        `workloads.${key} differs from package.json pepr.env: the webhook's rules were written from the build's value, so it receives other kinds than the ones judged (set it there and rebuild)`,
      );
}

/**
 * The live cluster view the rules read: caches in each process that judges (not in a Watch
 * binding, which runs in the watcher pod only), started unless building. serviceAccountFor names
 * the ServiceAccount a new namespace gets (capabilities/service-account).
 */
export function startCluster(
  settings: Settings,
  role: ModuleRole,
  serviceAccountFor: (ns: NamespaceInfo, settings: Settings) => string | undefined,
): LiveCluster {
  // Registry credentials for reading image configs (images.credentialsSecrets), kept fresh.
  const credentials = new CredentialsStore(settings.images.credentialsSecrets, Log);
  // And from the controller's cloud identity (images.cloudCredentials): a Secret naming a
  // registry comes first.
  const cloud = new CloudCredentials(settings.images.cloudCredentials, {
    env: process.env,
    plainHttp: settings.images.plainHttp,
    log: Log,
  });
  if (!role.building && settings.images.inspect) {
    credentials.start();
    cloud.start();
  }
  const cluster = new LiveCluster(Log, {
    exemptionsNamespace: settings.exemptions.enabled ? settings.exemptions.namespace : undefined,
    // Exemptions count only in the namespace the install created (the build overlay, scripts/overlay/entries.ts).
    exemptionsOwner: pepr.uuid,
    // New namespaces get their ServiceAccount from the admission controller only.
    serviceAccountFor: role.watcher ? undefined : ns => serviceAccountFor(ns, settings),
    images: settings.images.inspect
      ? imageInspectorFor(
          settings,
          Log,
          registry => credentials.get(registry) ?? cloud.get(registry),
        )
      : undefined,
  });
  if (!role.building) {
    cluster.start();
    // Ours to apply at every start, as Pepr applies its PeprStore CRD (lib/cluster/exemption-crd.ts).
    if (!role.watcher) void installExemptionCrd(Log);
    // `pepr dev` applies none of the overlay's objects: the namespace is created here, never adopted.
    if (role.dev && settings.exemptions.enabled)
      void createExemptionsNamespace(settings.exemptions.namespace, pepr.uuid, Log);
  }
  return cluster;
}

const always = () => true;
const running = (role: ModuleRole) => !role.building;
// The watcher serves no reviews.
const admitting = (role: ModuleRole) => !role.building && !role.watcher;

/** Pepr 1.1.4 mended in place, in this order; each says so when Pepr no longer has what it replaces. */
const MENDS: { install: () => boolean; when: (role: ModuleRole) => boolean; failed: string }[] = [
  // While stdout does not drain, Pepr's log held every line, a denial's included: without bound.
  {
    install: installBoundedLog,
    when: running,
    failed: "could not bound Pepr's log buffer (its logger's stream was not found)",
  },
  // Reviews up to the API server's sizes reach our payload-size rules instead of failing with an
  // opaque 413 (see lib/pepr/webhook-body-limit.ts).
  {
    install: raiseWebhookBodyLimit,
    when: always,
    failed: "could not raise Pepr's request body limit (2mb)",
  },
  // Only a review on the secret API path is read, within a budget of bytes; anything else is
  // answered unread and its connection closed (lib/pepr/webhook-doors.ts). Inside the metrics and
  // the drain, which wrap it.
  {
    install: installPathBeforeBody,
    when: running,
    failed: "could not check the API path before Pepr reads a request body",
  },
  // Timeouts and a connection cap on the server Pepr makes (none in Pepr 1.1.4).
  {
    install: boundWebhookServer,
    when: running,
    failed: "could not bound Pepr's webhook server (connections, timeouts)",
  },
  // Pepr's copy of each request is quadratic in alike entries: a hostile pod's 35,000 would stall it.
  {
    install: installLinearClone,
    when: running,
    failed: "could not replace Pepr's request copy (ramda clone)",
  },
  // Our metrics on Pepr's /metrics, and every review timed and counted (docs/operations.md).
  {
    install: serveWithPepr,
    when: running,
    failed: "could not add admission-guard's metrics to Pepr's /metrics",
  },
  {
    install: installReviewMetrics,
    when: admitting,
    failed: "could not count admission reviews on /metrics",
  },
  // Answers are never cached: express need not hash each one for an ETag.
  {
    install: installPlainAnswers,
    when: admitting,
    failed: "could not turn off ETags on Pepr's server",
  },
  // The admission pods' preStop hook drains them before Pepr closes its server (a rollout or a
  // deleted pod then refuses no request).
  {
    install: installGracefulDrain,
    when: admitting,
    failed: "could not install the graceful drain on Pepr's server",
  },
];

/** Mends Pepr; call it before Pepr builds its server (new PeprModule). */
export function mendPepr(role: ModuleRole): void {
  for (const mend of MENDS) if (mend.when(role) && !mend.install()) Log.warn(mend.failed);
}

/**
 * Says so when Pepr, started, made its server otherwise than the mends expect: a later Pepr that
 * no longer calls `https.createServer(options, app)` leaves its server with Node's defaults.
 */
export function checkPeprStarted(role: ModuleRole): void {
  if (running(role) && !webhookServerBounded())
    Log.warn(
      "could not bound Pepr's webhook server: Pepr made none with https.createServer(options, app) (no connection cap, Node's 300 s request timeout)",
    );
}

/**
 * The report scan and the fix Events, each off when its setting says so. They run where Pepr runs
 * the Watch bindings: the watcher (and `pepr dev`).
 */
export function startBackground(deps: ModuleDeps, role: ModuleRole): void {
  if (role.building || !(role.watcher || role.dev)) return;
  const { settings, cluster } = deps;
  const { reports, events } = settings;
  // Pods and workloads listed (paged) and watched by the module itself, none kept: Pepr's Watch
  // bindings keep every object whole (lib/reports/scan-watches.ts).
  const watches = new ScanWatches({
    workloadKinds: kindsInForce(settings.workloads),
    ignoredNamespaces: watchIgnoredNamespaces(pepr),
    log: Log,
  });
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
  // The scan, once its store is known: at once for reports.api's default, after discovery for
  // the others; none when no API it names is served (nothing to judge for, nothing counted as
  // written).
  let scanner: ReportScanner | undefined;
  const scanning = (
    reports.enabled ? liveReportStore(reports.api, Log) : Promise.resolve(undefined)
  ).then(store => {
    scanner = store
      ? new ReportScanner(() => deps, store, {
          intervalMs: reports.intervalSeconds * 1000,
          maxResults: reports.maxResults,
          // Judging again reads the objects again: the scan keeps none.
          relist: watches.relist,
          log: Log,
        })
      : undefined;
    configureBackground({ scanner, events: fixEvents });
  });
  if (reports.enabled) {
    // What the objects are judged with changed: an Exemption, a cache that listed (again). A
    // namespace's labels: capabilities/reports' Namespace binding (lib/reports/watcher.ts).
    cluster.exemptionStore?.listeners.push(() => scanner?.rejudgeSoon());
    for (const store of [
      cluster.namespaces,
      cluster.quotas,
      cluster.nodeStore,
      cluster.exemptionStore,
    ])
      store?.listListeners.push(() => scanner?.rejudgeSoon());
  }
  // Watched once the caches the objects are judged with have listed (15 s at most): a start
  // judges each object once, not again as each cache lists.
  const caches = reports.enabled ? cluster.caches().map(([, store]) => store) : [];
  void Promise.all([scanning, whenListed(caches, 15_000)]).then(() =>
    watches.start({ scanner, events: fixEvents }),
  );
  configureBackground({ scanner, events: fixEvents });
}

/**
 * The webhooks are installed failing open (onError: audit) and armed by the admission controller
 * once a replica answers behind their Service: an install whose controller never starts locks no
 * one out (lib/webhooks/arming.ts).
 */
export function armWebhooks(settings: Settings, role: ModuleRole): void {
  if (role.building || role.watcher) return;
  new WebhookArming({
    name: `pepr-${pepr.uuid}`,
    wanted: settings.webhooks.failurePolicy,
    log: Log,
  }).start();
}
