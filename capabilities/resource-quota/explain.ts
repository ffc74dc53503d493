// Wording shared by the quota and node-fit messages: which container asks how much, and a value
// that fits, rounded down to something a person would write.
import { describeContainer } from "../../lib/objects/pod";
import { formatQuantity, type Quantity, type QuantityFormat } from "../../lib/objects/quantity";
import type { ContainerResources, PodResources } from "./resources";

export type Side = "requests" | "limits";

/** A quota resource name split into the container field it comes from: "limits.cpu" → limits of cpu. */
export function fieldOf(quotaResource: string): { side: Side; resource: string } {
  if (quotaResource.startsWith("limits."))
    return { side: "limits", resource: quotaResource.slice(7) };
  if (quotaResource.startsWith("requests."))
    return { side: "requests", resource: quotaResource.slice(9) };
  return { side: "requests", resource: quotaResource };
}

/** Whether a container's request of a resource equals its limit (set so, or copied from it). */
export function requestIsLimit(c: ContainerResources, resource: string): boolean {
  const request = c.requests.get(resource);
  return !!request && c.limits.get(resource)?.milli === request.milli;
}

/**
 * Which containers ask for a resource: `container "trainer" (spec.containers[0]) asks 8Gi, its
 * limit too`. Worded from the values alone, so a manifest as written (`check`) and the same pod
 * defaulted by the API server (webhook) read the same.
 */
export function contributions(pod: PodResources, side: Side, resource: string): string {
  const parts: string[] = [];
  for (const c of pod.containers) {
    const q = (side === "requests" ? c.requests : c.limits).get(resource);
    if (!q || q.milli <= 0n) continue;
    const same = side === "requests" && requestIsLimit(c, resource) ? ", its limit too" : "";
    parts.push(`${describeContainer(c.ref)} (${c.ref.path}) asks ${formatQuantity(q)}${same}`);
  }
  return parts.join("; ");
}

const MI_MILLI = 1024n * 1024n * 1000n;

/**
 * The largest value at most `milli` that a person would write for this resource: cpu keeps its
 * millicores; other resources are whole units, and binary ones whole Mi from 1Mi up.
 * undefined when nothing above zero fits.
 */
export function roundDown(
  milli: bigint,
  resource: string,
  format: QuantityFormat,
): Quantity | undefined {
  let value = milli;
  if (resource !== "cpu") value -= value % 1000n;
  if (format === "BinarySI" && value >= MI_MILLI) value -= value % MI_MILLI;
  return value > 0n ? { milli: value, format } : undefined;
}

/** "8", "16Gi": a quantity as kubectl prints it. */
export const show = (q: Quantity | undefined): string => (q ? formatQuantity(q) : "0");
