// workloads: the pod templates of Deployments, StatefulSets, DaemonSets, ReplicaSets,
// ReplicationControllers, Jobs and CronJobs, and of the ML kinds an operator turns into pods
// (PyTorchJob, RayCluster, JobSet, LeaderWorkerSet, ...: lib/workload-kinds/table.ts, and the
// platform's own from the setting workloads.kinds), judged by every policy area at once. Their pods
// will get every area's fixes, so each area's checks must see the templates with all of them
// applied: one shared capability simulates them once (lib/engine/workload-simulation.ts) instead
// of every area doing it. So `kubectl apply` of a workload whose pods can never run fails at once,
// with the reason, not later in ReplicaSet or operator events.
import { Capability } from "pepr";
import { bindShared } from "../../lib/pepr/adapter";
import { workloadSettingsAtBuild } from "../../lib/settings";
import { pepr } from "../../package.json";

export const Workloads = new Capability({
  name: "workloads",
  description:
    "Judges workload pod templates with every policy area; fixes them with workloads.mutate",
});
// A Validate of every built-in workload kind and every ML kind in force (any version of its
// group), and with workloads.mutate a Mutate of each too, as lib/engine/routes.ts declares: one
// Pepr binding per kind, or per API group where it names several (bindingsOf). The settings are
// the ones the module is built with (package.json pepr.env): they decide the webhook's rules. A
// cluster without one of the CRDs never sends one: nothing fails.
bindShared(Workloads, workloadSettingsAtBuild(pepr.env));
