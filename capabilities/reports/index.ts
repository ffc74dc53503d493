// reports: what already runs, seen from Pepr's watcher (its own Deployment, not the admission
// path). Each Pod and workload is judged by every capability as the validating webhook would judge
// it, and each namespace gets a PolicyReport (wgpolicyk8s.io/v1alpha2) that `kubectl get
// policyreport -A` and Policy Reporter show: before a namespace moves from audit to enforce, its
// owners see what would be denied. A pod the module fixed gets an Event saying what and why.
// The scan is lib/reports/scanner.ts, the report format lib/reports/policy-report.ts, the Events
// lib/reports/events.ts.
//
// Pods and workloads are not Pepr Watch bindings: each binding (kubernetes-fluent-client's Watcher)
// keeps every object of its kind, whole, to diff its re-lists: ~33 MiB per 1,000 pods, gigabytes at
// 100,000 (docs/bench.md). The watcher lists (in pages) and watches them itself and keeps per object
// only what its report needs (lib/reports/scan-watches.ts, set up by pepr.ts).
import { Capability, a } from "pepr";
import { backgroundActions } from "../../lib/reports/watcher";
import { backgroundBindingsWanted } from "../../lib/settings";
import { pepr } from "../../package.json";

export const Reports = new Capability({
  name: "reports",
  description: "PolicyReports of the Pods and workloads that run; an Event on each pod fixed",
});
const { When } = Reports;
const { onNamespace } = backgroundActions();

// One binding, on Namespaces (a few hundred objects, not pods): `pepr build` writes the watcher
// Deployment, and the process that runs the scan, only for a module with a Watch binding. Its action
// has the objects of a namespace whose labels changed judged again. With reports and events both
// off (package.json pepr.env, read when the module is built), no binding: no watcher Deployment.
if (backgroundBindingsWanted(pepr.env)) {
  const registered = Reports.bindings.length;
  When(a.Namespace).IsCreatedOrUpdated().Watch(onNamespace);
  // Deletions too (a namespace gone is forgotten). Pepr 1.1.4's When() offers a Watch no "any
  // event"; Pepr's own default for a binding is Event.ANY ("*"), which its watch processor maps to
  // ADDED, MODIFIED and DELETED. (Pepr's enums are not importable from the bundle, which keeps pepr
  // external.) Pepr registers Watch bindings only where they run: the watcher, `pepr dev`, `pepr build`.
  for (const binding of Reports.bindings.slice(registered))
    binding.event = "*" as typeof binding.event;
}
