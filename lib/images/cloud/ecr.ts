// ECR: the controller's AWS identity (IRSA's web identity through STS, or the EKS Pod Identity
// agent), then ECR's GetAuthorizationToken signed with SigV4 (aws4), whose token the registry takes
// as Basic AWS:<password>. Why: docs/adr/0039-registry-credentials-from-the-cloud-identity.md
import aws4 from "aws4";
import type { EcrEntry } from "./settings";
import {
  call,
  CredentialError,
  denied,
  endpointUrl,
  expiryFrom,
  jsonCall,
  readTokenFile,
  stringField,
  type CloudEnv,
  type FetchContext,
  type Obtained,
} from "./common";

/** How the controller proves who it is to AWS, from its entry and environment. */
export type AwsIdentity =
  | { kind: "web-identity"; roleArn: string; tokenFile: string; sts: string }
  | { kind: "pod-identity"; endpoint: string; tokenFile?: string };

interface AwsSession {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken: string;
  expiresAt: number;
}

/**
 * The identity an entry uses: "auto" takes web identity (a role and its token file) first, as the
 * AWS SDKs' default chain does, else Pod Identity's agent. Throws what is missing.
 */
export function awsIdentity(entry: EcrEntry, env: CloudEnv): AwsIdentity {
  const roleArn = entry.roleArn ?? env.AWS_ROLE_ARN;
  const webToken = entry.tokenFile ?? env.AWS_WEB_IDENTITY_TOKEN_FILE;
  const agent = entry.podIdentityEndpoint ?? env.AWS_CONTAINER_CREDENTIALS_FULL_URI;
  const web =
    entry.identity === "web-identity" || (entry.identity === "auto" && roleArn && webToken);
  if (web) {
    if (!roleArn || !webToken)
      throw new CredentialError(
        "web identity needs a role (roleArn or $AWS_ROLE_ARN) and a token file (tokenFile or $AWS_WEB_IDENTITY_TOKEN_FILE)",
      );
    const sts = endpointUrl(
      entry.stsEndpoint ?? `https://sts.${entry.region}.amazonaws.com`,
      "STS",
    );
    return { kind: "web-identity", roleArn, tokenFile: webToken, sts };
  }
  if (!agent)
    throw new CredentialError(
      entry.identity === "pod-identity"
        ? "Pod Identity needs the agent's URL (podIdentityEndpoint or $AWS_CONTAINER_CREDENTIALS_FULL_URI)"
        : "no AWS identity: neither $AWS_ROLE_ARN with $AWS_WEB_IDENTITY_TOKEN_FILE (IRSA) nor $AWS_CONTAINER_CREDENTIALS_FULL_URI (EKS Pod Identity) is set",
    );
  return {
    kind: "pod-identity",
    endpoint: endpointUrl(agent, "Pod Identity"),
    tokenFile: entry.tokenFile ?? env.AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE,
  };
}

const ecrEndpoint = (entry: EcrEntry) =>
  endpointUrl(entry.ecrEndpoint ?? `https://api.ecr.${entry.region}.amazonaws.com`, "ECR");

/** The hosts an entry's fetch reaches (its credential egress policy lists exactly these). */
export function ecrEndpoints(entry: EcrEntry, env: CloudEnv): string[] {
  const identity = awsIdentity(entry, env);
  return [identity.kind === "web-identity" ? identity.sts : identity.endpoint, ecrEndpoint(entry)];
}

