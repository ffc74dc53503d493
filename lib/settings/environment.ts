// Settings from the controller's environment (package.json `pepr.env`, Helm values): one variable
// per key, or one document with the whole; an ADMISSION_GUARD_* variable that names no setting is
// an error.
import { defaultSettings, parseSettings, SettingsError, type Settings } from "./schema";
import { parseSettingsYaml } from "./yaml";

/**
 * Variables of the controller process that are not policy settings: the whole document, the port
 * tests run on, the example capabilities registered (capabilities/index.ts).
 */
export const RUNTIME_ENV = [
  "ADMISSION_GUARD_SETTINGS",
  "ADMISSION_GUARD_PORT",
  "ADMISSION_GUARD_EXAMPLES",
];

/** `securityContext.runAsUser` → `ADMISSION_GUARD_SECURITY_CONTEXT_RUN_AS_USER`. */
export function envName(dotted: string): string {
  return (
    "ADMISSION_GUARD_" +
    dotted
      .split(".")
      .map(part => part.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toUpperCase())
      .join("_")
  );
}

/** Every settable leaf key, dotted, from the defaults (`registries.allowed`, `mode`, ...). */
export function settingKeys(settings: Settings = defaultSettings()): string[] {
  const keys: string[] = [];
  for (const [key, value] of Object.entries(settings)) {
    if (value && typeof value === "object" && !Array.isArray(value)) {
      for (const sub of Object.keys(value)) keys.push(`${key}.${sub}`);
    } else {
      keys.push(key);
    }
  }
  return keys;
}

/**
 * Settings from the environment: `ADMISSION_GUARD_SETTINGS` (a JSON or YAML document with the
 * whole or part of the settings), then one variable per key (`ADMISSION_GUARD_REGISTRIES_ALLOWED`)
 * whose value is YAML (`[ghcr.io, quay.io]`, `true`, `1000`) or, for lists, comma-separated.
 * An ADMISSION_GUARD_* variable that names no setting is an error, not silently ignored.
 */
export function settingsFromEnv(env: NodeJS.ProcessEnv = process.env): Settings {
  const problems: string[] = [];
  let raw: Record<string, unknown> = {};
  const doc = env.ADMISSION_GUARD_SETTINGS;
  if (doc && doc.trim()) {
    try {
      const parsed = parseSettingsYaml(doc);
      if (parsed && typeof parsed === "object" && !Array.isArray(parsed))
        raw = parsed as Record<string, unknown>;
      else problems.push("ADMISSION_GUARD_SETTINGS: must be a JSON or YAML mapping");
    } catch (e) {
      problems.push(`ADMISSION_GUARD_SETTINGS: not JSON or YAML (${(e as Error).message})`);
    }
  }
  const defaults = defaultSettings();
  const byEnv = new Map(settingKeys(defaults).map(k => [envName(k), k]));
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith("ADMISSION_GUARD_") || RUNTIME_ENV.includes(name)) continue;
    if (value === undefined) continue;
    const dotted = byEnv.get(name);
    if (!dotted) {
      problems.push(`${name}: names no setting (known: ${[...byEnv.keys()].join(", ")})`);
      continue;
    }
    const [section, key] = dotted.split(".");
    const defaultValue = key
      ? (defaults as unknown as Record<string, Record<string, unknown>>)[section][key]
      : (defaults as Record<string, unknown>)[section];
    const parsedValue = parseEnvValue(value, Array.isArray(defaultValue));
    if (key) {
      const sectionObj = (raw[section] ?? {}) as Record<string, unknown>;
      sectionObj[key] = parsedValue;
      raw[section] = sectionObj;
    } else {
      raw[section] = parsedValue;
    }
  }
  if (problems.length) throw new SettingsError("environment", problems);
  const setBy = (dotted: string) => {
    const name = envName(dotted);
    return env[name] !== undefined ? name : doc ? "ADMISSION_GUARD_SETTINGS" : undefined;
  };
  return parseSettings(raw, "environment", setBy);
}

function parseEnvValue(value: string, wantsList: boolean): unknown {
  const trimmed = value.trim();
  if (wantsList && !trimmed.startsWith("[")) {
    return trimmed === ""
      ? []
      : trimmed
          .split(",")
          .map(s => s.trim())
          .filter(Boolean);
  }
  try {
    return parseSettingsYaml(trimmed);
  } catch {
    return trimmed;
  }
}
