// The workload kinds judged at apply. Kubernetes' own (BUILT_IN_WORKLOADS: the one list of them;
// their pod template is at spec.template, a CronJob's at spec.jobTemplate.spec.template), then the
// ML kinds, in the form of the setting workloads.kinds: where each kind's pod templates are and how
// many pods each makes at once. Paths and defaults are those of
// each project's published API reference (Kubeflow Training Operator, KubeRay, JobSet,
// LeaderWorkerSet, Volcano, KServe); an operator then makes the pods, which are judged again at Pod CREATE.
import { kindName, type TemplateSpec, type WorkloadKindSpec } from "./kind-spec";

/** Kubernetes' own workload kinds, as a webhook rule names them (group "" is the core group). */
export const BUILT_IN_WORKLOADS = [
  { group: "apps", version: "v1", kind: "Deployment" },
  { group: "apps", version: "v1", kind: "StatefulSet" },
  { group: "apps", version: "v1", kind: "DaemonSet" },
  { group: "apps", version: "v1", kind: "ReplicaSet" },
  { group: "", version: "v1", kind: "ReplicationController" },
  { group: "batch", version: "v1", kind: "Job" },
  { group: "batch", version: "v1", kind: "CronJob" },
] as const;

/** Kubeflow's `<x>ReplicaSpecs`: a map of role (Master, Worker, PS, Launcher) → {replicas (default 1), template}. */
const kubeflowJob = (
  kind: string,
  field: string,
  apiVersion = "kubeflow.org/v1",
): WorkloadKindSpec => ({
  apiVersion,
  kind,
  suspend: "spec.runPolicy.suspend",
  templates: [{ template: `spec.${field}.*.template`, replicas: [`spec.${field}.*.replicas`] }],
});

/**
 * A Ray cluster's groups under `at`: the head (one pod) and each worker group, whose `replicas`
 * (default 0) the operator keeps within [minReplicas, maxReplicas], times numOfHosts (multi-host
 * TPU slices). An autoscaled group can grow to maxReplicas: a warning when that is over quota.
 */
const rayGroups = (at: string): TemplateSpec[] => [
  { template: `${at}headGroupSpec.template`, role: "head" },
  {
    template: `${at}workerGroupSpecs.*.template`,
    name: `${at}workerGroupSpecs.*.groupName`,
    replicas: [
      {
        path: `${at}workerGroupSpecs.*.replicas`,
        default: 0,
        min: `${at}workerGroupSpecs.*.minReplicas`,
        max: `${at}workerGroupSpecs.*.maxReplicas`,
      },
      `${at}workerGroupSpecs.*.numOfHosts`,
    ],
    atMost: [`${at}workerGroupSpecs.*.maxReplicas`, `${at}workerGroupSpecs.*.numOfHosts`],
  },
];

export const BUILT_IN_KINDS: readonly WorkloadKindSpec[] = [
  kubeflowJob("PyTorchJob", "pytorchReplicaSpecs"),
  kubeflowJob("TFJob", "tfReplicaSpecs"),
  kubeflowJob("XGBoostJob", "xgbReplicaSpecs"),
  kubeflowJob("PaddleJob", "paddleReplicaSpecs"),
  kubeflowJob("MPIJob", "mpiReplicaSpecs", "kubeflow.org/v2beta1"),
  {
    apiVersion: "kubeflow.org/v1",
    kind: "Notebook",
    templates: [{ template: "spec.template", role: "notebook" }],
  },
  {
    apiVersion: "ray.io/v1",
    kind: "RayCluster",
    suspend: "spec.suspend",
    templates: rayGroups("spec."),
  },
  {
    apiVersion: "ray.io/v1",
    kind: "RayJob",
    suspend: "spec.suspend",
    templates: [
      ...rayGroups("spec.rayClusterSpec."),
      { template: "spec.submitterPodTemplate", role: "submitter" },
    ],
  },
  { apiVersion: "ray.io/v1", kind: "RayService", templates: rayGroups("spec.rayClusterConfig.") },
  {
    // Each replicated Job runs `replicas` Jobs of `parallelism` pods.
    apiVersion: "jobset.x-k8s.io/v1alpha2",
    kind: "JobSet",
    suspend: "spec.suspend",
    templates: [
      {
        template: "spec.replicatedJobs.*.template.spec.template",
        name: "spec.replicatedJobs.*.name",
        replicas: [
          "spec.replicatedJobs.*.replicas",
          "spec.replicatedJobs.*.template.spec.parallelism",
        ],
      },
    ],
  },
  {
    // `replicas` groups of `size` pods: a leader (its own template, or the worker template) and size-1 workers.
    apiVersion: "leaderworkerset.x-k8s.io/v1",
    kind: "LeaderWorkerSet",
    templates: [
      {
        template: "spec.leaderWorkerTemplate.leaderTemplate",
        role: "leader",
        replicas: ["spec.replicas"],
      },
      {
        template: "spec.leaderWorkerTemplate.workerTemplate",
        role: "worker",
        ifPresent: "spec.leaderWorkerTemplate.leaderTemplate",
        replicas: ["spec.replicas", { path: "spec.leaderWorkerTemplate.size", minus: 1 }],
      },
      {
        template: "spec.leaderWorkerTemplate.workerTemplate",
        role: "leader and worker",
        ifAbsent: "spec.leaderWorkerTemplate.leaderTemplate",
        replicas: ["spec.replicas", "spec.leaderWorkerTemplate.size"],
      },
    ],
  },
  {
    apiVersion: "batch.volcano.sh/v1alpha1",
    kind: "Job",
    templates: [
      {
        template: "spec.tasks.*.template",
        name: "spec.tasks.*.name",
        replicas: ["spec.tasks.*.replicas"],
      },
    ],
  },
  {
    // KServe: each component (predictor, transformer, explainer) an inline pod spec, a predictor's
    // model container from a ServingRuntime; built in code (inference-service.ts), minReplicas pods.
    apiVersion: "serving.kserve.io/v1beta1",
    kind: "InferenceService",
    templates: [],
    builtBy: "inference-service",
  },
];

/** Their names as the setting workloads.builtInKinds lists them: "PyTorchJob.kubeflow.org". */
export const BUILT_IN_KIND_NAMES = BUILT_IN_KINDS.map(kindName) as [string, ...string[]];
