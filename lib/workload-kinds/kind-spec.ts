// How a workload kind says where its pod templates are and how many pods each makes: the form of
// the built-in table (table.ts) and of the setting workloads.kinds, with which a platform team adds
// its own kinds without code.

/** A count read from the object: the value at `path` (default when absent), less `minus`, within [min, max]. */
export interface CountTerm {
  path: string;
  /** The value when the field is absent (the API's own default). Default 1. */
  default?: number;
  /** Subtracted from the value (a LeaderWorkerSet group of `size` has size-1 workers). */
  minus?: number;
  /** A field the value is raised to at least (RayCluster's minReplicas). */
  min?: string;
  /** A field the value is lowered to at most (RayCluster's maxReplicas). */
  max?: string;
}

/** One pod template of a kind (one role of a gang: a PyTorchJob's Master, its Worker). */
export interface TemplateSpec {
  /** Path of a PodTemplateSpec ({metadata, spec}); `*` for every element of a list or map. */
  template: string;
  /** A fixed name of the role ("head"); else `name`, else the key the template's last `*` took. */
  role?: string;
  /** Path of the role's name, with the template's `*`s (`spec.replicatedJobs.*.name`). */
  name?: string;
  /** Pods the template makes at once: the product of these counts (none: 1). */
  replicas?: (string | CountTerm)[];
  /** The most pods it can grow to (an autoscaled group's maxReplicas): a warning when over quota. */
  atMost?: (string | CountTerm)[];
  /** Only when this field is absent (a LeaderWorkerSet without a leaderTemplate). */
  ifAbsent?: string;
  /** Only when this field is present. */
  ifPresent?: string;
}

export interface WorkloadKindSpec {
  /** "kubeflow.org/v1": the group decides (any version of it); the version is for the reader. */
  apiVersion: string;
  kind: string;
  /** The resource name in webhook rules; default: the kind in lower case + "s". */
  plural?: string;
  /** A field that, when true, holds the workload back (Kueue's suspend): quota then warns only. */
  suspend?: string;
  templates: TemplateSpec[];
  /**
   * A built-in kind whose pods are not templates at paths but built in code, from the object and
   * the cluster view (KServe's InferenceService: lib/workload-kinds/inference-service.ts). Not a
   * field of the setting. Such a kind's templates are never fixed in place (workloads.mutate): its
   * pods get the fixes when they are created.
   */
  builtBy?: "inference-service";
}

/** "kubeflow.org/v1" → "kubeflow.org"; "v1" → "" (the core group). */
export const groupOf = (apiVersion: string): string =>
  apiVersion.includes("/") ? apiVersion.slice(0, apiVersion.lastIndexOf("/")) : "";

/** The apiVersion of a group's version ("apps/v1"; "v1" for the core group ""). */
export const apiVersionOf = (ref: { group: string; version: string }): string =>
  ref.group ? `${ref.group}/${ref.version}` : ref.version;

/** "kubeflow.org/v1" → "v1". */
export const versionOf = (apiVersion: string): string =>
  apiVersion.slice(apiVersion.lastIndexOf("/") + 1);

export const pluralOf = (spec: WorkloadKindSpec): string =>
  spec.plural ?? `${spec.kind.toLowerCase()}s`;

/** "PyTorchJob.kubeflow.org": a kind as kubectl names a resource of a group (setting workloads.builtInKinds). */
export const kindName = (spec: WorkloadKindSpec): string =>
  `${spec.kind}.${groupOf(spec.apiVersion)}`;
