// The security-context policy (pure; index.ts is its Pepr capability): Pod Security Standards at
// the level the namespace enforces (its pod-security.kubernetes.io labels, read as Pod Security
// Admission reads them: checks/levels.ts; securityContext.defaultLevel without them), fix first.
//   fix:   fills the unset fields that level needs at its policy version (fix.ts): restricted only
//   check: PSA's checks of that level and version, one file each (checks/), denying; the warn and
//          audit labels' levels only ever warn (PSA's audit goes to the audit log, which a webhook
//          cannot write: here it is a warning too, and a report's result)
import { recordedFixes } from "../../lib/objects/fix-trace";
import { isPod, type PodTemplateRef } from "../../lib/objects/pod";
import {
  noFindings,
  type PolicyRules,
  type PodTarget,
  type RuleContext,
  type RuleViolation,
} from "../../lib/engine/policy";
import { NS_KEYS, READ_ONLY_ROOT, WORKDIR_COPY } from "../../lib/settings";
import { formatNote } from "../../lib/objects/verdict";
import {
  ALL_CHECK_IDS,
  checksFor,
  describeLevel,
  evaluatePod,
  formatVersion,
  namespacePodSecurity,
  parseVersion,
  policyMinor,
  sameLevel,
  type CheckOutcome,
  type LevelVersion,
  type NamespacePodSecurity,
  type PolicyVersion,
  type PsaMode,
} from "./checks";
import { asObject, isWindowsPod, podSecurityContext, type Obj } from "./checks/helpers";
import { CAPABILITY, choosesUser, fixPodSecurity, normalizePath } from "./fix";
import { imageContainers, imageUsersOf, type ImageUser } from "./image-user";
import { copierName, copiersIn, copyDecision, isCopied } from "./workdir-copy";
import { cacheDirWarnings } from "./cache-dirs";
import { lowPortUnsetWarning, lowPortWarning, podSysctl, sysctlAllowed } from "./fix-low-ports";
import { rootHomeWarning } from "./root-home";

/** What a `kubectl debug` user changes: its profiles set the securityContext of the container it adds. */
export const DEBUG_PROFILE_FIX =
  "with kubectl debug, use --profile=restricted (it sets what Pod Security restricted asks of the debug container)";

/** A forbidden check as a violation, naming the level and version (and the mode, but enforce). */
export function toViolation(
  outcome: CheckOutcome,
  level: LevelVersion = { level: "restricted", version: "latest" },
  mode: PsaMode = "enforce",
): RuleViolation {
  const detail = outcome.forbiddenDetail ? `: ${outcome.forbiddenDetail}` : "";
  const standard = `Pod Security Standards ${mode === "enforce" ? "" : `${mode} `}${describeLevel(level)}`;
  return {
    rule: outcome.id,
    message: `${outcome.forbiddenReason ?? "forbidden"}${detail} (${standard})`,
    fix: outcome.fix ?? `see the Pod Security Standards ${level.level} profile`,
    ...(mode === "enforce" ? {} : { severity: "warn" as const }),
  };
}

/** The rule of securityContext.rootImages: deny: an image built for root or a named user. */
export const IMAGE_USER_RULE = "image-user";

