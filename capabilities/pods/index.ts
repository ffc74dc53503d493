// pods: every policy area's checks on a Pod, in one Validate binding. Each area fixes pods in its
// own capability (its Mutate binding); judging them in one binding instead of one per area is
// measured: every binding costs Pepr a filter pass and a callback on every request, and seven of
// them made pod validation ~30% dearer (docs/bench.md). The answer is the same: each finding names
// its area (admission-guard/<capability>: ...), in the order of capabilities/index.ts.
import { Capability } from "pepr";
import { bindShared } from "../../lib/pepr/adapter";
import { workloadSettingsAtBuild } from "../../lib/settings";
import { pepr } from "../../package.json";

export const Pods = new Capability({
  name: "pods",
  description: "Judges Pods with every policy area's checks, as they will be stored",
});
// After every mutating webhook (ours, and sidecar injectors'), the pod as it will be stored; and
// when an update changes a container (`kubectl set image`, `kubectl debug`'s ephemeral
// containers): a Validate on Pod CREATE and UPDATE, as lib/engine/routes.ts declares.
bindShared(Pods, workloadSettingsAtBuild(pepr.env));
