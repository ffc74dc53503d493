// Every Pod Security Standards check, in PSA's order, and how a level picks them: baseline is the
// baseline checks; restricted is the baseline checks minus those a restricted check overrides,
// plus the restricted checks. The semantics are PSA's at version "latest" (policy 1.37).
import type { PodTemplateRef } from "../../../lib/pod";
import { allowPrivilegeEscalation } from "./allowPrivilegeEscalation";
import { appArmorProfile } from "./appArmorProfile";
import { capabilitiesBaseline } from "./capabilities_baseline";
import { capabilitiesRestricted } from "./capabilities_restricted";
import type { CheckResult, Level, PodSecurityCheck } from "./helpers";
import { hostNamespaces } from "./hostNamespaces";
import { hostPathVolumes } from "./hostPathVolumes";
import { hostPorts } from "./hostPorts";
import { hostProbesAndHostLifecycle } from "./hostProbesAndHostLifecycle";
import { privileged } from "./privileged";
import { procMountBaseline, procMountRestricted } from "./procMount";
import { restrictedVolumes } from "./restrictedVolumes";
import { runAsNonRoot } from "./runAsNonRoot";
import { runAsUser } from "./runAsUser";
import { seccompProfileBaseline, seccompProfileRestricted } from "./seccompProfile";
import { seLinuxOptions } from "./seLinuxOptions";
import { sysctls } from "./sysctls";
import { windowsHostProcess } from "./windowsHostProcess";

export type { CheckResult, Level, PodSecurityCheck } from "./helpers";

export const ALL_CHECKS: PodSecurityCheck[] = [
  // baseline
  hostNamespaces,
  privileged,
  capabilitiesBaseline,
  hostPathVolumes,
  hostPorts,
  appArmorProfile,
  seLinuxOptions,
  procMountBaseline,
  seccompProfileBaseline,
  sysctls,
  windowsHostProcess,
  hostProbesAndHostLifecycle,
  // restricted
  restrictedVolumes,
  allowPrivilegeEscalation,
  runAsNonRoot,
  runAsUser,
  seccompProfileRestricted,
  capabilitiesRestricted,
  procMountRestricted,
];

/** The checks a level evaluates. */
export function checksFor(level: Level): readonly PodSecurityCheck[] {
  return level === "baseline" ? BASELINE_CHECKS : RESTRICTED_CHECKS;
}
// Computed once: every request evaluates one of these two lists.
const BASELINE_CHECKS = ALL_CHECKS.filter(c => c.level === "baseline");
const overridden = new Set(ALL_CHECKS.flatMap(c => c.overrides ?? []));
const RESTRICTED_CHECKS = ALL_CHECKS.filter(c => !overridden.has(c.id));
/** The ids of the restricted level's checks: the rules of the security-context policy. */
export const RESTRICTED_CHECK_IDS: readonly string[] = RESTRICTED_CHECKS.map(c => c.id);

export interface CheckOutcome extends CheckResult {
  id: string;
}

/** Runs a level's checks on a pod spec; a check that throws counts as forbidden, never as allowed. */
export function evaluatePod(pod: PodTemplateRef, level: Level = "restricted"): CheckOutcome[] {
  return checksFor(level).map(check => {
    try {
      return { id: check.id, ...check.check(pod) };
    } catch (e) {
      return {
        id: check.id,
        allowed: false,
        forbiddenReason: "check failed",
        forbiddenDetail: `the ${check.id} check could not read this pod (${(e as Error).message})`,
        fix: "make the pod spec well-formed",
      };
    }
  });
}
