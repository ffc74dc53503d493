// The settings' schema: every key with its default and its limits, and the named errors a bad
// value gets. Defaults are here and only here.
import * as z from "zod/mini";
import { ExemptionsSettingsSchema } from "../exemptions/settings";
import { ImagesSettingsSchema, prefixProblem, registryPrefix } from "../images/settings";
import { MODES, SYSTEM_NAMESPACES } from "../objects/keys";
import { namespaceName } from "../objects/names";
import "../objects/zod-messages";
import { safeParseQuantity } from "../objects/quantity";
import { WebhooksSettingsSchema } from "../webhooks/arming";
import { WorkloadsSettingsSchema } from "../workload-kinds/schema";

const quantityLike = z.int().check(z.nonnegative());
const absolutePath = z.string().check(z.regex(/^\/[^\0]*$/, "must be an absolute path"));
export const READ_ONLY_ROOT = ["off", "fill"] as const;
/** Whether a root image's unwritable WORKDIR is copied to an emptyDir (and the namespace label). */
export const WORKDIR_COPY = ["copy", "off"] as const;
/**
 * Where the watcher writes its reports: wgpolicyk8s.io PolicyReports, openreports.io Reports, both,
 * or (auto) each of the two the API server serves. Why: docs/adr/0037-reports-api-a-setting.md
 */
export const REPORTS_API = ["wgpolicyk8s", "openreports", "both", "auto"] as const;
/** Which pods get a memory-backed /dev/shm (sharedMemory.mount, and the namespace label). */
export const SHARED_MEMORY_MOUNT = ["gpu", "all", "off"] as const;
/** What an accelerators check does with a pod that breaks its rule. */
export const ACCELERATOR_CHECK = ["deny", "warn", "off"] as const;
const acceleratorCheck = z._default(z.enum(ACCELERATOR_CHECK), "warn");
/** A positive amount of memory, as a Kubernetes quantity of bytes: "1Gi", "512Mi". */
const memoryQuantity = z.pipe(
  z.union([z.string(), z.number()]).check(
    z.superRefine((value, ctx) => {
      const parsed = safeParseQuantity(value);
      if (!parsed.ok) ctx.addIssue({ code: "custom", message: parsed.error });
      else if (parsed.quantity.milli < 1_048_576_000n)
        ctx.addIssue({ code: "custom", message: `${JSON.stringify(value)} is less than 1Mi` });
    }),
  ),
  z.transform(String),
);
/** A Pod Security policy version, as the enforce-version label writes it. */
const policyVersion = z
  .string()
  .check(z.regex(/^(latest|v1\.(0|[1-9][0-9]{0,8}))$/, 'must be "latest" or "v1.N", e.g. v1.30'));

/** A user or group name, written into the policy's CEL as a string literal: no quote, backslash or control. */
const celString = z.string().check(
  z.minLength(1),
  z.maxLength(253),
  z.refine(
    name => ![...name].some(c => c === '"' || c === "\\" || c < " " || c === "\u007f"),
    "must not hold a quote, a backslash or a control character",
  ),
);

/** A label key as the API server accepts it: an optional DNS-subdomain prefix and a name. */
const labelKey = z
  .string()
  .check(
    z.regex(
      /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/,
      "must be a label key (an optional DNS-subdomain prefix and /, then up to 63 letters, digits, -, _ or .)",
    ),
    z.maxLength(253 + 1 + 63),
  );

/** Source prefix → mirror prefix; a bad source is named by its key. */
const mirrorMap = z.record(z.string(), registryPrefix).check(
  z.superRefine((map, ctx) => {
    for (const from of Object.keys(map)) {
      const problem = prefixProblem(from);
      if (problem) ctx.addIssue({ code: "custom", message: problem, path: [from] });
    }
  }),
);

