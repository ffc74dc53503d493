// The Pod Security level and version a namespace asks for, read from Pod Security Admission's own
// namespace labels as PSA reads them (api.PolicyToEvaluate in kubernetes/pod-security-admission):
//  - enforce: the level the module fixes to and denies at; an invalid value is "restricted" (PSA
//    fails closed for enforce), an invalid version "latest";
//  - warn and audit: levels that only ever give warnings; an invalid value is "privileged" (PSA
//    fails open for them); without a warn label, warn follows an enforce label that is stricter;
//  - a namespace without the enforce label takes the defaults (securityContext.defaultLevel and
//    defaultVersion: what the cluster's AdmissionConfiguration sets for PSA).
// Every invalid label is said, with the label's name and how to fix it.

export const PSA_LABEL_PREFIX = "pod-security.kubernetes.io/";

export const LEVELS = ["privileged", "baseline", "restricted"] as const;
export type PodSecurityLevel = (typeof LEVELS)[number];

/** A policy version: "latest", or v1.N as N. */
export type PolicyVersion = "latest" | number;

export interface LevelVersion {
  level: PodSecurityLevel;
  version: PolicyVersion;
}

export const PSA_MODES = ["enforce", "warn", "audit"] as const;
export type PsaMode = (typeof PSA_MODES)[number];

/** A label PSA would not parse: what it holds, what it must hold, and what is used instead. */
export interface LabelProblem {
  label: string;
  value: string;
  /** The values it may hold, as a placeholder: "privileged|baseline|restricted". */
  expected: string;
  used: string;
}

export interface NamespacePodSecurity {
  enforce: LevelVersion;
  warn: LevelVersion;
  audit: LevelVersion;
  /** Whether the enforce level came from the namespace's label (else from the defaults). */
  labelled: boolean;
  problems: LabelProblem[];
}

export const levelLabel = (mode: PsaMode) => `${PSA_LABEL_PREFIX}${mode}`;
export const versionLabel = (mode: PsaMode) => `${PSA_LABEL_PREFIX}${mode}-version`;

export function parseLevel(value: string): PodSecurityLevel | undefined {
  return (LEVELS as readonly string[]).includes(value) ? (value as PodSecurityLevel) : undefined;
}

/** PSA's version syntax: "latest" or "v1.N" (N without leading zeros). */
export function parseVersion(value: string): PolicyVersion | undefined {
  if (value === "latest") return "latest";
  const match = /^v1\.(0|[1-9][0-9]{0,8})$/.exec(value);
  return match ? Number(match[1]) : undefined;
}

export const formatVersion = (v: PolicyVersion) => (v === "latest" ? "latest" : `v1.${v}`);

/** "baseline, v1.30" / "restricted, latest": how messages name a level and version. */
export const describeLevel = (lv: LevelVersion) => `${lv.level}, ${formatVersion(lv.version)}`;

const strictness = (level: PodSecurityLevel) => LEVELS.indexOf(level);

/** Two level-versions PSA evaluates the same way (every privileged one is the same). */
export function sameLevel(a: LevelVersion, b: LevelVersion): boolean {
  return (
    (a.level === "privileged" && b.level === "privileged") ||
    (a.level === b.level && a.version === b.version)
  );
}

/** The namespace's Pod Security policy from its labels, falling back to `defaults` for enforce. */
export function namespacePodSecurity(
  labels: Readonly<Record<string, string>>,
  defaults: LevelVersion,
): NamespacePodSecurity {
  const problems: LabelProblem[] = [];
  const read = <T>(
    label: string,
    parse: (v: string) => T | undefined,
    expected: string,
    fallback: T,
  ): T | undefined => {
    const value = labels[label];
    if (value === undefined) return undefined;
    const parsed = parse(value);
    if (parsed !== undefined) return parsed;
    problems.push({ label, value, expected, used: String(fallback) });
    return fallback;
  };
  const levels = LEVELS.join("|");
  const versions = "latest|v1.N";
  const levelOf = (mode: PsaMode, failTo: PodSecurityLevel) =>
    read(levelLabel(mode), parseLevel, levels, failTo);
  const versionOf = (mode: PsaMode) =>
    read<PolicyVersion>(versionLabel(mode), parseVersion, versions, "latest");

  const enforceLevel = levelOf("enforce", "restricted");
  const enforce: LevelVersion = {
    level: enforceLevel ?? defaults.level,
    version: versionOf("enforce") ?? defaults.version,
  };
  const audit: LevelVersion = {
    level: levelOf("audit", "privileged") ?? "privileged",
    version: versionOf("audit") ?? "latest",
  };
  const warnLevel = levelOf("warn", "privileged");
  const warnVersion = versionOf("warn");
  const warn: LevelVersion = { level: warnLevel ?? "privileged", version: warnVersion ?? "latest" };
  // PSA: warn follows a valid enforce label that is stricter, when no warn label says otherwise.
  const enforceLabelValid =
    enforceLevel !== undefined && parseLevel(labels[levelLabel("enforce")] ?? "") !== undefined;
  if (
    warnLevel === undefined &&
    enforceLabelValid &&
    strictness(enforce.level) > strictness(warn.level)
  ) {
    warn.level = enforce.level;
    if (warnVersion === undefined) warn.version = enforce.version;
  }
  return { enforce, warn, audit, labelled: enforceLevel !== undefined, problems };
}
