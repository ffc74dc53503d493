// Every Pod Security Standards check, in PSA's order, and how a level and a policy version pick
// them, as PSA's registry does: at version 1.N each check that exists there runs its behaviour of
// that version; baseline is the baseline checks; restricted is the baseline checks minus those a
// restricted check (existing at 1.N) overrides, plus the restricted checks; privileged is none.
// A version newer than the newest any check knows (policy 1.37) is that newest one, as "latest".
import type { PodTemplateRef } from "../../../lib/objects/pod";
import { allowPrivilegeEscalation } from "./allowPrivilegeEscalation";
import { appArmorProfile } from "./appArmorProfile";
import { capabilitiesBaseline } from "./capabilities_baseline";
import { capabilitiesRestricted } from "./capabilities_restricted";
import { behaviourAt, type CheckResult, type PodSecurityCheck } from "./helpers";
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
import type { LevelVersion } from "./levels";
export * from "./levels";

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

/** The newest policy version any check knows (v1.N, as N): what "latest" evaluates. */
export const LATEST_POLICY_MINOR = Math.max(
  ...ALL_CHECKS.map(c => c.versions[c.versions.length - 1].since),
);

/** Every check id of every level: the rules of the security-context policy. */
export const ALL_CHECK_IDS: readonly string[] = ALL_CHECKS.map(c => c.id);

/** The policy minor a version evaluates: "latest" and anything newer are the newest known. */
export function policyMinor(version: LevelVersion["version"]): number {
  return version === "latest" ? LATEST_POLICY_MINOR : Math.min(version, LATEST_POLICY_MINOR);
}

// Computed once per level and version: every request evaluates one of these lists.
const computed = new Map<string, readonly PodSecurityCheck[]>();

/**
 * The checks a level evaluates at a policy version (default latest), each with its behaviour of
 * that version as `check`; none for privileged.
 */
export function checksFor(
  level: LevelVersion["level"],
  version: LevelVersion["version"] = "latest",
): readonly PodSecurityCheck[] {
  if (level === "privileged") return [];
  const minor = policyMinor(version);
  const key = `${level}:${minor}`;
  let list = computed.get(key);
  if (!list) {
    const present = ALL_CHECKS.flatMap(c => {
      const behaviour = behaviourAt(c, minor);
      return behaviour && (level === "restricted" || c.level === "baseline")
        ? [{ ...c, check: behaviour.check }]
        : [];
    });
    const overridden = new Set(present.flatMap(c => c.overrides ?? []));
    list = present.filter(c => !overridden.has(c.id));
    computed.set(key, list);
  }
  return list;
}

/** The ids of the restricted level's checks at latest. */
export const RESTRICTED_CHECK_IDS: readonly string[] = checksFor("restricted").map(c => c.id);

export interface CheckOutcome extends CheckResult {
  id: string;
}

/**
 * Runs a level's checks (at a policy version, default latest) on a pod spec; a check that throws
 * counts as forbidden, never as allowed.
 */
export function evaluatePod(
  pod: PodTemplateRef,
  level: LevelVersion["level"] = "restricted",
  version: LevelVersion["version"] = "latest",
): CheckOutcome[] {
  return checksFor(level, version).map(check => {
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

/**
 * What Pod Security Admission decides for a pod at a level and version ("latest" or v1.N as N):
 * allowed, or the checks that forbid it. The one evaluation the policy, `check` and the
 * real-PSA parity table share.
 */
export function podSecurityVerdict(
  pod: PodTemplateRef,
  level: LevelVersion["level"],
  version: LevelVersion["version"] = "latest",
): { allowed: boolean; forbidden: CheckOutcome[] } {
  const forbidden = evaluatePod(pod, level, version).filter(o => !o.allowed);
  return { allowed: forbidden.length === 0, forbidden };
}