export const SettingsSchema = z
  .strictObject({
    /** Mode of namespaces without the mode label. */
    mode: z._default(z.enum(MODES), "enforce"),
    /** Extra namespaces never touched, besides the system ones. */
    ignoredNamespaces: z._default(z.array(namespaceName), []),
    securityContext: z.prefault(
      z.strictObject({
        enabled: z._default(z.boolean(), true),
        /** Fill unset restricted-level fields on Pod CREATE. Off: validate only. */
        mutate: z._default(z.boolean(), true),
        /** For an image built to run as root or as a named user, or not inspected. */
        runAsUser: z._default(z.int().check(z.gte(1)), 1000),
        runAsGroup: z._default(z.int().check(z.gte(0)), 3000),
        /**
         * HOME for a container that runs as runAsUser in an image built for root (or a named user):
         * an emptyDir mounted here and HOME set to it, so caches (~/.cache, ~/.triton) can be written.
         */
        homePath: z._default(absolutePath, "/home/workload"),
        /**
         * readOnlyRootFilesystem: "off" leaves it alone (Pod Security does not ask for it, and it is
         * the fix most likely to break a job); "fill" sets it where unset, with emptyDirs at
         * writablePaths and HOME. A namespace label may choose otherwise.
         */
        readOnlyRootFilesystem: z._default(z.enum(READ_ONLY_ROOT), "off"),
        /** Paths that get an emptyDir when the root filesystem is made read-only. */
        writablePaths: z._default(z.array(absolutePath), ["/tmp"]),
        /**
         * An image built to run as root or as a named user, whose pod leaves the user to the fix:
         * "warn" (it runs as runAsUser, and the warning names its WORKDIR and the fix) or "deny"
         * (rule image-user: rebuild with a numeric USER, or set runAsUser yourself).
         */
        rootImages: z._default(z.enum(["warn", "deny"]), "warn"),
        /**
         * An image built for root whose WORKDIR the configured UID cannot write: "copy" gives the
         * container an emptyDir at WORKDIR, filled first by an init container of the same image
         * copying WORKDIR into it (when the image has /bin/cp and WORKDIR is within
         * workdirCopyBytes); "off" leaves it (the warning says so). A namespace label may choose.
         * Why: docs/adr/0033-root-workdir-copied-to-an-emptydir.md
         */
        workdirCopy: z._default(z.enum(WORKDIR_COPY), "copy"),
        /** WORKDIR's bytes, as its image's layers list them, copied at most. */
        workdirCopyBytes: z._default(z.int().check(z.gte(0)), 512 * 1024 * 1024),
        /**
         * A port below 1024 that a non-root, drop-ALL container listens on: "sysctl" sets the pod's
         * net.ipv4.ip_unprivileged_port_start to the lowest such port. The ports are its
         * containerPort, its image's EXPOSE and Env PORT=80-style values; only where the
         * namespace's Pod Security version allows the sysctl (v1.22 on), never with hostNetwork
         * or over the pod's own value; "off" leaves it.
         * Why: docs/adr/0038-ml-image-shapes-from-the-config.md
         */
        lowPorts: z._default(z.enum(["sysctl", "off"]), "sysctl"),
        /**
         * A missing cache or data directory a root image's Env names (HF_HOME, TORCH_HOME,
         * MLFLOW_TRACKING_URI=file:...): "emptyDir" mounts a writable emptyDir there (one root owns
         * is named at admission, never mounted over: it may hold the image's own files). Only
         * outside HOME and WORKDIR, as its layers show the directory, at most 8 per pod; "off"
         * leaves it. Why: docs/adr/0038-ml-image-shapes-from-the-config.md
         */
        cacheDirs: z._default(z.enum(["emptyDir", "off"]), "emptyDir"),
        /**
         * The Pod Security level of a namespace without the pod-security.kubernetes.io/enforce
         * label. "restricted" is the hardening choice; a cluster whose AdmissionConfiguration gives
         * Pod Security Admission another default (baseline, privileged) should mirror it here.
         */
        defaultLevel: z._default(z.enum(["privileged", "baseline", "restricted"]), "restricted"),
        /** The policy version of such a namespace: "latest" or "v1.N" (as enforce-version). */
        defaultVersion: z._default(policyVersion, "latest"),
        /**
         * The API server's own Kubernetes version ("v1.32"), or "latest": Pod Security Admission
         * evaluates "latest" and any newer version as its own. "latest" is the version the
         * controller reads from the API server's /version at start (offline, in `check`: the
         * newest policy the module knows, v1.37); set it where that read is not wanted.
         */
        clusterVersion: z._default(policyVersion, "latest"),
      }),
      {},
    ),
    webhooks: WebhooksSettingsSchema,
    images: ImagesSettingsSchema,
    labels: z.prefault(
      z.strictObject({
        enabled: z._default(z.boolean(), true),
        mutate: z._default(z.boolean(), true),
        /** Opt-in: drop the legacy `app` label after copying it (never on pods with an owner). */
        removeLegacyAppLabel: z._default(z.boolean(), false),
      }),
      {},
    ),
    serviceAccount: z.prefault(
      z.strictObject({
        enabled: z._default(z.boolean(), true),
        mutate: z._default(z.boolean(), true),
        /** The dedicated ServiceAccount that replaces "default" (a namespace annotation may name another). */
        name: z._default(
          z
            .string()
            .check(z.regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, "must be a DNS subdomain name")),
          "workload",
        ),
        /**
         * The names the namespace annotation admission-guard.dev/service-account may choose besides
         * `name` ("team-*" is a prefix; "default" only as an exact entry). Any other is not used (a
         * warning): a tenant's annotation must not make the module create or move pods onto
         * another controller's account.
         */
        allowedNames: z._default(
          z
            .array(
              z
                .string()
                .check(
                  z.regex(
                    /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?|[a-z0-9][-a-z0-9.]*\*)$/,
                    'must be a ServiceAccount name, or a prefix of one ending in "*" (team-*)',
                  ),
                  z.maxLength(253),
                ),
            )
            .check(z.maxLength(100)),
          [],
        ),
        /** Keep the API server's injected token volume on pods that did not ask for a token. */
        keepTokens: z._default(z.boolean(), false),
        /** Secret access check: off | warn (default) | enforce. */
        secretAccess: z._default(z.enum(["off", "warn", "enforce"]), "warn"),
        /** Create the dedicated ServiceAccount when it does not exist. */
        ensure: z._default(z.boolean(), true),
        /**
         * Distinct secrets whose access is checked per object (one SubjectAccessReview each, all roles
         * of a workload together); the rest are "not checked", said in a warning. Bounds the API calls
         * one object can cause (a pod may name tens of thousands of secrets).
         */
        maxSecretReviews: z._default(z.int().check(z.gte(1), z.lte(100)), 32),
      }),
      {},
    ),
    resourceQuota: z.prefault(
      z.strictObject({
        enabled: z._default(z.boolean(), true),
        nodeFit: z._default(z.boolean(), true),
        /**
         * A gang (a PyTorchJob, a JobSet, a Volcano Job's minAvailable) that even empty nodes could
         * never hold at once: deny, warn (a cluster autoscaler adds nodes of the kinds that exist),
         * or off. Off too with nodeFit off.
         */
        gangCapacity: z._default(z.enum(["deny", "warn", "off"]), "deny"),
        /** When quota/node data cannot be had (cache not synced, API unreachable): allow with a warning, or deny. */
        onUnavailable: z._default(z.enum(["allow", "deny"]), "allow"),
      }),
      {},
    ),
    sharedMemory: z.prefault(
      z.strictObject({
        enabled: z._default(z.boolean(), true),
        /**
         * Which pods get a memory-backed emptyDir at /dev/shm (the runtime's own is 64 MiB, too
         * small for PyTorch's DataLoader workers): "gpu" (pods that ask for a GPU), "all", "off".
         * The namespace label admission-guard.dev/shared-memory overrides it.
         */
        mount: z._default(z.enum(SHARED_MEMORY_MOUNT), "gpu"),
        /** Its sizeLimit: this fraction of the largest memory limit of the pod's containers. */
        sizeFraction: z._default(z.number().check(z.gt(0), z.lte(1)), 0.5),
        /** Its sizeLimit when no container has a memory limit (a quantity of bytes). */
        defaultSizeLimit: z._default(memoryQuantity, "1Gi"),
      }),
      {},
    ),
    teamLabel: z.prefault(
      z.strictObject({
        /** The team-label capability (the worked example of docs/add-a-capability.md): off by default. */
        enabled: z._default(z.boolean(), false),
        /** The label every pod carries, given the namespace's value of the same label when absent. */
        key: z._default(labelKey, "team"),
        /** A pod left without it: "deny", "warn" (admitted, the warning says the fix) or "off". */
        missing: z._default(z.enum(["deny", "warn", "off"]), "warn"),
      }),
      {},
    ),
    accelerators: z.prefault(
      z.strictObject({
        enabled: z._default(z.boolean(), true),
        /**
         * The fix on pods that ask for an accelerator: the tolerations of the taints its nodes carry
         * (and the ExtendedResourceToleration convention), and runtimeClassName.
         */
        mutate: z._default(z.boolean(), true),
        /** A RuntimeClass every accelerator pod without one gets ("nvidia"); "": none. */
        runtimeClassName: z._default(
          z
            .string()
            .check(
              z.maxLength(253),
              z.regex(
                /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$/,
                "must be a RuntimeClass name (a DNS subdomain) or empty",
              ),
            ),
          "",
        ),
        /** A GPU container whose memory request is below its limit (evicted first under pressure). */
        memoryRequest: acceleratorCheck,
        /** A GPU container with no CPU request (starved by its neighbours). */
        cpuRequest: acceleratorCheck,
        /** More accelerators in one pod than maxPerPod (or the namespace label). */
        maxPerPod: acceleratorCheck,
        /** The most accelerators one pod may ask for; 0: no limit. The namespace label overrides it. */
        maxPerPodCount: z._default(z.int().check(z.gte(0), z.lte(1024)), 0),
        /** A Pod asking for accelerators that no controller owns (holds them until deleted). */
        barePod: acceleratorCheck,
        /** A pod that tolerates or selects only GPU nodes without asking for an accelerator. */
        gpuNodeWithoutAccelerator: acceleratorCheck,
      }),
      {},
    ),
    registries: z.prefault(
      z.strictObject({
        enabled: z._default(z.boolean(), true),
        /** Registry hosts or repository prefixes; empty: the rule is off. */
        allowed: z._default(z.array(registryPrefix), []),
        /** Registry (or repository prefix) → mirror prefix, e.g. {"docker.io": "harbor.internal/dockerhub"}. */
        mirrors: z._default(mirrorMap, {}),
        requireDigest: z._default(z.boolean(), false),
        forbidLatest: z._default(z.boolean(), false),
      }),
      {},
    ),
    workloads: WorkloadsSettingsSchema,
    namespaceKeysPolicy: z.prefault(
      z.strictObject({
        /**
         * The ValidatingAdmissionPolicy that lets only the admins below set, change or remove
         * admission-guard.dev/* namespace labels and annotations, in the manifest the build writes
         * (and the chart's default). Read at build time only (package.json pepr.env).
         * Why: docs/adr/0027-namespace-keys-are-admins-by-default.md
         */
        enabled: z._default(z.boolean(), true),
        /** Groups whose members may set them: the cluster's own admin groups where not system:masters. */
        adminGroups: z._default(z.array(celString).check(z.maxLength(100)), ["system:masters"]),
        /** Users who may set them. */
        adminUsers: z._default(z.array(celString).check(z.maxLength(100)), []),
      }),
      {},
    ),
    exemptions: ExemptionsSettingsSchema,
    reports: z.prefault(
      z.strictObject({
        /** Write a PolicyReport per namespace for the Pods and workloads that already run (watcher). */
        enabled: z._default(z.boolean(), true),
        /** At most one write per namespace per this many seconds (changes in between are batched). */
        intervalSeconds: z._default(z.int().check(z.gte(1), z.lte(3600)), 30),
        /** Results kept per report (fail, then warn, skip, pass); the summary still counts all. */
        maxResults: z._default(z.int().check(z.gte(10), z.lte(20000)), 1000),
        /** Which API the reports are written to (the same content in each). */
        api: z._default(z.enum(REPORTS_API), "wgpolicyk8s"),
      }),
      {},
    ),
    events: z.prefault(
      z.strictObject({
        /** An Event on each pod the module fixed, shown by kubectl describe pod. */
        enabled: z._default(z.boolean(), true),
        /** Events written per second at most, across the cluster (bursts up to 5 seconds' worth). */
        perSecond: z._default(z.number().check(z.gte(0.1), z.lte(1000)), 10),
        /**
         * Events written per second at most for the pods of one namespace (bursts up to 5 seconds'
         * worth), within perSecond: one tenant's flood of pods cannot spend every namespace's budget.
         */
        perNamespacePerSecond: z._default(z.number().check(z.gte(0.1), z.lte(1000)), 1),
      }),
      {},
    ),
    payload: z.prefault(
      z.strictObject({
        enabled: z._default(z.boolean(), true),
        maxObjectBytes: z._default(quantityLike, 1024 * 1024),
        maxEnvPerContainer: z._default(quantityLike, 1000),
        maxEnvFromPerContainer: z._default(quantityLike, 50),
        maxVolumes: z._default(quantityLike, 100),
        maxVolumeMountsPerContainer: z._default(quantityLike, 100),
        /**
         * Sources of all projected volumes of a pod spec together (secret, configMap,
         * serviceAccountToken, downwardAPI, clusterTrustBundle): Kubernetes sets no limit, and each
         * is an object the kubelet fetches and watches. 10 × maxVolumes: a pod that merges its
         * volumes into projected ones, as the too-many-volumes fix advises, stays well under it.
         */
        maxProjectedSources: z._default(quantityLike, 1000),
        maxAnnotationBytes: z._default(quantityLike, 256 * 1024),
      }),
      {},
    ),
  })
  .check(
    z.superRefine((settings, ctx) => {
      // Exemptions are validated by the module's webhook as they are written: in a namespace the
      // webhook never sees, anyone who may write there would grant them unchecked.
      const ns = settings.exemptions.namespace;
      if (SYSTEM_NAMESPACES.includes(ns) || settings.ignoredNamespaces.includes(ns))
        ctx.addIssue({
          code: "custom",
          path: ["exemptions", "namespace"],
          message: `"${ns}" is a namespace the webhook never sees (${SYSTEM_NAMESPACES.includes(ns) ? "a system namespace" : "in ignoredNamespaces"}): Exemptions written there would not be validated; choose another (default admission-guard-exemptions)`,
        });
    }),
  );

