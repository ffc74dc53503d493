// The one rule engine behind all front doors. A request takes the same two steps in the webhook and
// in `check`:
//
//   mutate():  the mutating webhook — the acting policies' fixes, in order, on the object in place
//              (a Pod on CREATE; a workload's own template with workloads.mutate)
//   answer():  the validating webhook — allowed or denied, the denial messages, the warnings and the
//              metric events, for the acting policies
//
// The Pepr bindings (lib/pepr/adapter.ts) call each once per request: one Mutate and one Validate
// for every capability (capabilities/admission), each policy acting only on what its capability's
// index.ts declares (Policy.acts). review() — what `check` runs — calls them the same way, from
// the same routes, and joins the answers as Pepr joins them. The front doors only translate.
//
// Each step is one pass in three stages, one file each: plan.ts (namespace, mode, stored version,
// which policies act, who speaks for the module, Exemptions: decided once), then fixes.ts (the
// mutating step's fixes) or checks.ts (the validating step's findings), then, validating,
// answer.ts (the decision, warnings and events). Beside them: types.ts (the request and the
// answers), ../objects/fix-trace.ts (what the fixes leave on the object), workload-simulation.ts (a workload
// judged as its pods will be), update-gate.ts (what is judged at all, and the stored version an
// UPDATE is compared with), findings.ts (findings as the engine words them), routes.ts (which step
// runs on what), review.ts (the offline replay).
export type {
  AdmissionInput,
  Answer,
  ContextInput,
  DecisionEvent,
  EngineDeps,
  MutateResult,
} from "./types";
export {
  applicability,
  contextFor,
  judgesObject,
  modeOf,
  policyApplies,
  templateIsFixed,
  type Applicability,
} from "./plan";
export { reasonOf } from "./findings";
export { fixedNotes, fixedNotesOf, recordedFixes, recordFixes } from "../objects/fix-trace";
export { mutate } from "./fixes";
export { isControllerUser, madeByController, needsJudging, storedVersionOf } from "./update-gate";
export type { StoredVersion } from "./policy";
export { answer, decide, pendingWarnings, validatorAnswer, type Decision } from "./answer";
export { review, type Review } from "./review";