export const securityContextRules: PolicyRules = {
  name: CAPABILITY,
  switchedBy: "securityContext",
  // Every check of every level: an Exemption or a report may name any of them.
  rules: [...ALL_CHECK_IDS, IMAGE_USER_RULE],
  description:
    "Pod Security Standards restricted, or the level the namespace's pod-security.kubernetes.io/enforce label sets: fills unset securityContext fields, denies what cannot be fixed",

  async fix({ template }, ctx) {
    const settings = ctx.settings.securityContext;
    if (!settings.mutate) return [];
    const level = evaluated(podSecurityOf(ctx).enforce, ctx);
    // The images are read only when the fix chooses a container's user.
    const users = choosesUser(template, level) ? await imageUsersOf(template, ctx) : undefined;
    const changes = fixPodSecurity(template, settings, {
      users,
      readOnlyRoot: readOnlyRootOf(ctx),
      workdirCopy: workdirCopyOf(ctx),
      lowPorts: settings.lowPorts,
      level,
    });
    // The trace names the level it fixed to, as PSA names a policy: "baseline:v1.30".
    if (changes.length) {
      const { enforce } = podSecurityOf(ctx);
      const annotations = ((template.metadata ??= {}).annotations ??= {});
      annotations[NS_KEYS.podSecurityFixed] = `${enforce.level}:${formatVersion(enforce.version)}`;
    }
    return changes;
  },

  async check(object, target, ctx) {
    const findings = noFindings();
    if (!target) return findings;
    let template = target.template;
    let debugging = false;
    // A Pod UPDATE can add ephemeral containers (`kubectl debug`) and change images; the security
    // context of the other containers cannot change, and was judged when the pod was created (PSA
    // too lets image changes through). So only the ephemeral containers are judged, with the
    // pod-level fields they inherit; the engine drops what the stored pod already had.
    if (!target.isTemplate && isPod(object) && ctx.stored) {
      template = { ...template, spec: { ...template.spec, containers: [], initContainers: [] } };
      debugging = ctx.stored.addsEphemeralContainers;
    }
    const policy = podSecurityOf(ctx);
    const judged = judgeLevels(template, policy, ctx);
    findings.violations = judged.violations.map(v =>
      debugging ? { ...v, fix: `${v.fix}; ${DEBUG_PROFILE_FIX}` } : v,
    );
    findings.skipped = judged.skipped;
    findings.warnings = labelWarnings(policy, ctx);
    if (fixedHere(target)) findings.warnings.push(levelNote(target, policy.enforce));
    if (!ctx.stored) {
      const said = await imageFindings(target, ctx);
      findings.warnings.push(...said.warnings);
      findings.violations.push(...said.violations);
      const ports = await lowPortFindings(target, ctx);
      if (ports) findings.warnings.push(formatNote(CAPABILITY, ports));
    }
    return findings;
  },
};

// The cluster view gives a namespace's labels as one object per version of the namespace (and
// treats it as read-only): its policy is read once per version and settings, not per request.
const policyOfLabels = new WeakMap<
  Readonly<Record<string, string>>,
  { settings: object; policy: Readonly<NamespacePodSecurity> }
>();

/** The namespace's Pod Security policy: its labels, or the settings' defaults. Read-only. */
export function podSecurityOf(ctx: RuleContext): Readonly<NamespacePodSecurity> {
  const settings = ctx.settings.securityContext;
  const labels = ctx.namespace?.labels;
  const known = labels && policyOfLabels.get(labels);
  if (known && known.settings === settings) return known.policy;
  const policy = namespacePodSecurity(labels ?? {}, {
    level: settings.defaultLevel,
    version: parseVersion(settings.defaultVersion) ?? "latest",
  });
  if (labels) policyOfLabels.set(labels, { settings, policy });
  return policy;
}

/**
 * The version of the cluster's own PSA: securityContext.clusterVersion, whose "latest" is the API
 * server's version when the live view has read it (`check`, offline, keeps the newest known).
 */
export function clusterPolicyVersion(ctx: RuleContext): PolicyVersion {
  const setting = ctx.settings.securityContext.clusterVersion;
  const version = setting === "latest" ? (ctx.cluster.serverVersion ?? setting) : setting;
  return parseVersion(version) ?? "latest";
}

/**
 * The level with the policy version PSA evaluates for it on this cluster: "latest" and any newer
 * version are the newest PSA knows, which is the API server's own (clusterPolicyVersion).
 */
export function evaluated(level: LevelVersion, ctx: RuleContext): LevelVersion {
  const newest = policyMinor(clusterPolicyVersion(ctx));
  return { level: level.level, version: Math.min(policyMinor(level.version), newest) };
}

