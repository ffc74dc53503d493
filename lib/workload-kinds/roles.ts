// The pod templates of a workload kind's object (its roles) and how many pods each makes at once.
// Pure and total: a malformed object yields fewer roles, never a throw.
import type { V1ObjectMeta, V1PodSpec } from "@kubernetes/client-node";
import type { KubeObject, PodTemplateRef } from "../objects/pod";
import { isRecord } from "../objects/record";
import { groupOf, type CountTerm, type TemplateSpec, type WorkloadKindSpec } from "./kind-spec";
import { findAll, findAt, parsePath, pathWith } from "./paths";
import type { RuntimeSource } from "./serving-runtimes";
import { inferenceServiceRoles } from "./inference-service";

/** One pod template of a workload and the pods it makes. */
export interface PodRole {
  /** "Worker", "head", "trainer": how messages name it. */
  name: string;
  template: PodTemplateRef;
  /** Pods made from it at once. */
  pods: number;
  /** The field that sets the count, for messages ("spec.pytorchReplicaSpecs.Worker.replicas"); "" when fixed. */
  field: string;
  /** The most pods it may grow to (an autoscaled group), when more than `pods`. */
  atMost?: number;
  /**
   * A role whose pod spec is built (an InferenceService's component): a finding's field of the
   * built spec (`spec.predictor.spec.containers[0]`) renamed to where the object says it.
   */
  rename?: (text: string) => string;
  /** What could not be judged of the role, said once as a warning (a model's runtime not known). */
  notes?: string[];
}

/** The kind spec for an object among the kinds in force (in-force.ts), matched on API group and kind (any version). */
export function workloadKindOf(
  obj: KubeObject,
  kinds: readonly WorkloadKindSpec[] = [],
): WorkloadKindSpec | undefined {
  if (
    !kinds.length ||
    !isRecord(obj) ||
    typeof obj.kind !== "string" ||
    typeof obj.apiVersion !== "string"
  )
    return undefined;
  const group = groupOf(obj.apiVersion);
  if (!group) return undefined;
  return kinds.find(s => s.kind === obj.kind && groupOf(s.apiVersion) === group);
}

// Paths come from a table and a setting, a few dozen in all: each is parsed once.
const parsedPaths = new Map<string, readonly string[] | undefined>();
const segmentsOf = (path: string): readonly string[] | undefined => {
  if (!parsedPaths.has(path)) {
    const parsed = parsePath(path);
    if (parsedPaths.size > 1000) parsedPaths.clear(); // bounded, whatever a setting holds
    parsedPaths.set(path, parsed.ok ? parsed.segments : undefined);
  }
  return parsedPaths.get(path);
};

const asCount = (v: unknown): number | undefined =>
  typeof v === "number" && Number.isSafeInteger(v) && v >= 0 ? v : undefined;

function read(obj: KubeObject, path: string | undefined, keys: (string | number)[]) {
  const segments = path ? segmentsOf(path) : undefined;
  return segments ? findAt(obj, segments, keys) : undefined;
}

/** A count field's value, with the template's `*`s bound: the API's default when absent, 0 when malformed. */
function countOf(
  obj: KubeObject,
  term: string | CountTerm,
  keys: (string | number)[],
): { value: number; where?: string } {
  const t: CountTerm = typeof term === "string" ? { path: term } : term;
  const found = read(obj, t.path, keys);
  let value = found ? (asCount(found.value) ?? 0) : (t.default ?? 1);
  const min = t.min ? asCount(read(obj, t.min, keys)?.value) : undefined;
  const max = t.max ? asCount(read(obj, t.max, keys)?.value) : undefined;
  if (min !== undefined && value < min) value = min;
  if (max !== undefined && value > max) value = max;
  value = Math.max(0, value - (t.minus ?? 0));
  return { value, where: found?.where ?? pathWith(segmentsOf(t.path) ?? [], keys) };
}

function product(
  obj: KubeObject,
  terms: (string | CountTerm)[] | undefined,
  keys: (string | number)[],
) {
  let pods = 1;
  const fields: string[] = [];
  for (const term of terms ?? []) {
    const { value, where } = countOf(obj, term, keys);
    pods *= value;
    if (where) fields.push(where);
  }
  return { pods, field: fields.join(" × ") };
}

const present = (obj: KubeObject, path: string | undefined) => {
  const segments = path ? segmentsOf(path) : undefined;
  return !!segments && findAll(obj, segments).length > 0;
};

function rolesOfTemplate(obj: KubeObject, spec: TemplateSpec): PodRole[] {
  const segments = segmentsOf(spec.template);
  if (!segments) return [];
  if (spec.ifAbsent && present(obj, spec.ifAbsent)) return [];
  if (spec.ifPresent && !present(obj, spec.ifPresent)) return [];
  const roles: PodRole[] = [];
  for (const match of findAll(obj, segments)) {
    const template = match.value;
    if (!isRecord(template) || !isRecord(template.spec)) continue;
    if (!isRecord(template.metadata)) template.metadata = {};
    const named = spec.name
      ? findAt(obj, segmentsOf(spec.name) ?? [], match.keys)?.value
      : undefined;
    const lastKey = match.keys.at(-1);
    const name =
      spec.role ??
      (typeof named === "string" && named ? named : undefined) ??
      (lastKey === undefined ? match.where : typeof lastKey === "number" ? `#${lastKey}` : lastKey);
    const { pods, field } = product(obj, spec.replicas, match.keys);
    const most = spec.atMost ? product(obj, spec.atMost, match.keys).pods : undefined;
    roles.push({
      name,
      template: {
        metadata: template.metadata as V1ObjectMeta,
        spec: template.spec as unknown as V1PodSpec,
        path: match.where,
      },
      pods,
      field,
      ...(most !== undefined && most > pods ? { atMost: most } : {}),
    });
  }
  return roles;
}

/**
 * Every pod template of the object, in the order of its kind spec. Missing metadata is created on
 * the template. A kind built in code reads the cluster view (an InferenceService's runtimes).
 */
export function podRolesOf(
  obj: KubeObject,
  kind: WorkloadKindSpec,
  cluster?: RuntimeSource,
  namespace?: string,
): PodRole[] {
  if (kind.builtBy === "inference-service") return inferenceServiceRoles(obj, cluster, namespace);
  return kind.templates.flatMap(t => rolesOfTemplate(obj, t));
}

/** Whether the workload is held back: its kind's suspend field is true (Kueue holds what it queues that way). */
export function isSuspended(obj: KubeObject, kind: WorkloadKindSpec): boolean {
  const segments = kind.suspend ? segmentsOf(kind.suspend) : undefined;
  return !!segments && findAt(obj, segments, [])?.value === true;
}
