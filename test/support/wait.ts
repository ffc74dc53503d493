// Bounded waiting for things that happen asynchronously in the controller (a watch event reaching
// its cache). Polls; never asserts on how long something took.
import type { StandInApi } from "./stand-in-api";

/** Retries `probe` until it returns without throwing (its result), or throws its last error after timeoutMs. */
export async function eventually<T>(
  probe: () => T | Promise<T>,
  timeoutMs = 10_000,
  intervalMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await probe();
    } catch (e) {
      if (Date.now() > deadline) throw e;
    }
    await new Promise(r => setTimeout(r, intervalMs));
  }
}

/** The kinds lib/cluster/live.ts watches in the admission process. */
export const CACHED_KINDS = [
  "Namespace",
  "ResourceQuota",
  "LimitRange",
  "Node",
  "ServiceAccount",
  "Exemption",
];

/**
 * Waits until the controller holds a watch on each kind: its first list is then done, so its cache
 * holds what the stand-in held at that moment (later changes arrive as watch events).
 */
export function cachesSynced(api: StandInApi, kinds = CACHED_KINDS, timeoutMs = 15_000) {
  return eventually(() => {
    const missing = kinds.filter(k => api.watching(k) === 0);
    if (missing.length) throw new Error(`the controller does not watch ${missing.join(", ")} yet`);
  }, timeoutMs);
}