/**
 * The enforce level's forbidden checks (denied), then the warn and audit levels' that are not
 * already said (warnings: PSA never denies for them); every rule none of them evaluated, skipped.
 */
function judgeLevels(
  template: PodTemplateRef,
  policy: NamespacePodSecurity,
  ctx: RuleContext,
): { violations: RuleViolation[]; skipped: { rule: string; reason: string }[] } {
  const violations: RuleViolation[] = [];
  const evaluatedIds = new Set<string>();
  const judged: LevelVersion[] = [];
  for (const mode of ["enforce", "warn", "audit"] as const) {
    const level = policy[mode];
    if (judged.some(j => sameLevel(j, level))) continue;
    judged.push(level);
    const { version } = evaluated(level, ctx);
    for (const check of checksFor(level.level, version)) evaluatedIds.add(check.id);
    for (const outcome of evaluatePod(template, level.level, version)) {
      if (outcome.allowed || violations.some(v => v.rule === outcome.id)) continue;
      violations.push(toViolation(outcome, level, mode));
    }
  }
  // One reason for every check left out: the same words, written once per request.
  const reason = `not evaluated at Pod Security ${describeLevel(policy.enforce)}, the level namespace ${ctx.namespaceName} enforces (a check of another level, or one a restricted check replaces)`;
  const skipped = ALL_CHECK_IDS.filter(id => !evaluatedIds.has(id)).map(rule => ({ rule, reason }));
  return { violations, skipped };
}

/** Whether the fixes of this policy changed this pod (its trace) or this workload's copy. */
function fixedHere(target: PodTarget): boolean {
  if (target.fixed) return [...target.fixed].some(f => f.startsWith(`${CAPABILITY}/`));
  return !!recordedFixes({ metadata: target.template.metadata }).get(CAPABILITY)?.length;
}

/** The note naming the level the fixes filled to (the trace's rules say what was filled). */
function levelNote(target: PodTarget, enforce: LevelVersion): string {
  const what = target.isTemplate ? "its pods will be fixed" : "fixed";
  return formatNote(
    CAPABILITY,
    `${what} to Pod Security ${enforce.level} (${formatVersion(enforce.version)})`,
  );
}

/** A warning for each Pod Security label PSA would not parse, with what is used instead. */
function labelWarnings(policy: NamespacePodSecurity, ctx: RuleContext): string[] {
  const ns = ctx.namespaceName;
  return policy.problems.map(p =>
    formatNote(
      CAPABILITY,
      `namespace ${ns} has ${p.label}=${JSON.stringify(p.value.slice(0, 63))}, which is not one of ${p.expected}: ${p.used} is used, as Pod Security Admission does. Fix: kubectl label namespace ${ns} ${p.label}=<${p.expected}> --overwrite`,
    ),
  );
}

/** The namespace's label when it names a valid choice, else the setting. */
function readOnlyRootOf(ctx: RuleContext): "off" | "fill" {
  const label = ctx.namespace?.labels[NS_KEYS.readOnlyRoot];
  return (READ_ONLY_ROOT as readonly string[]).includes(label ?? "")
    ? (label as "off" | "fill")
    : ctx.settings.securityContext.readOnlyRootFilesystem;
}

/** The namespace's workdir-copy label, else the setting. */
export function workdirCopyOf(ctx: RuleContext): "copy" | "off" {
  const label = ctx.namespace?.labels[NS_KEYS.workdirCopy];
  return (WORKDIR_COPY as readonly string[]).includes(label ?? "")
    ? (label as "copy" | "off")
    : ctx.settings.securityContext.workdirCopy;
}

/** The group a container runs as: its own runAsGroup, else the pod's. */
function runAsGroupOf(container: object, template: PodTarget["template"]): number | undefined {
  const gid =
    asObject((container as Obj).securityContext)?.runAsGroup ??
    podSecurityContext(template)?.runAsGroup;
  return typeof gid === "number" ? gid : undefined;
}

