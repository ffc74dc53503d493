// images.cloudCredentials: registry credentials from the controller's own cloud identity, an entry
// per provider and registries, as the kubelet's CredentialProviderConfig gives each provider its
// matchImages. Why: docs/adr/0039-registry-credentials-from-the-cloud-identity.md
import * as z from "zod/mini";
import "../../objects/zod-messages";
import { hasWildcard, registryPatternProblem } from "./registry-pattern";

const registryPattern = z.string().check(
  z.superRefine((pattern, ctx) => {
    const problem = registryPatternProblem(pattern);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  }),
);
const registries = z.array(registryPattern).check(z.minLength(1), z.maxLength(32));
/** An endpoint an admin names: http(s), no credentials or query in it. */
const endpoint = z.string().check(
  z.maxLength(512),
  z.refine(url => {
    try {
      const u = new URL(url);
      return (
        (u.protocol === "https:" || u.protocol === "http:") &&
        !u.username &&
        !u.password &&
        !u.search &&
        !u.hash
      );
    } catch {
      return false;
    }
  }, "must be an http(s) URL without credentials, query or fragment"),
);
const filePath = z.string().check(z.regex(/^\//, "must be an absolute path"), z.maxLength(1024));
const region = z
  .string()
  .check(z.regex(/^[a-z]{2}(-[a-z0-9]+){1,4}$/, "must be an AWS region such as us-east-1"));

const EcrEntry = z.strictObject({
  provider: z.literal("ecr"),
  /** Registry hosts this entry serves ("*.dkr.ecr.us-east-1.amazonaws.com"). */
  registries,
  /** The region whose STS and ECR the module asks (its registries' region). */
  region,
  /**
   * How the controller proves who it is: "web-identity" (IRSA: AWS_ROLE_ARN and
   * AWS_WEB_IDENTITY_TOKEN_FILE), "pod-identity" (EKS Pod Identity: AWS_CONTAINER_CREDENTIALS_FULL_URI
   * and AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE), or "auto": whichever the environment holds.
   */
  identity: z._default(z.enum(["auto", "web-identity", "pod-identity"]), "auto"),
  /** The role to assume (default: $AWS_ROLE_ARN). */
  roleArn: z.optional(
    z
      .string()
      .check(
        z.regex(/^arn:aws[a-z-]*:iam::\d{12}:role\/[\w+=,.@/-]{1,512}$/, "must be an IAM role ARN"),
      ),
  ),
  /** The projected token (default: $AWS_WEB_IDENTITY_TOKEN_FILE or $AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE). */
  tokenFile: z.optional(filePath),
  /** Default https://sts.<region>.amazonaws.com. */
  stsEndpoint: z.optional(endpoint),
  /** Default https://api.ecr.<region>.amazonaws.com. */
  ecrEndpoint: z.optional(endpoint),
  /** Default $AWS_CONTAINER_CREDENTIALS_FULL_URI (the Pod Identity agent, http://169.254.170.23/v1/credentials). */
  podIdentityEndpoint: z.optional(endpoint),
});

const GcpEntry = z.strictObject({
  provider: z.literal("gcp"),
  /** Registry hosts this entry serves ("*-docker.pkg.dev", "gcr.io", "*.gcr.io"). */
  registries,
  /** The metadata server (default http://169.254.169.254, which metadata.google.internal names). */
  metadataEndpoint: z.optional(endpoint),
});

const AcrEntry = z.strictObject({
  provider: z.literal("acr"),
  /**
   * The registries, each named exactly ("myreg.azurecr.io"): each gets an Entra ID token to exchange,
   * and anyone can create a registry under azurecr.io.
   */
  registries: registries.check(
    z.refine(
      list => !list.some(hasWildcard),
      "must name each registry exactly (no *): every registry a pattern matches would be sent the controller's Entra ID token",
    ),
  ),
  /** Default $AZURE_TENANT_ID. */
  tenantId: z.optional(z.string().check(z.regex(/^[0-9a-zA-Z.-]{1,64}$/, "must be a tenant ID"))),
  /** Default $AZURE_CLIENT_ID. */
  clientId: z.optional(z.string().check(z.regex(/^[0-9a-zA-Z-]{1,64}$/, "must be a client ID"))),
  /** Default $AZURE_FEDERATED_TOKEN_FILE. */
  tokenFile: z.optional(filePath),
  /** Default $AZURE_AUTHORITY_HOST, else https://login.microsoftonline.com/. */
  authorityHost: z.optional(endpoint),
});

export const CloudCredentialEntry = z.discriminatedUnion("provider", [
  EcrEntry,
  GcpEntry,
  AcrEntry,
]);
export type CloudCredentialEntry = z.infer<typeof CloudCredentialEntry>;
export type EcrEntry = z.infer<typeof EcrEntry>;
export type GcpEntry = z.infer<typeof GcpEntry>;
export type AcrEntry = z.infer<typeof AcrEntry>;

/**
 * Registry credentials from the controller's cloud identity: an entry per provider ("ecr", "gcp",
 * "acr") and the registry hosts it serves.
 */
export const cloudCredentials = z._default(
  z.array(CloudCredentialEntry).check(z.maxLength(16)),
  [],
);
