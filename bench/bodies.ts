// Review bodies of the seeds' pods for the profiling and A/B tools, and the load that sends them:
// a mutate body is the Pod CREATE review the API server sends; a validate body holds the pod as our
// own mutation left it.
import { join } from "node:path";
import autocannon from "autocannon";
import type { KubeObject } from "../lib/objects/pod";
import { applyPatch, podCreateReview } from "../test/support/admission";
import { REPO_ROOT, startController, type Controller } from "../test/support/controller";
import { seedWorkloads } from "../test/support/manifests";
import { startStandIn, type StandInApi } from "../test/support/stand-in-api";
import { cachesSynced } from "../test/support/wait";
import { pidOnPort } from "./proc";

export async function seedPodBodies(
  api: StandInApi,
  pods: KubeObject[],
  mode: "mutate" | "validate",
): Promise<string[]> {
  const bodies: string[] = [];
  const mutator = await startController({
    // The module as deployed: no example capability.
    examples: false,
    api,
    env: { LOG_LEVEL: "warn" },
  });
  try {
    for (const pod of pods) {
      const review = podCreateReview(pod);
      if (mode === "validate") {
        const answer = await mutator.mutate(review);
        const object = applyPatch(review.request!.object as KubeObject, answer.response!);
        review.request = { ...review.request!, object };
      }
      bodies.push(JSON.stringify(review));
    }
  } finally {
    await mutator.stop();
  }
  return bodies;
}

/** Sends the bodies in turn to one path for `duration` seconds on keep-alive connections (8). */
export function drive(
  url: string,
  path: string,
  bodies: string[],
  duration: number,
  connections = 8,
) {
  return new Promise<autocannon.Result>((ok, fail) =>
    autocannon(
      {
        url,
        duration,
        connections,
        requests: bodies.map(body => ({
          method: "POST" as const,
          path,
          headers: { "content-type": "application/json" },
          body,
        })),
      },
      (err: Error | null, r: autocannon.Result) => (err ? fail(err) : ok(r)),
    ),
  );
}

/**
 * One controller (this bundle, or the module as built) against the stand-in API with the seeds'
 * cluster, with a script of bench/ loaded into it (NODE_OPTIONS=--import) and the seeds' pods as
 * review bodies for `mode`; `run` drives it, then both are stopped.
 */
export async function withSeededController<T>(
  options: {
    mode: "mutate" | "validate";
    preload: string;
    env: Record<string, string>;
    bundle?: string;
    /** Pepr's floor watches no caches: nothing to wait for. */
    watches?: boolean;
  },
  run: (it: { controller: Controller; pid: number; path: string; bodies: string[] }) => Promise<T>,
): Promise<T> {
  const seeds = seedWorkloads();
  const pods = seeds.workloads.map(m => m.object).filter(o => o.kind === "Pod");
  const api = await startStandIn({ objects: seeds.cluster });
  try {
    const bodies = await seedPodBodies(api, pods, options.mode);
    const controller = await startController({
      // The module as deployed: no example capability.
      examples: false,
      api,
      bundle: options.bundle,
      env: {
        LOG_LEVEL: "warn",
        NODE_OPTIONS: `--import ${join(REPO_ROOT, "bench", options.preload)}`,
        ...options.env,
      },
    });
    try {
      if (options.watches !== false) await cachesSynced(api);
      const pid = pidOnPort(controller.port);
      return await run({
        controller,
        pid,
        path: `/${options.mode}/${controller.apiPath}`,
        bodies,
      });
    } finally {
      await controller.stop();
    }
  } finally {
    await api.stop();
  }
}