const runAsUserOf = (sc: unknown): number | undefined => {
  const value = asObject(sc)?.runAsUser;
  return typeof value === "number" ? value : undefined;
};

/**
 * What the image means for the user the pod runs as, said at admission: an image built for root
 * or for a named user runs as a UID it was not built for (its WORKDIR may not be writable): a
 * warning, or with securityContext.rootImages "deny" a violation; an image that could not be read
 * got the configured UID without anyone knowing its user: a warning (never a denial by itself).
 */
async function imageFindings(
  target: PodTarget,
  ctx: RuleContext,
): Promise<{ warnings: string[]; violations: RuleViolation[] }> {
  const said = { warnings: [] as string[], violations: [] as RuleViolation[] };
  const { template } = target;
  // Only where the module chose the user: a pod that names its own asks no registry. A pod says so
  // in its trace, a workload's simulated copy in target.fixed.
  if (!userSetByUs(target) || isWindowsPod(template)) return said;
  const podUid = runAsUserOf((template.spec as unknown as Obj | undefined)?.securityContext);
  const containers = imageContainers(template);
  const users = await imageUsersOf(template, ctx);
  const home = normalizePath(ctx.settings.securityContext.homePath);
  const deny = ctx.settings.securityContext.rootImages === "deny";
  const copiers = copiersIn(template.spec as unknown as Obj | undefined);
  for (const c of containers) {
    if (copiers.has(c.container.name)) continue;
    const uid = runAsUserOf((c.container as unknown as Obj).securityContext) ?? podUid;
    const user = users.get(c.container);
    if (uid === undefined || uid === 0 || !user) continue;
    const text = imageWarning(
      user,
      uid,
      c.container.name,
      hasHome(c.container, home) ? home : undefined,
      workdirCopied(user, uid, c.container as unknown as Obj, target, ctx),
    );
    const gid = runAsGroupOf(c.container, template);
    for (const text of cacheDirWarnings(user, uid, gid, c.container as unknown as Obj))
      said.warnings.push(formatNote(CAPABILITY, text));
    const rootHome = rootHomeWarning(user, c.container as unknown as Obj, uid);
    if (rootHome && deny) {
      const [message, fix] = rootHome.split(". Fix: ");
      said.violations.push({
        rule: IMAGE_USER_RULE,
        message: `${message} (securityContext.rootImages: deny)`,
        fix,
      });
    } else if (rootHome) said.warnings.push(formatNote(CAPABILITY, rootHome));
    if (!text) continue;
    if (deny && (user.kind === "root" || user.kind === "named")) {
      const [message, fix] = text.split(". Fix: ");
      said.violations.push({
        rule: IMAGE_USER_RULE,
        message: `${message} (securityContext.rootImages: deny)`,
        fix: `${fix}; or set spec.securityContext.runAsUser (or the container's) to the user it was built for`,
      });
    } else said.warnings.push(formatNote(CAPABILITY, text));
  }
  return said;
}

/** Whether the module chose a container's user: a pod says so in its trace, a workload's copy in target.fixed. */
function userSetByUs(target: PodTarget): boolean {
  return !!(
    target.fixed?.has(`${CAPABILITY}/runAsUser`) ||
    recordedFixes({ metadata: target.template.metadata }).get(CAPABILITY)?.includes("runAsUser")
  );
}

/**
 * A container on a privileged port that cannot bind it: the pod's own sysctl above the port, or
 * none where the fix may not set one (the setting off, the namespace's level or version). Its
 * images are read (cached lookups) only when the pod sets the sysctl or the module chose its user.
 */
