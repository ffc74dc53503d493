// KServe's ServingRuntimes and ClusterServingRuntimes (serving.kserve.io/v1alpha1) as the module
// reads them: what an InferenceService's model predictor is built from
// (lib/workload-kinds/inference-service.ts). Kept as projections: the fields the pod build reads
// (the runtime's name, the model formats it supports and how it is chosen, its containers and the
// pod-level fields KServe takes from it), never the whole object. Pure; the live cache is
// lib/cluster/serving-runtime-cache.ts, the snapshot's objects are read through the same projection.
import type { KubernetesObject } from "kubernetes-fluent-client";
import type { KubeObject } from "../objects/pod";
import { isRecord } from "../objects/record";

export const SERVING_RUNTIME_GROUP = "serving.kserve.io";
export const SERVING_RUNTIME_VERSION = "v1alpha1";

/** The runtime fields KServe's pod build reads: pod-level ones it merges under the predictor's. */
const POD_FIELDS = ["volumes", "nodeSelector", "affinity", "tolerations", "imagePullSecrets"];
/** How a runtime is chosen and what its pods carry. */
const CHOICE_FIELDS = [
  "supportedModelFormats",
  "disabled",
  "multiModel",
  "protocolVersions",
  "containers",
  "labels",
  "annotations",
];

/** A ServingRuntime or ClusterServingRuntime reduced to what the pod build reads. */
export function servingRuntimeAsRead<T extends KubernetesObject>(obj: T): T {
  const raw = (obj as { spec?: unknown }).spec;
  const spec = isRecord(raw) ? raw : {};
  const kept: Record<string, unknown> = {};
  for (const k of [...CHOICE_FIELDS, ...POD_FIELDS]) if (spec[k] !== undefined) kept[k] = spec[k];
  const m = obj.metadata;
  const metadata: Record<string, unknown> = { name: m?.name };
  if (m?.namespace) metadata.namespace = m.namespace;
  if (m?.creationTimestamp) metadata.creationTimestamp = m.creationTimestamp;
  if (m?.resourceVersion) metadata.resourceVersion = m.resourceVersion;
  return { apiVersion: obj.apiVersion, kind: obj.kind, metadata, spec: kept } as unknown as T;
}

/** What the cluster view answers about runtimes (lib/cluster/view.ts ClusterView). */
export interface RuntimeSource {
  readonly source: "live" | "snapshot";
  servingRuntimes?(namespace: string): readonly KubeObject[] | undefined;
  clusterServingRuntimes?(): readonly KubeObject[] | undefined;
}

export interface ModelFormat {
  name: string;
  version?: string;
}

/** The runtime KServe would build a model's pods from, or why it cannot be said. */
export type RuntimeChoice =
  | { state: "found"; runtime: KubeObject; kind: string; name: string }
  /** The runtimes are not known (cache not listed, snapshot without them). */
  | { state: "unknown"; reason: string }
  /** Known, and KServe would not deploy the model (no runtime, disabled, unsupported): said, not judged. */
  | { state: "none"; reason: string };

const specOf = (rt: KubeObject): Record<string, unknown> =>
  isRecord(rt.spec) ? (rt.spec as Record<string, unknown>) : {};

const formatsOf = (rt: KubeObject) => {
  const list = specOf(rt).supportedModelFormats;
  return Array.isArray(list) ? list.filter(isRecord) : [];
};

/**
 * Whether the runtime supports the model format: one of its formats has the model's name, and its
 * version when the model names one (KServe's labels "mt:name" and "mt:name:version"). Unless the
 * runtime is named, only formats with autoSelect count.
 */
function supports(rt: KubeObject, format: ModelFormat, named: boolean): boolean {
  return formatsOf(rt).some(
    f =>
      (named || f.autoSelect === true) &&
      f.name === format.name &&
      (format.version === undefined || f.version === format.version),
  );
}

const protocolSupported = (rt: KubeObject, protocol: string | undefined) => {
  const list = specOf(rt).protocolVersions;
  return !protocol || !Array.isArray(list) || !list.length || list.includes(protocol);
};

/** The priority of the runtime's format entry of that name; undefined when unset. */
function priorityOf(rt: KubeObject, format: ModelFormat): number | undefined {
  const p = formatsOf(rt).find(f => f.name === format.name)?.priority;
  return typeof p === "number" ? p : undefined;
}

