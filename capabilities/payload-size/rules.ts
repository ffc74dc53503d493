// Oversize objects and runaway counts, denied with the biggest parts named, before they reach
// etcd's ~1.5 MiB object limit or the webhook's HTTP body limit (where the user would only see an
// opaque "failed calling webhook").
//
// On UPDATE, a measure that did not grow since the stored version only warns: an object that is
// already too big must stay editable, so that it can be made smaller.
import {
  containersOf,
  describeContainer,
  describeObject,
  fieldPath,
  type KubeObject,
} from "../../lib/objects/pod";
import { envName, type Settings } from "../../lib/settings";
import {
  noFindings,
  type PodTarget,
  type RuleContext,
  type RuleFindings,
  type RuleViolation,
} from "../../lib/engine/policy";
import {
  annotationBytes,
  countOf,
  formatBytes,
  jsonBytes,
  projectedSourceCount,
  projectedSources,
  storedForm,
  withoutPeprAnnotations,
  withThousands,
} from "./measure";
import type { StoredVersion } from "../../lib/engine/policy";
import { isRecord } from "../../lib/objects/record";

export const CAPABILITY = "payload-size";
/** How many of the biggest parts a denial names. */
const TOP = 3;

type Limits = Settings["payload"];

interface Part {
  label: string;
  bytes: number;
}

/**
 * The parts of an object worth naming, biggest first: a Pod's or a workload's containers, or, for
 * a workload with several roles, each role's pod template.
 */
export function biggestParts(obj: KubeObject, targets: readonly PodTarget[]): Part[] {
  const parts: Part[] = [];
  const annotate = (annotations: unknown, where: string) => {
    if (!isRecord(annotations)) return;
    for (const [k, v] of Object.entries(annotations))
      parts.push({ label: `${where}annotation "${k}"`, bytes: jsonBytes(k) + jsonBytes(v) });
  };
  annotate(withoutPeprAnnotations(obj).metadata?.annotations, "");
  if (Array.isArray(obj.metadata?.managedFields))
    parts.push({ label: "metadata.managedFields", bytes: jsonBytes(obj.metadata.managedFields) });
  if (targets.length > 1)
    for (const { role, template } of targets)
      parts.push({
        label: `${role ? `role ${role.name}` : "pod template"} (${template.path})`,
        bytes: jsonBytes({ metadata: template.metadata, spec: template.spec }),
      });
  const target = targets.length === 1 ? targets[0] : undefined;
  if (target) {
    if (target.template.path) annotate(target.template.metadata.annotations, "pod template ");
    for (const c of containersOf(target.template)) {
      const env = countOf(c.container.env);
      parts.push({
        label: `${describeContainer(c)}${env ? `: ${plural(env, "env entry", "env entries")}` : ""}`,
        bytes: jsonBytes(c.container),
      });
    }
    const volumes = countOf(target.template.spec.volumes);
    if (volumes)
      parts.push({
        label: `${fieldPath(target.template, "spec.volumes")}: ${plural(volumes, "volume")}`,
        bytes: jsonBytes(target.template.spec.volumes),
      });
  }
  for (const field of ["data", "binaryData"]) {
    const data = obj[field];
    if (!isRecord(data)) continue;
    for (const [k, v] of Object.entries(data))
      parts.push({ label: `${field} key "${k}"`, bytes: jsonBytes(k) + jsonBytes(v) });
  }
  return parts.sort((a, b) => b.bytes - a.bytes);
}

const plural = (n: number, one: string, many = `${one}s`) =>
  `${withThousands(n)} ${n === 1 ? one : many}`;

const partsText = (parts: Part[]) =>
  parts
    .slice(0, TOP)
    .map(p => `${p.label}, ${formatBytes(p.bytes)}`)
    .join("; ");

const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

function sizeFix(obj: KubeObject, parts: Part[]): string {
  const kind = obj.kind ?? "object";
  const hints: string[] = [];
  if (parts.slice(0, TOP).some(p => p.label.includes(LAST_APPLIED)))
    hints.push(
      `apply with kubectl apply --server-side, which does not copy the object into the ${LAST_APPLIED} annotation`,
    );
  if (kind === "ConfigMap" || kind === "Secret")
    hints.push(
      `split the data across several ${kind}s and mount them together with one projected volume, or keep large files out of the API (in the image or in object storage)`,
    );
  else
    hints.push(
      "move configuration into a ConfigMap referenced by envFrom (configMapRef) or mounted as a volume, and large annotations into a ConfigMap; or split the object",
    );
  return hints.join("; ");
}

