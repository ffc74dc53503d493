// Wording shared by the quota and node-fit messages: which container asks how much, and a value
// that fits, rounded down to something a person would write.
import { describeContainer } from "../../lib/pod";
import { formatQuantity, type Quantity, type QuantityFormat } from "../../lib/quantity";
import type { PodResources } from "./resources";

export type Side = "requests" | "limits";

/** A quota resource name split into the container field it comes from: "limits.cpu" → limits of cpu. */
export function fieldOf(quotaResource: string): { side: Side; resource: string } {
  if (quotaResource.startsWith("limits."))
    return { side: "limits", resource: quotaResource.slice(7) };
  if (quotaResource.startsWith("requests."))
    return { side: "requests", resource: quotaResource.slice(9) };
  return { side: "requests", resource: quotaResource };
}

/**
 * Which containers ask for a resource and where the value came from:
 * `container "trainer" (spec.containers[0]) asks 8Gi, copied from its limit`.
 */
export function contributions(pod: PodResources, side: Side, resource: string): string {
  const parts: string[] = [];
  for (const c of pod.containers) {
    const q = (side === "requests" ? c.requests : c.limits).get(resource);
    if (!q || q.milli <= 0n) continue;
    let origin = "";
    if (side === "requests" && c.requestFromLimit.has(resource)) origin = ", copied from its limit";
    else if (c.fromLimitRange.has(resource)) origin = ", the namespace LimitRange's default";
    parts.push(`${describeContainer(c.ref)} (${c.ref.path}) asks ${formatQuantity(q)}${origin}`);
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
