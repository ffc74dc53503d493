// reports: what already runs, seen from Pepr's watcher (its own Deployment, not the admission
// path). Each Pod and workload is judged by every capability as the validating webhook would judge
// it, and each namespace gets a PolicyReport (wgpolicyk8s.io/v1alpha2) that `kubectl get
// policyreport -A` and Policy Reporter show: before a namespace moves from audit to enforce, its
// owners see what would be denied. A pod the module fixed gets an Event saying what and why.
// The scan is lib/reports/scanner.ts, the report format lib/reports/policy-report.ts, the Events
// lib/events.ts.
import { Capability, a } from "pepr";
import { backgroundActions } from "../../lib/reports/watcher";
import { backgroundBindingsWanted } from "../../lib/settings";
import cfg from "../../package.json";

export const Reports = new Capability({
  name: "reports",
  description: "PolicyReports of the Pods and workloads that run; an Event on each pod fixed",
});
const { When } = Reports;
const { onWatchEvent } = backgroundActions();

// The workloads people write; a Deployment's ReplicaSets and a CronJob's Jobs are judged through
// their owner's template (the scan skips them), so their kinds are not watched at all.
// With reports and events both off (package.json pepr.env, read when the module is built), no
// bindings: `pepr build` then writes no watcher Deployment at all.
const kinds = backgroundBindingsWanted(cfg.pepr.env)
  ? [a.Pod, a.Deployment, a.StatefulSet, a.DaemonSet, a.Job, a.CronJob]
  : [];
for (const kind of kinds) {
  const registered = Reports.bindings.length;
  When(kind).IsCreatedOrUpdated().Watch(onWatchEvent);
  // One binding per kind for every phase, deletions included. Pepr 1.1.4's When() offers a Watch
  // no "any event" (IsCreatedOrUpdated and IsDeleted would be two bindings), and each Watch binding
  // lists and watches on its own, keeping its own copy of every object: with 10,000 pods a second
  // binding per kind cost the watcher ~150 MB (docs/bench.md). Pepr's own default for a binding is
  // Event.ANY, which its watch processor maps to ADDED, MODIFIED and DELETED. (Pepr registers Watch
  // bindings only where they run: the watcher, `pepr dev`, and `pepr build`.)
  // (Event.ANY is "*"; Pepr's enums are not importable from the bundle, which keeps pepr external.)
  for (const binding of Reports.bindings.slice(registered))
    binding.event = "*" as typeof binding.event;
}
