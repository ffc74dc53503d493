// workloads: the pod templates of Deployments, StatefulSets, DaemonSets, ReplicaSets,
// ReplicationControllers, Jobs and CronJobs, judged by every policy area at once. Their pods will
// get every area's fixes, so each area's checks must see the template with all of them applied:
// one shared capability simulates them once (lib/engine/workload-simulation.ts) instead of every area doing it. So
// `kubectl apply` of a Deployment whose pods can never run fails at once, with the reason, not
// later in ReplicaSet events.
import { Capability, a } from "pepr";
import { sharedActions } from "../../lib/pepr-adapter";
import { workloadTemplatesMutated } from "../../lib/settings";
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