export type Settings = z.infer<typeof SettingsSchema>;
export type SettingsInput = z.input<typeof SettingsSchema>;

export class SettingsError extends Error {
  constructor(
    readonly source: string,
    readonly problems: string[],
  ) {
    super(`invalid admission-guard settings (${source}):\n  - ${problems.join("\n  - ")}`);
    this.name = "SettingsError";
  }
}

/** `registries.allowed[0]`, `registries.mirrors["docker.io"]`: where a problem is, as a reader writes it. */
function keyOf(path: readonly PropertyKey[]): string {
  // Settings are `section.key`; deeper, a list index, a field of a list's element, or a map key (mirrors).
  return (
    path
      .map((part, i) =>
        typeof part === "number"
          ? `[${part}]`
          : i >= 2 && typeof path[i - 1] !== "number"
            ? `[${JSON.stringify(String(part))}]`
            : `${i ? "." : ""}${String(part)}`,
      )
      .join("") || "(root)"
  );
}

/** Validates raw settings (a parsed file or the environment's overrides). */
export function parseSettings(
  raw: unknown,
  source = "settings",
  /** How a reader sets a top-level key (`registries` → `ADMISSION_GUARD_REGISTRIES_*`), for messages. */
  setBy?: (dotted: string) => string | undefined,
): Settings {
  const result = SettingsSchema.safeParse(raw ?? {}, { reportInput: true });
  if (result.success) return result.data;
  throw new SettingsError(
    source,
    result.error.issues.map(issue => {
      const key = keyOf(issue.path);
      if (issue.code === "unrecognized_keys") {
        const where = issue.path.length ? `${key}.` : "";
        return `unknown setting ${issue.keys.map(k => `"${where}${k}"`).join(", ")}`;
      }
      const dotted = issue.path
        .slice(0, 2)
        .filter(p => typeof p === "string")
        .join(".");
      const via = setBy?.(dotted);
      // The value, unless the message quotes it already.
      const input = (issue as { input?: unknown }).input;
      const shown =
        input === undefined || typeof input === "object" || issue.message.includes(`"${input}"`)
          ? ""
          : ` (got ${JSON.stringify(input)})`;
      return `${key}${via ? ` (${via})` : ""}: ${issue.message}${shown}`;
    }),
  );
}

export const defaultSettings = (): Settings => parseSettings({}, "defaults");
