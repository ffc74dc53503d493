// The words admission-guard reads and writes on namespaces and objects (mode labels, annotations),
// and the namespaces it never touches.
export const MODES = ["enforce", "warn", "audit", "off"] as const;
export type Mode = (typeof MODES)[number];

/** Our labels and annotations on namespaces and objects. */
export const NS_KEYS = {
  /** Namespace label: enforce (default) | warn | audit | off. */
  mode: "admission-guard.dev/mode",
  /** Namespace label: the component value pods must carry, or "*" for any. */
  requireComponent: "admission-guard.dev/require-component",
  /** Namespace annotation: the ServiceAccount pods on "default" are moved to. */
  serviceAccount: "admission-guard.dev/service-account",
  /** Namespace annotation: comma-separated registries, narrowing registries.allowed for the namespace. */
  allowedRegistries: "admission-guard.dev/allowed-registries",
  /** Namespace label: off | fill, overriding securityContext.readOnlyRootFilesystem there. */
  readOnlyRoot: "admission-guard.dev/read-only-root-filesystem",
  /** Namespace label: copy | off, overriding securityContext.workdirCopy there. */
  workdirCopy: "admission-guard.dev/workdir-copy",
  /** Namespace label: gpu | all | off, overriding sharedMemory.mount there. */
  sharedMemory: "admission-guard.dev/shared-memory",
  /** Namespace label: the most accelerators (GPUs) one pod may ask for there, overriding accelerators.maxPerPod (0: no limit). */
  maxAccelerators: "admission-guard.dev/max-accelerators",
  /** Object annotation: what admission-guard changed, one capability/rule a line. */
  fixed: "admission-guard.dev/fixed",
  /** Object annotation: the Pod Security level and version security-context fixed to ("baseline:v1.30"). */
  podSecurityFixed: "admission-guard.dev/pod-security-fixed",
  /** Object annotation: fixes that failed, {capability: reason} (the validating webhook denies with them). */
  fixFailed: "admission-guard.dev/fix-failed",
} as const;

/** Every label and annotation of the module starts so (the namespace-keys policy keeps them to admins). */
export const NS_KEY_PREFIX = "admission-guard.dev/";

/**
 * Namespace label the install writes on the Exemptions namespace, with the module's uuid: only
 * there do Exemptions count (a namespace a tenant created first does not carry it).
 */
export const OWNED_BY_LABEL = "admission-guard.dev/owned-by";

/**
 * Annotation on the module's webhook configurations, the documented break-glass: "true" and the
 * controller sets their failurePolicy to Ignore and never arms them while it is there
 * (lib/webhooks/arming.ts). Removing it re-arms them (on the second round that sees a Ready replica).
 */
export const DISARM_ANNOTATION = "admission-guard.dev/disarm";

/** Namespaces admission-guard never touches, whatever the settings say. */
export const SYSTEM_NAMESPACES = ["kube-system", "kube-public", "kube-node-lease", "pepr-system"];

/** A system namespace, or one of the setting ignoredNamespaces. */
export function isIgnoredNamespace(
  ns: string | undefined,
  settings: { ignoredNamespaces: readonly string[] },
): boolean {
  if (!ns) return false;
  return SYSTEM_NAMESPACES.includes(ns) || settings.ignoredNamespaces.includes(ns);
}

/** A namespace as rules read it (lib/cluster/view.ts namespaceInfoOf projects it). */
export interface NamespaceInfo {
  name: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}
