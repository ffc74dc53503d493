// Image provenance: mirrors rewrite images (fix), then every image a pod pulls (its containers' and
// its image volumes') must come from an allowed registry, optionally pinned by digest and not on a
// moving `latest` tag (check).
import { imagesOf, type ImageRefField } from "../../lib/objects/pod";
import type { PodTarget, RuleContext } from "../../lib/engine/policy";
import { envName, NS_KEYS, type Settings } from "../../lib/settings";
import { formatNote } from "../../lib/objects/verdict";
import {
  noFindings,
  type RuleChange,
  type RuleFindings,
  type RuleViolation,
} from "../../lib/engine/policy";
import {
  describePrefix,
  formatRef,
  parseImage,
  parsePrefix,
  prefixWithin,
  underPrefix,
  type ImageRef,
  type RegistryPrefix,
} from "../../lib/objects/image-reference";

export const CAPABILITY = "image-registry";
const ALLOWED_ENV = envName("registries.allowed");
const ADMIN_SETTING = `registries.allowed (env ${ALLOWED_ENV}, e.g. in package.json pepr.env)`;

interface PrefixList {
  prefixes: RegistryPrefix[];
  problems: string[];
}

function parseList(entries: string[], where: string): PrefixList {
  const prefixes: RegistryPrefix[] = [];
  const problems: string[] = [];
  for (const entry of entries) {
    const parsed = parsePrefix(entry);
    if (parsed.ok) prefixes.push(parsed.prefix);
    else problems.push(`${where}: entry "${entry}" ignored (${parsed.reason})`);
  }
  return { prefixes, problems };
}

interface Mirror {
  from: RegistryPrefix;
  to: RegistryPrefix;
}

// Settings are fixed for the controller's life: their mirrors are parsed once, not per request.
const parsedMirrors = new WeakMap<Settings, { mirrors: Mirror[]; problems: string[] }>();

export function mirrorsOf(settings: Settings): { mirrors: Mirror[]; problems: string[] } {
  let parsed = parsedMirrors.get(settings);
  if (!parsed) parsedMirrors.set(settings, (parsed = parseMirrors(settings)));
  return parsed;
}

function parseMirrors(settings: Settings): { mirrors: Mirror[]; problems: string[] } {
  const mirrors: Mirror[] = [];
  const problems: string[] = [];
  for (const [from, to] of Object.entries(settings.registries.mirrors)) {
    const f = parsePrefix(from);
    const t = parsePrefix(to);
    if (f.ok && t.ok) mirrors.push({ from: f.prefix, to: t.prefix });
    else
      problems.push(
        `registries.mirrors: "${from}" → "${to}" ignored (${!f.ok ? f.reason : !t.ok ? t.reason : ""})`,
      );
  }
  // The most specific source wins: docker.io/myorg before docker.io.
  mirrors.sort((a, b) => segments(b.from) - segments(a.from));
  return { mirrors, problems };
}

const segments = (p: RegistryPrefix) => (p.path ? p.path.split("/").length : 0);

/**
 * The mirrored form of an image, or undefined when no mirror applies. An image already under any
 * mirror is left alone, so a rewritten image is never rewritten again (idempotent even when a
 * mirror's host is itself the source of another mirror).
 */
export function mirrorImage(ref: ImageRef, mirrors: Mirror[]): string | undefined {
  if (mirrors.some(m => underPrefix(ref, m.to))) return undefined;
  const mirror = mirrors.find(m => underPrefix(ref, m.from));
  if (!mirror) return undefined;
  const rest = mirror.from.path
    ? ref.repository.slice(mirror.from.path.length + 1)
    : ref.repository;
  const repository = [mirror.to.path, rest].filter(Boolean).join("/");
  if (!repository) return undefined;
  return formatRef({ registry: mirror.to.registry, repository, tag: ref.tag, digest: ref.digest });
}

/** fix: rewrites images (containers' and image volumes') to their mirrors, in place. */
export function rewriteToMirrors(target: PodTarget, ctx: RuleContext): RuleChange[] {
  const registries = ctx.settings.registries;
  if (!Object.keys(registries.mirrors).length) return [];
  const { mirrors } = mirrorsOf(ctx.settings);
  const changes: RuleChange[] = [];
  for (const field of imagesOf(target.template)) {
    const written = field.value;
    const parsed = parseImage(written);
    if (!parsed.ok) continue; // the check reports it
    const mirrored = mirrorImage(parsed.ref, mirrors);
    if (!mirrored) continue;
    field.set(mirrored);
    changes.push({
      rule: "mirror",
      message: `${field.path}="${mirrored}" (was "${String(written)}")`,
    });
  }
  return changes;
}

/** The namespace's narrowing annotation as entries; undefined when absent or blank. */
export function namespaceEntries(ctx: RuleContext): string[] | undefined {
  const value = ctx.namespace?.annotations[NS_KEYS.allowedRegistries];
  if (typeof value !== "string") return undefined;
  const entries = value
    .split(",")
    .map(s => s.trim())
    .filter(Boolean);
  return entries.length ? entries : undefined;
}

/**
 * Whether an image's registry is allowed here by registries.allowed and the namespace's narrowing
 * (true when neither lists anything, or the capability is off): what the image reader asks before
 * it reads an image at all.
 */
