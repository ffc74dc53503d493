// workloads: the pod templates of Deployments, StatefulSets, DaemonSets, ReplicaSets,
// ReplicationControllers, Jobs and CronJobs, and of the ML kinds an operator turns into pods
// (PyTorchJob, RayCluster, JobSet, LeaderWorkerSet, ...: lib/workload-kinds/table.ts, and the
// platform's own from the setting workloads.kinds), judged by every policy area at once. Their pods
// will get every area's fixes, so each area's checks must see the templates with all of them
// applied: one shared capability simulates them once (lib/engine/workload-simulation.ts) instead
// of every area doing it. So `kubectl apply` of a workload whose pods can never run fails at once,
// with the reason, not later in ReplicaSet or operator events.
import { Capability, a } from "pepr";
import { sharedActions } from "../../lib/pepr-adapter";
import { workloadSettingsAtBuild, workloadTemplatesMutated } from "../../lib/settings";
import { kindsInForce } from "../../lib/workload-kinds/in-force";
import { groupOf, pluralOf } from "../../lib/workload-kinds/kind-spec";
import cfg from "../../package.json";

export const Workloads = new Capability({
  name: "workloads",
  description:
    "Judges workload pod templates with every policy area; fixes them with workloads.mutate",
});
const { When } = Workloads;
const { mutateTemplate, validateWorkload } = sharedActions();

// With workloads.mutate (read when the module is built: it decides the webhook's rules), the
// templates are fixed when they are applied, as their pods would be.
const mutateTemplates = workloadTemplatesMutated(cfg.pepr.env);

for (const kind of [
  a.Deployment,
  a.StatefulSet,
  a.DaemonSet,
  a.ReplicaSet,
  a.ReplicationController,
  a.Job,
  a.CronJob,
]) {
  if (mutateTemplates) When(kind).IsCreatedOrUpdated().Mutate(mutateTemplate);
  When(kind).IsCreatedOrUpdated().Validate(validateWorkload);
}

// The ML kinds, and the platform's own (read when the module is built, like workloads.mutate):
// any version of their group. A cluster without one of their CRDs never sends one: nothing fails.
for (const spec of kindsInForce(workloadSettingsAtBuild(cfg.pepr.env))) {
  const kind = {
    group: groupOf(spec.apiVersion),
    version: "",
    kind: spec.kind,
    plural: pluralOf(spec),
  };
  if (mutateTemplates) When(a.GenericKind, kind).IsCreatedOrUpdated().Mutate(mutateTemplate);
  When(a.GenericKind, kind).IsCreatedOrUpdated().Validate(validateWorkload);
}
