// The settings read when the module is built: they decide which bindings the module registers,
// and so the webhook rules and the watcher `pepr build` writes.
import { settingsFromEnv } from "./environment";
import { defaultSettings, type Settings } from "./schema";

/**
 * The environment the module's settings come from. `pepr build` loads the module to read its
 * bindings: then it is the controller's environment from package.json (pepr.env), over which the
 * build's own environment may set a value; in the controller, its environment (where pepr.env is).
 */
export function moduleEnvironment(
  controllerEnv: Record<string, string>,
  env: NodeJS.ProcessEnv = process.env,
): NodeJS.ProcessEnv {
  return env.PEPR_MODE === "build" ? { ...controllerEnv, ...env } : env;
}

/**
 * Whether the module has its watcher (capabilities/reports): read when the module is built, as the
 * Watch bindings decide whether `pepr build` writes a watcher Deployment. With reports and events
 * both off there is none, and none of its memory (it lists and caches every Pod and workload). A bad
 * value counts as on here; pepr.ts stops the start with the problem named.
 */
export function backgroundBindingsWanted(
  controllerEnv: Record<string, string>,
  env: NodeJS.ProcessEnv = process.env,
): boolean {
  try {
    const { reports, events } = settingsFromEnv(moduleEnvironment(controllerEnv, env));
    return reports.enabled || events.enabled;
  } catch {
    return true;
  }
}

/**
 * The workloads settings that decide the module's bindings, and so the webhook's rules `pepr build`
 * writes (workloads.mutate, .kinds, .builtInKinds): read when the module is built. A bad value counts as the defaults here; pepr.ts stops the start
 * with the problem named.
 */
export function workloadSettingsAtBuild(
  controllerEnv: Record<string, string>,
  env: NodeJS.ProcessEnv = process.env,
): Settings["workloads"] {
  try {
    return settingsFromEnv(moduleEnvironment(controllerEnv, env)).workloads;
  } catch {
    return defaultSettings().workloads;
  }
}