/** Newest first, then by name: KServe's order before priority; then a set priority first, the higher first. */
function ranked(runtimes: KubeObject[], format: ModelFormat): KubeObject[] {
  const created = (rt: KubeObject) => Date.parse(String(rt.metadata?.creationTimestamp ?? "")) || 0;
  return [...runtimes]
    .sort(
      (a, b) =>
        created(b) - created(a) || String(a.metadata?.name).localeCompare(String(b.metadata?.name)),
    )
    .sort((a, b) => {
      const pa = priorityOf(a, format);
      const pb = priorityOf(b, format);
      if (pa === undefined || pb === undefined)
        return (pa === undefined ? 1 : 0) - (pb === undefined ? 1 : 0);
      return pb - pa;
    });
}

/**
 * Runtimes ranked at most, per kind: a namespace holding thousands is not ranked on every request.
 * Past it the runtime KServe would choose is not said (a name is still looked up).
 */
export const MAX_RUNTIMES_READ = 500;

const unknownReason = (cluster: RuntimeSource) =>
  cluster.source === "live"
    ? "the controller does not know the cluster's ServingRuntimes yet (its cache has not listed them, or KServe's CRDs are not served)"
    : "the cluster snapshot holds no ServingRuntime or ClusterServingRuntime (give check --cluster the output of kubectl get servingruntimes,clusterservingruntimes -A -o yaml, or put the runtime in the manifests)";

/**
 * The runtime of a model predictor, as KServe's controller chooses it: a named runtime is the
 * namespace's ServingRuntime of that name, else the ClusterServingRuntime; without a name, the
 * namespace's ServingRuntimes first, then the ClusterServingRuntimes, each not disabled, for
 * single-model serving, supporting the format with autoSelect (and the model's protocolVersion),
 * the highest priority first, then the newest. Unknown when the view lacks what decides it.
 */
export function chooseRuntime(
  cluster: RuntimeSource | undefined,
  namespace: string,
  format: ModelFormat,
  named: string | undefined,
  protocol: string | undefined,
): RuntimeChoice {
  const inNamespace = cluster?.servingRuntimes?.(namespace);
  const clusterWide = cluster?.clusterServingRuntimes?.();
  // The namespace's runtimes come first: without them nothing can be said; without the
  // ClusterServingRuntimes, only what a namespace runtime decides.
  const unknown = {
    state: "unknown" as const,
    reason: cluster ? unknownReason(cluster) : "no cluster view",
  };
  if (!cluster || !inNamespace) return unknown;
  const found = (rt: KubeObject, kind: string) => ({
    state: "found" as const,
    runtime: rt,
    kind,
    name: String(rt.metadata?.name),
  });
  if (named) {
    const own = inNamespace.find(rt => rt.metadata?.name === named);
    if (!own && !clusterWide) return unknown;
    const rt = own ?? clusterWide?.find(rt => rt.metadata?.name === named);
    const kind = own ? "ServingRuntime" : "ClusterServingRuntime";
    if (!rt)
      return {
        state: "none",
        reason: `no ServingRuntime ${named} in namespace ${namespace} and no ClusterServingRuntime ${named}: KServe waits for it and makes no pod`,
      };
    if (specOf(rt).disabled === true)
      return { state: "none", reason: `${kind} ${named} is disabled: KServe makes no pod` };
    if (!supports(rt, format, true))
      return {
        state: "none",
        reason: `${kind} ${named} does not support model format ${describeFormat(format)}: KServe makes no pod`,
      };
    return found(rt, kind);
  }
  const tooMany = [inNamespace, clusterWide].find(list => (list?.length ?? 0) > MAX_RUNTIMES_READ);
  if (tooMany)
    return {
      state: "unknown",
      reason: `over ${MAX_RUNTIMES_READ} ${tooMany === inNamespace ? `ServingRuntimes in namespace ${namespace}` : "ClusterServingRuntimes"}: the one KServe would choose is not worked out at apply (name it in spec.predictor.model.runtime)`,
    };
  const usable = (rt: KubeObject) =>
    specOf(rt).disabled !== true &&
    specOf(rt).multiModel !== true &&
    supports(rt, format, false) &&
    protocolSupported(rt, protocol);
  const own = ranked(inNamespace.filter(usable), format)[0];
  if (own) return found(own, "ServingRuntime");
  if (!clusterWide) return unknown;
  const wide = ranked(clusterWide.filter(usable), format)[0];
  if (wide) return found(wide, "ClusterServingRuntime");
  return {
    state: "none",
    reason: `no ServingRuntime or ClusterServingRuntime supports model format ${describeFormat(format)} with autoSelect: KServe makes no pod until one does`,
  };
}

export const describeFormat = (f: ModelFormat) =>
  f.version === undefined ? f.name : `${f.name} version ${f.version}`;