/** Whether the new value is a regression: always on CREATE, on UPDATE only if it grew. */
function grew(next: number, previous: number | undefined): boolean {
  return previous === undefined || next > previous;
}

function limitViolation(
  rule: string,
  message: string,
  fix: string,
  setting: string,
  previous: number | undefined,
  next: number,
): RuleViolation {
  const notGrown = !grew(next, previous);
  return {
    rule,
    message: notGrown ? `${message} (no bigger than the stored version, so allowed)` : message,
    fix: `${fix}. Admins: payload.${setting} (env ${envName(`payload.${setting}`)})`,
    severity: notGrown ? "warn" : undefined,
  };
}

/**
 * check: object size, annotation bytes, and per-container and per-pod counts. On one role of a
 * workload with several (a RayCluster's worker group), only what is the role's own: the object as
 * a whole is measured once, by checkGangPayload.
 */
export function checkPayload(
  object: KubeObject,
  target: PodTarget | undefined,
  ctx: RuleContext,
): RuleFindings {
  const findings = noFindings();
  const limits = ctx.settings.payload;
  if (!target?.role) checkWholeObject(findings.violations, object, ctx, target ? [target] : []);
  if (target) checkPodSpec(findings.violations, target, limits, ctx.stored);
  return findings;
}

/** checkGang: the size and annotations of a workload with several roles, once for them all. */
export function checkGangPayload(
  object: KubeObject,
  roles: readonly PodTarget[],
  ctx: RuleContext,
): RuleFindings {
  const findings = noFindings();
  checkWholeObject(findings.violations, object, ctx, roles);
  return findings;
}

function checkWholeObject(
  v: RuleViolation[],
  object: KubeObject,
  ctx: RuleContext,
  targets: readonly PodTarget[],
) {
  const limits = ctx.settings.payload;
  // The stored version measured as this one is: without Pepr's annotations, stringData merged.
  const old = ctx.stored && storedForm(ctx.stored.object);
  // A limit of 0 turns a check off.
  const stored = storedForm(object);
  const bytes = jsonBytes(stored);
  if (limits.maxObjectBytes && bytes > limits.maxObjectBytes) {
    const parts = biggestParts(stored, targets);
    v.push(
      limitViolation(
        "object-too-large",
        `${describeObject(object)} is ${formatBytes(bytes)} (${withThousands(bytes)} bytes) serialized, over the limit of ${formatBytes(limits.maxObjectBytes)}; biggest parts: ${partsText(parts)}`,
        sizeFix(object, parts),
        "maxObjectBytes",
        old && jsonBytes(old),
        bytes,
      ),
    );
  }
  checkAnnotations(v, stored.metadata?.annotations, "metadata.annotations", limits, old?.metadata);
}

function checkAnnotations(
  v: RuleViolation[],
  annotations: unknown,
  field: string,
  limits: Limits,
  oldHolder: { annotations?: unknown } | undefined,
): void {
  const total = annotationBytes(annotations);
  if (!limits.maxAnnotationBytes || total <= limits.maxAnnotationBytes) return;
  const biggest = Object.entries(annotations as Record<string, unknown>)
    .map(([k, val]) => ({ label: `"${k}"`, bytes: annotationBytes({ [k]: val }) }))
    .sort((a, b) => b.bytes - a.bytes);
  v.push(
    limitViolation(
      "annotations-too-large",
      `${field} total ${formatBytes(total)} (${withThousands(total)} bytes of keys and values), over the limit of ${formatBytes(limits.maxAnnotationBytes)}; biggest: ${partsText(biggest)}`,
      `move large values out of ${field} into a ConfigMap; for ${LAST_APPLIED}, use kubectl apply --server-side`,
      "maxAnnotationBytes",
      oldHolder ? annotationBytes(oldHolder.annotations) : undefined,
      total,
    ),
  );
}

