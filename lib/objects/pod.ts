// Every container of a pod spec, and what an UPDATE changed (where a workload kind keeps its pod
// template: lib/workload-kinds/built-in.ts).
// Pure: no Pepr, no I/O. Types are the API server's own (type-only import, erased at build).
import type {
  V1Container,
  V1EphemeralContainer,
  V1ObjectMeta,
  V1PodSpec,
} from "@kubernetes/client-node";
import { isRecord } from "./record";

/** The minimum every object we look at has. Everything may be missing: input is untrusted. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: V1ObjectMeta;
  [key: string]: unknown;
}

/** Where a pod spec was found: the object, its metadata and the spec itself. */
export interface PodTemplateRef {
  /** The pod's or the template's metadata (labels, annotations of the pods that will run). */
  metadata: V1ObjectMeta;
  spec: V1PodSpec;
  /** JSON path of the template for messages, e.g. "spec.template" or "spec.jobTemplate.spec.template"; "" for a Pod. */
  path: string;
}

export type ContainerKind = "containers" | "initContainers" | "ephemeralContainers";

export interface ContainerRef {
  kind: ContainerKind;
  index: number;
  container: V1Container | V1EphemeralContainer;
  /** JSON path for messages, e.g. "spec.containers[0]". */
  path: string;
}

export function isPod(obj: KubeObject): boolean {
  return obj.kind === "Pod";
}

/** Whether a controller made this object (a Deployment's ReplicaSet, a CronJob's Job). */
export function hasController(obj: KubeObject): boolean {
  return (obj.metadata?.ownerReferences ?? []).some(o => o.controller === true);
}

/** Joins a template path and a field for messages: ("", "spec.x") → "spec.x"; ("spec.template", "spec.x") → "spec.template.spec.x". */
export function fieldPath(template: PodTemplateRef, field: string): string {
  return template.path ? `${template.path}.${field}` : field;
}

/**
 * Every container of a pod spec, init and ephemeral ones included, in the order the kubelet
 * knows them. Entries that are not objects are skipped (a malformed request must not crash us).
 */
export function containersOf(template: PodTemplateRef): ContainerRef[] {
  const out: ContainerRef[] = [];
  for (const kind of ["initContainers", "containers", "ephemeralContainers"] as const) {
    const list = (template.spec as unknown as Record<string, unknown>)[kind];
    if (!Array.isArray(list)) continue;
    list.forEach((container, index) => {
      if (!isRecord(container)) return;
      out.push({
        kind,
        index,
        container: container as unknown as V1Container,
        path: fieldPath(template, `spec.${kind}[${index}]`),
      });
    });
  }
  return out;
}

/** A field of a pod spec that names an image the kubelet pulls. */
export interface ImageRefField {
  /** For messages: `container "trainer"`, `image volume "weights"`. */
  owner: string;
  /** The field's name in messages: "image" (a container), "reference" (an image volume). */
  field: "image" | "reference";
  /** JSON path of the field, e.g. "spec.containers[0].image" or "spec.volumes[2].image.reference". */
  path: string;
  /** What the field holds: untrusted, may be anything. */
  value: unknown;
  /** Writes another image into the field (the mirror rewrite). */
  set(image: string): void;
}

/**
 * Every image a pod spec pulls: each container's `image`, then each image volume's
 * `image.reference` (Kubernetes image volumes, e.g. model weights mounted from a registry), so that
 * a rule on images sees them all through one walk.
 */
export function imagesOf(template: PodTemplateRef): ImageRefField[] {
  const out: ImageRefField[] = containersOf(template).map(c => ({
    owner: describeContainer(c),
    field: "image",
    path: `${c.path}.image`,
    value: c.container.image,
    set: (image: string) => (c.container.image = image),
  }));
  const volumes: unknown = (template.spec as unknown as Record<string, unknown>).volumes;
  if (!Array.isArray(volumes)) return out;
  volumes.forEach((volume, index) => {
    if (!isRecord(volume) || !isRecord(volume.image)) return;
    const source = volume.image;
    out.push({
      owner: `image volume "${typeof volume.name === "string" ? volume.name : `#${index}`}"`,
      field: "reference",
      path: fieldPath(template, `spec.volumes[${index}].image.reference`),
      value: source.reference,
      set: (image: string) => (source.reference = image),
    });
  });
  return out;
}

