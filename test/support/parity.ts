// Parity between the two front doors: the same object through the real controller (admit) and
// through lib/engine `review()` (what `check` runs) over a SnapshotCluster of the same objects
// must give the same verdict and the same resulting object. Reusable by every capability's e2e test:
//
//   const report = await checkParity(controller, manifest, { objects: api.objects(), settings });
//   expect(report.differences).toEqual([]);
import type { V1LimitRange, V1Node, V1ResourceQuota } from "@kubernetes/client-node";
import { policies as allPolicies, validators } from "../../capabilities";
import { SnapshotCluster, type ClusterView, type RbacEvaluator } from "../../lib/cluster/view";
import type { ImageInspector } from "../../lib/images/inspector";
import { pendingWarnings, review, type Review } from "../../lib/engine";
import { evaluateSecretAccess } from "../../lib/cluster/rbac";
import type { KubeObject } from "../../lib/objects/pod";
import type { Policy } from "../../lib/engine/policy";
import { parseSettings, type SettingsInput } from "../../lib/settings";
import { formatViolation } from "../../lib/objects/verdict";
import cfg from "../../package.json";
import { admit, type AdmitOptions, type AdmitResult } from "./admission";
import type { Controller } from "./controller";

/**
 * A snapshot that answers like the live caches once synced: a watched kind with no object is
 * "none exist" ([], null), not "no data" (undefined) as a plain snapshot says; and access reviews
 * are answered as the stand-in answers them by default, from the RBAC objects it holds, nothing
 * allowed when it holds none.
 */
export class SyncedSnapshot extends SnapshotCluster {
  constructor(objects: KubeObject[], rbac?: RbacEvaluator, images?: ImageInspector) {
    super(
      objects,
      rbac ??
        ((all, namespace, serviceAccount, secrets) =>
          evaluateSecretAccess(all, namespace, serviceAccount, secrets) ?? {
            allowed: new Map(secrets.map(secret => [secret, false])),
          }),
      images,
      // As `check` and the controller: the Exemptions namespace is owned with this module's uuid.
      cfg.pepr.uuid,
    );
  }
  serviceAccount(namespace: string, name: string) {
    return super.serviceAccount(namespace, name) ?? null;
  }
  resourceQuotas(namespace: string): V1ResourceQuota[] {
    return super.resourceQuotas(namespace) ?? [];
  }
  limitRanges(namespace: string): V1LimitRange[] {
    return super.limitRanges(namespace) ?? [];
  }
  nodes(): V1Node[] {
    return super.nodes() ?? [];
  }
  servingRuntimes(namespace: string): readonly KubeObject[] {
    return super.servingRuntimes(namespace) ?? [];
  }
  clusterServingRuntimes(): readonly KubeObject[] {
    return super.clusterServingRuntimes() ?? [];
  }
}

/** Controller environment carrying these settings (give the same to checkParity). */
export function settingsEnv(settings: SettingsInput = {}): Record<string, string> {
  parseSettings(settings, "test settings"); // fail here, not in the controller
  return { ADMISSION_GUARD_SETTINGS: JSON.stringify(settings) };
}

export interface ParityOptions extends AdmitOptions {
  /** The cluster objects (usually `api.objects()`). */
  objects: KubeObject[];
  /** The settings the controller was started with (see settingsEnv). */
  settings?: SettingsInput;
  rbac?: RbacEvaluator;
  /** Reads image configs for the engine, as `check --inspect-images` (default: none). */
  images?: ImageInspector;
  /** Replace the cluster view entirely (default: SyncedSnapshot of objects and rbac). */
  cluster?: ClusterView;
  policies?: Policy[];
}

export interface ParityReport {
  e2e: AdmitResult;
  engine: Review;
  /** The denial message the engine's verdict formats to. */
  engineMessage: string;
  /** Human-readable differences; empty when the front doors agree. */
  differences: string[];
}

const PEPR_ANNOTATION = `${cfg.pepr.uuid}.pepr.dev/`;

/** The object without Pepr's own `<uuid>.pepr.dev/*` annotations (and without an emptied map). */
export function withoutPeprAnnotations(obj: KubeObject): KubeObject {
  const copy = structuredClone(obj);
  const annotations = copy.metadata?.annotations;
  if (annotations) {
    for (const key of Object.keys(annotations))
      if (key.startsWith(PEPR_ANNOTATION)) delete annotations[key];
    if (!Object.keys(annotations).length) delete copy.metadata!.annotations;
  }
  return copy;
}

/** JSON with sorted keys: equality that ignores key order. */
export function canonical(value: unknown): string {
  return JSON.stringify(value, (_k, v) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b)))
      : v,
  );
}

/** Sends the object through the controller and through the engine, and lists where they differ. */
export async function checkParity(
  controller: Controller,
  manifest: KubeObject,
  opts: ParityOptions,
): Promise<ParityReport> {
  const e2e = await admit(controller, manifest, opts);
  const request = e2e.request;
  const engine = await review(
    opts.policies ?? allPolicies,
    request.object as KubeObject,
    {
      // As the tests' controllers run (IMAGES_OFF), unless the test says otherwise.
      settings: parseSettings(
        { ...opts.settings, images: { inspect: false, ...opts.settings?.images } },
        "test settings",
      ),
      cluster: opts.cluster ?? new SyncedSnapshot(opts.objects, opts.rbac, opts.images),
      operation: request.operation as "CREATE" | "UPDATE",
      namespace: request.namespace,
      oldObject: request.oldObject ?? undefined,
      dryRun: request.dryRun,
    },
    validators,
  );

  const engineMessage = engine.denials.join("; ");
  const differences: string[] = [];
  if (e2e.allowed !== engine.allowed)
    differences.push(`allowed: controller ${e2e.allowed}, engine ${engine.allowed}`);
  if (e2e.message !== engineMessage)
    differences.push(
      `denial message:\n  controller: ${e2e.message}\n  engine:     ${engineMessage}`,
    );
  // One decision path: the same warnings, word for word, in the same order.
  const webhookWarnings = e2e.validateResponse.warnings ?? [];
  if (engine.handled && canonical(webhookWarnings) !== canonical(engine.warnings))
    differences.push(
      `warnings:\n  controller: ${JSON.stringify(webhookWarnings)}\n  engine:     ${JSON.stringify(engine.warnings)}`,
    );
  // Violations that only warn must reach the user through the controller too.
  const warned = engine.violations
    .map(formatViolation)
    .filter(line => !engine.denials.includes(line));
  for (const line of engine.mode === "audit" ? [] : warned)
    if (!e2e.warnings.includes(line))
      differences.push(`warning missing from the controller: ${line}`);
  if (manifest?.kind === "Pod" || opts.workloadsMutated) {
    const fromController = canonical(withoutPeprAnnotations(e2e.patched));
    const fromEngine = canonical(withoutPeprAnnotations(engine.object));
    if (fromController !== fromEngine)
      differences.push(
        `resulting pod:\n  controller: ${fromController}\n  engine:     ${fromEngine}`,
      );
  } else if (engine.handled && engine.mode !== "audit") {
    // Workloads are not mutated; both say what their pods will get.
    for (const line of pendingWarnings(engine.changes, String(manifest?.kind)))
      if (!e2e.warnings.includes(line)) differences.push(`pending-fix warning missing: ${line}`);
    if (canonical(e2e.patched) !== canonical(request.object))
      differences.push("the controller changed a workload (it must only warn)");
  }
  return { e2e, engine, engineMessage, differences };
}