/** One ECR token for the entry: the identity's session, then GetAuthorizationToken. */
export async function fetchEcr(entry: EcrEntry, ctx: FetchContext): Promise<Obtained> {
  const identity = awsIdentity(entry, ctx.env);
  const session =
    identity.kind === "web-identity"
      ? await assumeRoleWithWebIdentity(identity, ctx)
      : await podIdentitySession(identity, ctx);
  const url = ecrEndpoint(entry);
  const target = new URL(`${url}/`);
  const body = "{}";
  const signed = aws4.sign(
    {
      host: target.host,
      path: target.pathname,
      method: "POST",
      service: "ecr",
      region: entry.region,
      headers: {
        "Content-Type": "application/x-amz-json-1.1",
        "X-Amz-Target": "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken",
      },
      body,
    },
    session,
  );
  const headers = Object.fromEntries(
    Object.entries(signed.headers ?? {}).map(([k, v]) => [k, String(v)]),
  );
  const what = "ECR GetAuthorizationToken";
  const data = (
    await jsonCall(ctx, target.toString(), { method: "POST", headers, body }, what, "__type")
  ).body.authorizationData;
  const first: unknown = Array.isArray(data) ? data[0] : undefined;
  if (!first || typeof first !== "object")
    throw new CredentialError(`${what} gave no authorizationData`);
  const entryData = first as Record<string, unknown>;
  const decoded = Buffer.from(
    stringField(entryData, "authorizationToken", what),
    "base64",
  ).toString("utf8");
  const colon = decoded.indexOf(":");
  if (colon < 1 || colon === decoded.length - 1)
    throw new CredentialError(`${what}'s authorizationToken is not user:password`);
  const expiresAt = entryData.expiresAt;
  if (typeof expiresAt !== "number") throw new CredentialError(`${what} gave no expiresAt number`);
  const now = ctx.now();
  return {
    credentials: {
      username: decoded.slice(0, colon),
      password: decoded.slice(colon + 1),
      sameHostOnly: true,
    },
    // The ECR token lives no longer than the session that asked for it.
    expiresAt: Math.min(
      expiryFrom(expiresAt * 1000, now, what),
      expiryFrom(session.expiresAt, now, "the AWS session"),
    ),
  };
}

/** STS AssumeRoleWithWebIdentity: the projected token for a role's session (unsigned). */
async function assumeRoleWithWebIdentity(
  identity: Extract<AwsIdentity, { kind: "web-identity" }>,
  ctx: FetchContext,
): Promise<AwsSession> {
  const token = await readTokenFile(identity.tokenFile, "web identity");
  const body = new URLSearchParams({
    Action: "AssumeRoleWithWebIdentity",
    Version: "2011-06-15",
    RoleArn: identity.roleArn,
    RoleSessionName: "admission-guard",
    WebIdentityToken: token,
  }).toString();
  const what = "STS AssumeRoleWithWebIdentity";
  const answer = await call(
    ctx,
    `${identity.sts}/`,
    {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body,
    },
    what,
  );
  const xml = answer.body.toString("utf8");
  if (answer.status !== 200) throw denied(what, answer, onlyElement(xml, "Code"));
  const credentials = onlyElement(xml, "Credentials");
  if (credentials === undefined)
    throw new CredentialError(`${what}'s answer has not exactly one Credentials`);
  const field = (name: string) => {
    const value = onlyElement(credentials, name);
    if (!value) throw new CredentialError(`${what}'s Credentials have not exactly one ${name}`);
    return value;
  };
  return {
    accessKeyId: field("AccessKeyId"),
    secretAccessKey: field("SecretAccessKey"),
    sessionToken: field("SessionToken"),
    expiresAt: Date.parse(field("Expiration")),
  };
}

/** EKS Pod Identity's agent: the session for the pod's association, its token file as proof. */
async function podIdentitySession(
  identity: Extract<AwsIdentity, { kind: "pod-identity" }>,
  ctx: FetchContext,
): Promise<AwsSession> {
  const headers: Record<string, string> = identity.tokenFile
    ? { Authorization: await readTokenFile(identity.tokenFile, "Pod Identity") }
    : {};
  const what = "the Pod Identity agent";
  const { body } = await jsonCall(ctx, identity.endpoint, { headers }, what);
  return {
    accessKeyId: stringField(body, "AccessKeyId", what),
    secretAccessKey: stringField(body, "SecretAccessKey", what),
    sessionToken: stringField(body, "Token", what),
    expiresAt: Date.parse(stringField(body, "Expiration", what)),
  };
}

/**
 * The text of the one `<name>` element in a bounded XML answer, entities decoded; undefined when
 * there is none or more than one (an answer naming two sets of credentials is not trusted).
 * indexOf, not a regular expression: linear in the answer whatever it holds.
 */
export function onlyElement(xml: string, name: string): string | undefined {
  const open = `<${name}>`;
  const close = `</${name}>`;
  const start = xml.indexOf(open);
  if (start === -1 || xml.indexOf(open, start + 1) !== -1) return undefined;
  const end = xml.indexOf(close, start + open.length);
  if (end === -1) return undefined;
  return xml
    .slice(start + open.length, end)
    .trim()
    .replace(/&(lt|gt|quot|apos|amp);/g, (_, e: string) =>
      e === "lt" ? "<" : e === "gt" ? ">" : e === "quot" ? '"' : e === "apos" ? "'" : "&",
    );
}