/** A short human name for a container in messages: `container "trainer"` / `init container "setup"`. */
export function describeContainer(ref: ContainerRef): string {
  const label =
    ref.kind === "containers"
      ? "container"
      : ref.kind === "initContainers"
        ? "init container"
        : "ephemeral container";
  return `${label} "${ref.container.name ?? `#${ref.index}`}"`;
}

/** "Pod ml/trainer", "Deployment ml/gpt4-canary"; generateName and missing names handled. */
export function describeObject(obj: KubeObject): string {
  const meta = obj.metadata ?? {};
  const name = meta.name || (meta.generateName ? `${meta.generateName}*` : "(unnamed)");
  return `${obj.kind ?? "object"} ${meta.namespace ? `${meta.namespace}/` : ""}${name}`;
}

const CONTAINER_LISTS = ["initContainers", "containers", "ephemeralContainers"] as const;

/**
 * Whether a Pod UPDATE changed any container: an image (the one container field a pod update may
 * change) or an ephemeral container added (`kubectl debug`). Labels, annotations, finalizers,
 * tolerations, status: not a container change.
 */
export function containersChanged(pod: KubeObject, old: KubeObject): boolean {
  const spec = (obj: KubeObject) => (isRecord(obj.spec) ? obj.spec : {});
  const now = spec(pod);
  const before = spec(old);
  return CONTAINER_LISTS.some(list => JSON.stringify(now[list]) !== JSON.stringify(before[list]));
}

/**
 * Whether a Pod UPDATE changes what its containers (or the pod, `spec.resources`) ask: an
 * in-place resize (`pods/resize`), the only way a pod's resources change after its creation.
 */
export function resourcesChanged(pod: KubeObject, old: KubeObject): boolean {
  const asked = (obj: KubeObject) => {
    const spec = isRecord(obj.spec) ? obj.spec : {};
    const of = (list: unknown) =>
      Array.isArray(list) ? list.map(c => (isRecord(c) ? (c.resources ?? null) : null)) : [];
    return canonicalJson([of(spec.initContainers), of(spec.containers), spec.resources ?? null]);
  };
  return asked(pod) !== asked(old);
}

/** JSON with sorted keys: the same object whatever order its keys came in. */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_k, v) =>
    isRecord(v)
      ? Object.fromEntries(
          Object.keys(v)
            .sort()
            .map(k => [k, v[k]]),
        )
      : v,
  );
}

/**
 * Whether a workload UPDATE changes its spec (pod template, replicas, parallelism, ...): a change of
 * metadata only (labels, annotations, finalizers, ownerReferences) or of status makes no pod.
 */
export function workloadSpecChanged(workload: KubeObject, old: KubeObject): boolean {
  return canonicalJson(workload.spec ?? null) !== canonicalJson(old.spec ?? null);
}

/**
 * Whether an UPDATE changes more than metadata and status (a ConfigMap's data, a Secret's, a
 * spec): what an object being deleted may not change unjudged.
 */
export function contentChanged(obj: KubeObject, old: KubeObject): boolean {
  const content = (o: KubeObject) =>
    canonicalJson(
      Object.fromEntries(
        Object.entries(o).filter(([k]) => !["metadata", "status", "apiVersion"].includes(k)),
      ),
    );
  return content(obj) !== content(old);
}

/** An object the API server is deleting (its finalizers are being removed). */
export const isBeingDeleted = (obj: KubeObject): boolean =>
  Boolean((obj.metadata as { deletionTimestamp?: unknown } | undefined)?.deletionTimestamp);
