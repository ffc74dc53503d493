// The images section of the settings (lib/settings composes it), and the registry prefix the
// registries section names registries with too.
import * as z from "zod/mini";
import "../objects/zod-messages";
import { parsePrefix } from "../objects/image-reference";
import { parseCidr } from "./egress";
import { cloudCredentials } from "./cloud/settings";

const dnsName = z
  .string()
  .check(
    z.regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, "must be a DNS subdomain name"),
    z.maxLength(253),
  );
/**
 * A registry host or repository prefix ("ghcr.io", "docker.io/myorg"), checked once here so that
 * a setting that cannot work stops the start instead of being skipped on every request.
 */
export function prefixProblem(entry: string): string | undefined {
  const parsed = parsePrefix(entry);
  return parsed.ok
    ? undefined
    : `"${entry}" is not a registry or repository prefix (${parsed.reason}); write a host such as ghcr.io, or a host and path such as docker.io/myorg`;
}
export const registryPrefix = z.string().check(
  z.superRefine((entry, ctx) => {
    const problem = prefixProblem(entry);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  }),
);
/** A host as a URL writes it: "harbor.internal", "10.0.0.5:5000", "[fd00::5]:5000". */
const hostAndPort = z
  .string()
  .check(
    z.regex(
      /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?|\[[0-9a-f:.]+\])(:\d{1,5})?$/,
      "must be a host or host:port (lower case), e.g. harbor.internal or 10.0.0.5:5000",
    ),
    z.maxLength(260),
  );
/** An IPv4 or IPv6 range: "100.64.0.0/10", "2001:db8::/32". */
const cidr = z
  .string()
  .check(z.refine(c => parseCidr(c) !== undefined, "must be a CIDR, e.g. 10.96.0.0/12"));

export const ImagesSettingsSchema = z.prefault(
  z.strictObject({
    /** Read each image's config (User, WorkingDir, Env) from its registry to fix pods to fit it. */
    inspect: z._default(z.boolean(), true),
    /** Registry hosts (with port) spoken to over plain HTTP, as containerd's insecure registries. */
    plainHttp: z._default(z.array(registryPrefix), []),
    /** How long one admission request waits for its image lookups (the webhook timeout is 10 s). */
    budgetMs: z._default(z.int().check(z.gte(50), z.lte(8000)), 2000),
    /**
     * Read /etc/passwd, /etc/group and WORKDIR from the layers of an image whose USER is a name,
     * to run it as that user's UID and GID (issue 41).
     */
    readFiles: z._default(z.boolean(), true),
    /** Compressed layer bytes read per image for its files, at most. */
    layerBytes: z._default(z.int().check(z.gte(0), z.lte(64 * 1024 ** 3)), 1024 ** 3),
    /** The same, after decompression (with a ratio guard against gzip bombs besides). */
    layerBytesUncompressed: z._default(
      z.int().check(z.gte(0), z.lte(256 * 1024 ** 3)),
      4 * 1024 ** 3,
    ),
    /**
     * docker config Secrets (kubernetes.io/dockerconfigjson) in the module's namespace whose
     * credentials are used for private registries. Read at build time too: the build grants
     * `get` on exactly these Secrets (package.json pepr.env).
     */
    credentialsSecrets: z._default(z.array(dnsName), []),
    /**
     * Also use a pod's own imagePullSecrets (opt-in): needs `get secrets` in every namespace,
     * which the build grants only when this is on (package.json pepr.env).
     */
    workloadPullSecrets: z._default(z.boolean(), false),
    /**
     * Registry credentials from the controller's own cloud identity (IRSA or EKS Pod Identity for
     * ECR, GKE Workload Identity, Azure Workload Identity for ACR): an entry per provider and the
     * registry hosts it serves (docs/deploy.md, "Cloud registries").
     */
    cloudCredentials,
    /**
     * Hosts (host or host:port, as a registry reference writes them) image lookups may reach
     * even when they resolve to loopback, link-local or private addresses or images.blockedCidrs
     * (an in-cluster registry, its blob store). images.plainHttp hosts and the registries of
     * registries.allowed and registries.mirrors count as listed too; any other host is read
     * only at public addresses.
     */
    allowedHosts: z._default(z.array(hostAndPort), []),
    /**
     * More address ranges image lookups never reach (unless a host is listed): the cluster's
     * Service and Pod CIDRs when they are public addresses ("10.96.0.0/12" is private anyway).
     */
    blockedCidrs: z._default(z.array(cidr), []),
  }),
  {},
);

export type ImagesSettings = z.infer<typeof ImagesSettingsSchema>;

/** What image lookups read: the images section, and the registries an admin named elsewhere. */
export interface ImageLookupSettings {
  images: ImagesSettings;
  registries: { allowed: readonly string[]; mirrors: Readonly<Record<string, string>> };
  /** securityContext.workdirCopy (cacheDirs) "off" everywhere: a root image's WORKDIR (cache dirs) is not read. */
  securityContext?: { workdirCopy: string; cacheDirs?: string };
}