export function registryAllowed(ref: ImageRef, ctx: RuleContext): boolean {
  const registries = ctx.settings.registries;
  if (!registries.enabled) return true;
  const nsWritten = namespaceEntries(ctx);
  return [registries.allowed.length ? registries.allowed : undefined, nsWritten].every(
    entries => !entries || parseList(entries, "").prefixes.some(p => underPrefix(ref, p)),
  );
}

/**
 * What is allowed, for messages: with both lists, their intersection (the namespace entries that
 * lie within a cluster entry and the cluster entries that lie within a namespace entry).
 */
function effectiveList(cluster?: RegistryPrefix[], ns?: RegistryPrefix[]): string[] {
  if (cluster && ns) {
    const both = [
      ...ns.filter(n => cluster.some(c => prefixWithin(n, c))),
      ...cluster.filter(c => ns.some(n => prefixWithin(c, n))),
    ];
    return [...new Set(both.map(describePrefix))];
  }
  return (cluster ?? ns ?? []).map(describePrefix);
}

const listText = (list: string[]) => (list.length ? list.join(", ") : "nothing");

/** check: every image the pod pulls is valid, allowed, and pinned as the settings ask. */
export function checkImages(target: PodTarget | undefined, ctx: RuleContext): RuleFindings {
  const findings = noFindings();
  const registries = ctx.settings.registries;
  if (!target) return findings;

  const clusterList = registries.allowed.length
    ? parseList(registries.allowed, "registries.allowed")
    : undefined;
  const nsWritten = namespaceEntries(ctx);
  const nsList = nsWritten
    ? parseList(nsWritten, `namespace ${ctx.namespaceName} ${NS_KEYS.allowedRegistries}`)
    : undefined;
  // An empty setting turns the cluster-wide rule off; a namespace annotation still narrows.
  const active = !!clusterList || !!nsList || registries.requireDigest || registries.forbidLatest;
  if (!active) return findings;
  findings.warnings.push(
    ...[...(clusterList?.problems ?? []), ...(nsList?.problems ?? [])].map(p =>
      formatNote(CAPABILITY, p),
    ),
  );
  const allowedText = listText(effectiveList(clusterList?.prefixes, nsList?.prefixes));

  for (const c of imagesOf(target.template)) {
    const parsed = parseImage(c.value);
    if (!parsed.ok) {
      findings.violations.push(invalid(c, parsed.reason));
      continue;
    }
    const ref = parsed.ref;
    const clusterOk = !clusterList || clusterList.prefixes.some(p => underPrefix(ref, p));
    const nsOk = !nsList || nsList.prefixes.some(p => underPrefix(ref, p));
    if (!clusterOk || !nsOk) {
      findings.violations.push(notAllowed(c, ref, allowedText, clusterOk, ctx));
    }
    if (registries.requireDigest && !ref.digest) findings.violations.push(noDigest(c, ref));
    if (registries.forbidLatest && !ref.digest && (!ref.tag || ref.tag === "latest"))
      findings.violations.push(latest(c, ref));
  }
  return findings;
}

/** `container "trainer" image "ghcr.io/a:1"`, `image volume "weights" reference "ghcr.io/w:1"`. */
const named = (c: ImageRefField) => `${c.owner} ${c.field} "${String(c.value)}"`;

function invalid(c: ImageRefField, reason: string): RuleViolation {
  const shown = typeof c.value === "string" ? `"${c.value}"` : "(none)";
  return {
    rule: "invalid-reference",
    message: `${c.owner} has ${c.field} ${shown}, which is not a valid image reference (${reason})`,
    fix: `set ${c.path} to [registry/]repository[:tag][@digest] in lower case, e.g. ghcr.io/org/app:1.2.3`,
  };
}

function notAllowed(
  c: ImageRefField,
  ref: ImageRef,
  allowedText: string,
  clusterOk: boolean,
  ctx: RuleContext,
): RuleViolation {
  const ns = ctx.namespaceName;
  const annotation = `kubectl annotate namespace ${ns} ${NS_KEYS.allowedRegistries}=<entries>,${ref.registry} --overwrite`;
  const where = clusterOk
    ? `an admin adds it to the namespace's list: ${annotation}`
    : `an admin adds it to ${ADMIN_SETTING}`;
  return {
    rule: "registry-not-allowed",
    message:
      `${named(c)} (${ref.normalised}) is from registry ${ref.registry}, ` +
      `which is not allowed${clusterOk ? ` in namespace ${ns}` : ""}; allowed: ${allowedText}`,
    fix: `use an image from an allowed registry or its mirror (${allowedText}) in ${c.path}; if ${ref.registry} should be allowed, ${where}`,
  };
}

function noDigest(c: ImageRefField, ref: ImageRef): RuleViolation {
  return {
    rule: "digest-required",
    message: `${named(c)} is not pinned by digest`,
    fix: `set ${c.path} to ${ref.normalised}@sha256:<digest> (the digest is printed by: crane digest ${ref.normalised}); admins: registries.requireDigest (${envName("registries.requireDigest")})`,
  };
}

function latest(c: ImageRefField, ref: ImageRef): RuleViolation {
  return {
    rule: "latest-forbidden",
    message: `${named(c)} ${ref.tag ? "uses the latest tag" : "has no tag (means latest)"}, which can change under a running workload`,
    fix: `set ${c.path} to a fixed version tag or a digest, e.g. ${ref.registry}/${ref.repository}:1.2.3; admins: registries.forbidLatest (${envName("registries.forbidLatest")})`,
  };
}
