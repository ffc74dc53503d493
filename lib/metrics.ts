// Our own decision counters, served on the controller's /metrics next to Pepr's (whose
// pepr_mutate/pepr_validate figures stay at 0 in 1.1.4). Pepr's collector offers label-less
// counters only, so a gauge that only ever goes up carries the labels.
import { metricsCollector } from "pepr";

export const DECISIONS_METRIC = "admission_guard_decisions";

metricsCollector.addGauge(
  DECISIONS_METRIC,
  "admission-guard decisions by capability, rule and outcome (fixed, allowed, denied, allowed-warn, allowed-audit, exempted)",
  ["capability", "rule", "outcome"],
);

export function recordDecision(capability: string, outcome: string, count = 1, rule = ""): void {
  metricsCollector.incGauge(DECISIONS_METRIC, { capability, rule, outcome }, count);
}
