// Review bodies of the seeds' pods for the profiling and A/B tools, and the load that sends them:
// a mutate body is the Pod CREATE review the API server sends; a validate body holds the pod as our
// own mutation left it.
import autocannon from "autocannon";
import type { KubeObject } from "../lib/objects/pod";
import { applyPatch, podCreateReview } from "../test/support/admission";
import { startController } from "../test/support/controller";
import type { StandInApi } from "../test/support/stand-in-api";

export async function seedPodBodies(
  api: StandInApi,
  pods: KubeObject[],
  mode: "mutate" | "validate",
): Promise<string[]> {
  const bodies: string[] = [];
  const mutator = await startController({ api, env: { LOG_LEVEL: "warn" } });
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

/** Sends the bodies in turn to one path for `duration` seconds at 8 keep-alive connections. */
export function drive(url: string, path: string, bodies: string[], duration: number) {
  return new Promise<autocannon.Result>((ok, fail) =>
    autocannon(
      {
        url,
        duration,
        connections: 8,
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
