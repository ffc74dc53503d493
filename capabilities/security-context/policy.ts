// The security-context policy (pure; index.ts is its Pepr capability): Pod Security Standards
// "restricted", fix first.
//   fix:   fills the unset fields restricted needs (fix.ts)
//   check: PSA's restricted checks at version latest, one file each (checks/)
import { recordedFixes } from "../../lib/engine";
import { isPod, type PodTemplateRef } from "../../lib/pod";
import {
  noFindings,
  type Policy,
  type PodTarget,
  type RuleContext,
  type RuleViolation,
} from "../../lib/policy";
import { NS_KEYS, READ_ONLY_ROOT } from "../../lib/settings";
import { formatNote } from "../../lib/verdict";
import { evaluatePod, RESTRICTED_CHECK_IDS, type CheckOutcome } from "./checks";
import { asObject, isWindowsPod, type Obj } from "./checks/helpers";
import { CAPABILITY, containersLeftToUs, fixPodSecurity, normalizePath } from "./fix";
import { imageContainers, imageUsersOf, type ImageUser } from "./image-user";

/** What a `kubectl debug` user changes: its profiles set the securityContext of the container it adds. */
export const DEBUG_PROFILE_FIX =
  "with kubectl debug, use --profile=restricted (it sets what Pod Security restricted asks of the debug container)";

export function toViolation(outcome: CheckOutcome): RuleViolation {
  const detail = outcome.forbiddenDetail ? `: ${outcome.forbiddenDetail}` : "";
  return {
    rule: outcome.id,
    message: `${outcome.forbiddenReason ?? "forbidden"}${detail} (Pod Security Standards restricted)`,
    fix: outcome.fix ?? "see the Pod Security Standards restricted profile",
  };
}

/** The rule of securityContext.rootImages: deny: an image built for root or a named user. */
export const IMAGE_USER_RULE = "image-user";

export const securityContextPolicy: Policy = {
  name: CAPABILITY,
  switchedBy: "securityContext",
  rules: [...RESTRICTED_CHECK_IDS, IMAGE_USER_RULE],
  description:
    "Pod Security Standards restricted: fills unset securityContext fields, denies what cannot be fixed",

  async fix({ template }, ctx) {
    const settings = ctx.settings.securityContext;
    if (!settings.enabled || !settings.mutate) return [];
    // The images are read only when the pod leaves a container's user to us.
    const users = leavesUserUnset(template) ? await imageUsersOf(template, ctx) : undefined;
    return fixPodSecurity(template, settings, { users, readOnlyRoot: readOnlyRootOf(ctx) });
  },

  async check(object, target, ctx) {
    const findings = noFindings();
    if (!ctx.settings.securityContext.enabled || !target) return findings;
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
    findings.violations = evaluatePod(template, "restricted")
      .filter(outcome => !outcome.allowed)
      .map(toViolation)
      .map(v => (debugging ? { ...v, fix: `${v.fix}; ${DEBUG_PROFILE_FIX}` } : v));
    if (!ctx.stored) {
      const said = await imageFindings(target, ctx);
      findings.warnings = said.warnings;
      findings.violations.push(...said.violations);
    }
    return findings;
  },
};

/** Whether some container's user is left to us (no runAsUser on it or on the pod). */
const leavesUserUnset = (template: PodTemplateRef) =>
  !isWindowsPod(template) && containersLeftToUs(template).length > 0;

/** The namespace's label when it names a valid choice, else the setting. */
function readOnlyRootOf(ctx: RuleContext): "off" | "fill" {
  const label = ctx.namespace?.labels[NS_KEYS.readOnlyRoot];
  return (READ_ONLY_ROOT as readonly string[]).includes(label ?? "")
    ? (label as "off" | "fill")
    : ctx.settings.securityContext.readOnlyRootFilesystem;
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
  const setByUs =
    target.fixed?.has(`${CAPABILITY}/runAsUser`) ||
    recordedFixes({ metadata: template.metadata }).get(CAPABILITY)?.includes("runAsUser");
  if (!setByUs || isWindowsPod(template)) return said;
  const podUid = runAsUserOf((template.spec as unknown as Obj | undefined)?.securityContext);
  const containers = imageContainers(template);
  const users = await imageUsersOf(template, ctx);
  const home = normalizePath(ctx.settings.securityContext.homePath);
  const deny = ctx.settings.securityContext.rootImages === "deny";
  for (const c of containers) {
    const uid = runAsUserOf((c.container as unknown as Obj).securityContext) ?? podUid;
    const user = users.get(c.container);
    if (uid === undefined || uid === 0 || !user) continue;
    const text = imageWarning(
      user,
      uid,
      c.container.name,
      hasHome(c.container, home) ? home : undefined,
    );
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

function hasHome(container: { env?: { name?: string; value?: string }[] }, home: string): boolean {
  return (container.env ?? []).some(e => e?.name === "HOME" && e.value === home);
}

/** What a container's image means for the UID the module gave it (undefined: nothing to say). */
export function imageWarning(
  user: ImageUser,
  uid: number,
  container: string,
  home: string | undefined,
): string | undefined {
  const runs = `it runs as UID ${uid} here${home ? `, with HOME=${home} on an emptyDir` : ""}`;
  const workdir =
    user.kind !== "unknown" && user.workingDir && user.workingDir !== "/"
      ? `; its WORKDIR ${user.workingDir} was made by the image's build user, so writing there may fail`
      : "";
  switch (user.kind) {
    case "root":
      return `image "${user.image}" (container "${container}") is built to run as root; ${runs}${workdir}. Fix: build the image with a numeric USER (e.g. USER ${uid}) and chown what it writes to that user; its pods then keep the image's own user`;
    case "named":
      return `image "${user.image}" (container "${container}") runs as user "${user.name}", a name: the kubelet cannot check runAsNonRoot against a name, so ${runs}${workdir}. Fix: build the image with the numeric USER of "${user.name}", or set runAsUser to that UID`;
    case "unknown":
      return `image "${user.image}" (container "${container}") was not inspected (${user.reason}): ${runs}, which may not be the user it was built for. Fix: set runAsUser to the image's own user (or let the module read the image: images.inspect)`;
    case "numeric":
      return undefined;
  }
}
