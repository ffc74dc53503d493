// Sizes as the API server and etcd see them, and how to print them.
import type { KubeObject } from "../../lib/objects/pod";
import { isRecord } from "../../lib/objects/record";

/** 1234567 → "1,234,567" (fixed format, independent of the locale). */
export function withThousands(n: number): string {
  return String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/** 812 → "812 B", 5300 → "5.2 KiB", 1363149 → "1.3 MiB". */
export function formatBytes(n: number): string {
  if (n < 1024) return `${withThousands(n)} B`;
  if (n < 1024 * 1024) return `${trim1(n / 1024)} KiB`;
  return `${trim1(n / (1024 * 1024))} MiB`;
}

/** One decimal, truncated (a size just over a limit never prints as the limit), "1.0" as "1". */
function trim1(x: number): string {
  const tenths = Math.floor(x * 10 + 1e-9);
  const whole = withThousands(Math.floor(tenths / 10));
  return tenths % 10 ? `${whole}.${tenths % 10}` : whole;
}

/** Bytes of a value serialized as JSON (what the request and the AdmissionReview carry). */
export function jsonBytes(value: unknown): number {
  try {
    const text = JSON.stringify(value);
    return text === undefined ? 0 : Buffer.byteLength(text, "utf8");
  } catch {
    return 0;
  }
}

/**
 * Pepr's own `<module uuid>.pepr.dev/<capability>` annotations, added by the mutating webhook: left
 * out of every count (a few dozen bytes each) so that `check`, which never sees them, counts the
 * same bytes as the webhook.
 */
const PEPR_ANNOTATION =
  /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.pepr\.dev\//;

export function withoutPeprAnnotations(obj: KubeObject): KubeObject {
  const annotations = obj.metadata?.annotations;
  if (!isRecord(annotations) || !Object.keys(annotations).some(k => PEPR_ANNOTATION.test(k)))
    return obj;
  const kept = Object.fromEntries(
    Object.entries(annotations).filter(([k]) => !PEPR_ANNOTATION.test(k)),
  );
  const metadata: KubeObject["metadata"] = { ...obj.metadata, annotations: kept };
  if (!Object.keys(kept).length) delete metadata.annotations; // Pepr created the map
  return { ...obj, metadata };
}

/**
 * The object as it will be stored (Pepr's annotations aside). A Secret's stringData is merged into data as base64 by the API
 * server before admission; a manifest given to `check` still has it, so it is converted here the
 * same way, so that both front doors count the same bytes.
 */
export function storedForm(input: KubeObject): KubeObject {
  const obj = withoutPeprAnnotations(input);
  if (obj.kind !== "Secret" || !isRecord(obj.stringData)) return obj;
  const data: Record<string, unknown> = isRecord(obj.data) ? { ...obj.data } : {};
  for (const [k, v] of Object.entries(obj.stringData))
    data[k] = Buffer.from(String(v), "utf8").toString("base64");
  const stored: KubeObject = { ...obj, data };
  delete stored.stringData;
  return stored;
}

/** Kubernetes' count for annotations: the bytes of every key plus every value. */
export function annotationBytes(annotations: unknown): number {
  if (!isRecord(annotations)) return 0;
  let total = 0;
  for (const [k, v] of Object.entries(annotations))
    total += Buffer.byteLength(k, "utf8") + Buffer.byteLength(String(v ?? ""), "utf8");
  return total;
}

export const countOf = (list: unknown): number => (Array.isArray(list) ? list.length : 0);

/** Each projected volume of a pod spec with its source count, in order (unnamed: "#<index>"). */
export function projectedSources(volumes: unknown): { volume: string; sources: number }[] {
  if (!Array.isArray(volumes)) return [];
  const out: { volume: string; sources: number }[] = [];
  volumes.forEach((v, i) => {
    if (!isRecord(v) || !isRecord(v.projected)) return;
    out.push({
      volume: typeof v.name === "string" ? v.name : `#${i}`,
      sources: countOf(v.projected.sources),
    });
  });
  return out;
}

/** All projected volume sources of a pod spec together. */
export const projectedSourceCount = (volumes: unknown): number =>
  projectedSources(volumes).reduce((total, p) => total + p.sources, 0);
