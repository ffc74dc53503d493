// A stand-in API with the real controller in front of it, started and stopped together: what the
// e2e suites and the demo need. `useEnvironment` wires it into a jest suite.
import type { KubeObject } from "../../lib/objects/pod";
import { startController, type Controller, type ControllerOptions } from "./controller";
import { startStandIn, type StandInApi, type StandInOptions } from "./stand-in-api";
import { cachesSynced } from "./wait";

export interface EnvironmentOptions extends StandInOptions {
  objects?: KubeObject[];
  /** Controller environment (settingsEnv(...), LOG_LEVEL, ...). */
  env?: ControllerOptions["env"];
  /** The controller's bundle (a module copy's); default this repository's dist/. */
  bundle?: string;
}

export interface Environment {
  api: StandInApi;
  controller: Controller;
  stop(): Promise<void>;
}

/** Starts the stand-in, then the controller, and waits until the controller's caches are synced. */
export async function startEnvironment(options: EnvironmentOptions = {}): Promise<Environment> {
  const api = await startStandIn(options);
  let controller: Controller | undefined;
  try {
    controller = await startController({ api, env: options.env, bundle: options.bundle });
    await cachesSynced(api);
  } catch (e) {
    await controller?.stop();
    await api.stop();
    throw e;
  }
  const started = controller;
  return {
    api,
    controller: started,
    async stop() {
      await started.stop();
      await api.stop();
    },
  };
}

/**
 * One environment for a whole jest suite: started in beforeAll, stopped in afterAll. The fields
 * of the returned object are set once beforeAll has run.
 */
export function useEnvironment(options: EnvironmentOptions = {}): Environment {
  const env = {} as Environment;
  beforeAll(async () => {
    Object.assign(env, await startEnvironment(options));
  }, 60_000);
  afterAll(async () => {
    await env.stop?.();
  });
  return env;
}