/** Per-container counts: the field, its limit, and how to get under it. */
const CONTAINER_COUNTS: {
  rule: string;
  field: "env" | "envFrom" | "volumeMounts";
  what: string;
  setting: "maxEnvPerContainer" | "maxEnvFromPerContainer" | "maxVolumeMountsPerContainer";
  fix: (path: string) => string;
}[] = [
  {
    rule: "too-many-env",
    field: "env",
    what: "env entries",
    setting: "maxEnvPerContainer",
    fix: path =>
      `move them into a ConfigMap and reference it with ${path}.envFrom[].configMapRef, or mount it as a volume and read the file`,
  },
  {
    rule: "too-many-env-from",
    field: "envFrom",
    what: "envFrom sources",
    setting: "maxEnvFromPerContainer",
    fix: path => `merge the ConfigMaps and Secrets in ${path}.envFrom into fewer ones`,
  },
  {
    rule: "too-many-volume-mounts",
    field: "volumeMounts",
    what: "volumeMounts",
    setting: "maxVolumeMountsPerContainer",
    fix: path =>
      `mount one projected volume (or one directory) instead of many single files in ${path}.volumeMounts`,
  },
];

function checkPodSpec(
  v: RuleViolation[],
  target: PodTarget,
  limits: Limits,
  stored: StoredVersion | undefined,
) {
  const template = target.template;
  const oldTemplate = stored?.templateAt(target.template.path);
  const oldSpec = oldTemplate && (oldTemplate.spec as unknown as Record<string, unknown>);
  const oldContainer = (kind: string, name: unknown) => {
    const list = oldSpec?.[kind];
    return Array.isArray(list)
      ? (list.find(c => isRecord(c) && c.name === name) as Record<string, unknown> | undefined)
      : undefined;
  };
  const oldCount = (list: unknown) => (oldSpec ? countOf(list) : undefined);

  if (template.path)
    checkAnnotations(
      v,
      template.metadata.annotations,
      fieldPath(template, "metadata.annotations"),
      limits,
      oldTemplate?.metadata,
    );

  const volumes = countOf(template.spec.volumes);
  if (limits.maxVolumes && volumes > limits.maxVolumes)
    v.push(
      limitViolation(
        "too-many-volumes",
        `${fieldPath(template, "spec.volumes")} has ${withThousands(volumes)} volumes (${formatBytes(jsonBytes(template.spec.volumes))}), over the limit of ${withThousands(limits.maxVolumes)}`,
        `combine ConfigMaps, Secrets and downward API items into one projected volume (${fieldPath(template, "spec.volumes")}[].projected.sources)`,
        "maxVolumes",
        oldCount(oldSpec?.volumes),
        volumes,
      ),
    );

  checkProjectedSources(v, template, limits, oldSpec && projectedSourceCount(oldSpec.volumes));

  for (const c of containersOf(template)) {
    const before = oldSpec ? (oldContainer(c.kind, c.container.name) ?? {}) : undefined;
    const fields = c.container as unknown as Record<string, unknown>;
    for (const count of CONTAINER_COUNTS) {
      const limit = limits[count.setting];
      const n = countOf(fields[count.field]);
      if (!limit || n <= limit) continue;
      const size = count.field === "env" ? ` (${formatBytes(jsonBytes(fields.env))})` : "";
      v.push(
        limitViolation(
          count.rule,
          `${describeContainer(c)} has ${withThousands(n)} ${count.what}${size}, over the limit of ${withThousands(limit)}`,
          count.fix(c.path),
          count.setting,
          before && countOf(before[count.field]),
          n,
        ),
      );
    }
  }
}

/**
 * Sources of projected volumes, all volumes together: each is an object the kubelet fetches and
 * watches, and each secret one the service-account rule may be asked about.
 */
function checkProjectedSources(
  v: RuleViolation[],
  template: PodTarget["template"],
  limits: Limits,
  previous: number | undefined,
) {
  const limit = limits.maxProjectedSources;
  const volumes = projectedSources(template.spec.volumes);
  const total = volumes.reduce((sum, p) => sum + p.sources, 0);
  if (!limit || total <= limit) return;
  const biggest = volumes
    .sort((a, b) => b.sources - a.sources)
    .slice(0, TOP)
    .map(p => `volume "${p.volume}" ${plural(p.sources, "source")}`)
    .join(", ");
  const field = fieldPath(template, "spec.volumes");
  v.push(
    limitViolation(
      "too-many-projected-sources",
      `${field} has ${plural(total, "projected volume source")}, over the limit of ${withThousands(limit)}; biggest: ${biggest}`,
      `keep the values in fewer Secrets and ConfigMaps (one holds many keys, projected by one source with items) in ${field}[].projected.sources`,
      "maxProjectedSources",
      previous,
      total,
    ),
  );
}