async function lowPortFindings(target: PodTarget, ctx: RuleContext): Promise<string | undefined> {
  const { template } = target;
  const podSc = asObject((template.spec as unknown as Obj | undefined)?.securityContext);
  if (podSysctl(podSc) !== undefined)
    return lowPortWarning(template, await imageUsersOf(template, ctx));
  const settings = ctx.settings.securityContext;
  const level = evaluated(podSecurityOf(ctx).enforce, ctx);
  const why = !settings.mutate
    ? "securityContext.mutate is off"
    : settings.lowPorts === "off"
      ? "securityContext.lowPorts is off"
      : level.level === "privileged"
        ? `namespace ${ctx.namespaceName} is privileged, where the module fixes nothing`
        : !sysctlAllowed(level)
          ? `namespace ${ctx.namespaceName} enforces Pod Security ${describeLevel(level)}, below v1.22, where the module does not set it`
          : undefined;
  if (!why) return undefined;
  const users = userSetByUs(target) ? await imageUsersOf(template, ctx) : undefined;
  return lowPortUnsetWarning(template, users, why);
}

/** What became of a root image's WORKDIR: copied by the fix, or why not (undefined: nothing to say). */
function workdirCopied(
  user: ImageUser | undefined,
  uid: number,
  container: Obj,
  target: PodTarget,
  ctx: RuleContext,
): WorkdirOutcome | undefined {
  if (user?.kind !== "root") return undefined;
  if (isCopied(container, user.workingDir))
    return { copied: true, by: copierName(String(container.name ?? "")) };
  const decision = copyDecision(
    user,
    { uid, gid: runAsGroupOf(container, target.template), fromImage: false, needsHome: false },
    container,
    {
      mode: workdirCopyOf(ctx),
      maxBytes: ctx.settings.securityContext.workdirCopyBytes,
    },
  );
  return decision && !decision.copy ? { copied: false, why: decision.why } : undefined;
}

export type WorkdirOutcome = { copied: true; by: string } | { copied: false; why: string };

function hasHome(container: { env?: { name?: string; value?: string }[] }, home: string): boolean {
  return (container.env ?? []).some(e => e?.name === "HOME" && e.value === home);
}

/** What a container's image means for the UID the module gave it (undefined: nothing to say). */
export function imageWarning(
  user: ImageUser,
  uid: number,
  container: string,
  home: string | undefined,
  workdirCopy?: WorkdirOutcome,
): string | undefined {
  const runs = `it runs as UID ${uid} here${home ? `, with HOME=${home} on an emptyDir` : ""}`;
  const workdir =
    user.kind !== "unknown" && user.workingDir && user.workingDir !== "/"
      ? workdirCopy?.copied
        ? `; its WORKDIR ${user.workingDir} belongs to root, so init container "${workdirCopy.by}" copies it to an emptyDir mounted there, which that UID can write (what the job writes there goes with the pod, as in the image's own writable layer)`
        : `; its WORKDIR ${user.workingDir} was made by the image's build user, so writing there may fail${workdirCopy ? ` (not copied to a writable emptyDir: ${workdirCopy.why})` : ""}`
      : "";
  switch (user.kind) {
    case "root":
      return `image "${user.image}" (container "${container}") is built to run as root; ${runs}${workdir}. Fix: build the image with a numeric USER (e.g. USER ${uid}) and chown what it writes to that user; its pods then keep the image's own user${workdirCopy && !workdirCopy.copied ? `; or mount a writable volume at ${user.workingDir}` : ""}`;
    case "named":
      return `image "${user.image}" (container "${container}") runs as user "${user.name}", a name${user.note ? ` (${user.note})` : ""}: the kubelet cannot check runAsNonRoot against a name, so ${runs}${workdir}. Fix: build the image with the numeric USER of "${user.name}", or set runAsUser to that UID`;
    case "unknown":
      return `image "${user.image}" (container "${container}") was not inspected (${user.reason}): ${runs}, which may not be the user it was built for. Fix: set runAsUser to the image's own user (or let the module read the image: images.inspect)`;
    case "numeric":
      return undefined;
  }
}
