// Loopback stand-ins for the clouds' credential services, speaking each one's real wire protocol
// (issue 43; what the module asks: lib/images/cloud/): STS AssumeRoleWithWebIdentity,
// the EKS Pod Identity agent, ECR GetAuthorizationToken (verifying the SigV4 signature with AWS's
// own signer, @smithy/signature-v4, against the session STS or the agent issued), the GKE metadata
// server, Entra ID's token endpoint, and ACR's /oauth2/exchange and /oauth2/token on the registry.
// Each issues tokens with the lifetime a test sets, records every call, and can deny, answer
// garbage or stall. `serve(registry)` makes a TestRegistry demand what the flow ends with,
// refusing an expired token as the real registries do.
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import { Hash } from "@smithy/hash-node";
import { SignatureV4 } from "@smithy/signature-v4";
import type { TestRegistry } from "./registry";

/** What a stand-in does with the next calls: answer, deny the identity, answer garbage, stall. */
export type Behaviour = "ok" | "deny" | "garbage" | "slow";

export interface Call {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  body: string;
}

/** Tokens issued with their expiry: what the next hop accepts, until then. */
export class TokenBook {
  private readonly expiry = new Map<string, number>();
  /** Tokens presented after their expiry (each refused). */
  expiredPresented = 0;

  constructor(private readonly prefix: string) {}

  /** A new token valid for `lifetimeSeconds` (its expiry as epoch ms). */
  issue(lifetimeSeconds: number): { token: string; expires: number } {
    const token = `${this.prefix}${randomBytes(18).toString("base64url")}`;
    const expires = Date.now() + lifetimeSeconds * 1000;
    this.expiry.set(token, expires);
    return { token, expires };
  }

  /** A token under the expiry the issuer gave for it (rounded as it told the client). */
  record(token: string, expires: number): void {
    this.expiry.set(token, expires);
  }

  get issued(): number {
    return this.expiry.size;
  }

  /** Every token issued (a log must carry none of them). */
  get tokens(): string[] {
    return [...this.expiry.keys()];
  }

  check(token: string | undefined): "valid" | "expired" | "unknown" {
    const expires = token === undefined ? undefined : this.expiry.get(token);
    if (expires === undefined) return "unknown";
    if (expires > Date.now()) return "valid";
    this.expiredPresented++;
    return "expired";
  }
}

const MAX_BODY = 64 * 1024;
const GARBAGE = "\u0000<<not what you asked for>>\u00ff{[";

/** A loopback HTTP server that records each call and answers as the behaviour says. */
abstract class StandIn {
  private server?: Server;
  private readonly stalled = new Set<ServerResponse>();
  port = 0;
  readonly calls: Call[] = [];
  behaviour: Behaviour = "ok";
  /** Lifetime of what it issues, in seconds. */
  lifetimeSeconds = 3600;
  /** The content type its real answers carry (garbage comes under it too). */
  protected abstract readonly contentType: string;

  get host(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** http://127.0.0.1:<port> */
  get url(): string {
    return `http://${this.host}`;
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => void this.receive(req, res));
    await new Promise<void>(ok => this.server!.listen(0, "127.0.0.1", ok));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  async stop(): Promise<void> {
    for (const res of this.stalled) res.destroy();
    this.server?.closeAllConnections();
    await new Promise<void>(ok => (this.server ? this.server.close(() => ok()) : ok()));
  }

  /** Calls to a path (all, by default). */
  count(path: RegExp = /./): number {
    return this.calls.filter(c => path.test(c.path)).length;
  }

  protected abstract answer(call: Call, res: ServerResponse): void;

  /** The headers a garbage or denied answer also carries (GKE's Metadata-Flavor). */
  protected headers(): Record<string, string> {
    return {};
  }

  private async receive(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const call = await readCall(req);
    this.calls.push(call);
    if (this.behaviour === "slow") {
      // Held until the client gives up or the stand-in stops.
      this.stalled.add(res);
      res.on("close", () => this.stalled.delete(res));
      return;
    }
    if (this.behaviour === "garbage") {
      res.writeHead(200, { ...this.headers(), "Content-Type": this.contentType });
      return void res.end(GARBAGE);
    }
    this.answer(call, res);
  }
}

async function readCall(req: IncomingMessage): Promise<Call> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size <= MAX_BODY) chunks.push(chunk);
  }
  const url = new URL(req.url ?? "/", "http://stand-in");
  return {
    method: req.method ?? "GET",
    path: url.pathname,
    query: url.searchParams,
    headers: req.headers,
    body: Buffer.concat(chunks).toString("utf8"),
  };
}

function json(
  res: ServerResponse,
  status: number,
  body: unknown,
  contentType = "application/json",
) {
  res.writeHead(status, { "Content-Type": contentType });
  res.end(JSON.stringify(body));
}

const basicOf = (
  header: string | undefined,
): { username: string; password: string } | undefined => {
  const match = /^Basic (.+)$/.exec(header ?? "");
  if (!match) return undefined;
  const decoded = Buffer.from(match[1], "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  return colon < 0
    ? undefined
    : { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
};
const bearerOf = (header: string | undefined) => /^Bearer (.+)$/.exec(header ?? "")?.[1];
const readToken = (file: string) => readFileSync(file, "utf8");
/** ISO-8601 to the second, as STS and the Pod Identity agent write an Expiration. */
const isoSeconds = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

// ---------------------------------------------------------------------------------------------
// AWS: the sessions STS and the Pod Identity agent issue, and ECR that takes them.

export interface AwsSession {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken: string;
  /** Epoch ms, as the Expiration told the client (to the second). */
  expires: number;
}

/** The temporary credentials issued (by STS or the agent), which ECR verifies signatures with. */
export class AwsSessions {
  private readonly byKey = new Map<string, AwsSession>();

  issue(lifetimeSeconds: number): AwsSession {
    const session = {
      accessKeyId: `ASIA${randomBytes(8).toString("hex").toUpperCase()}`,
      secretAccessKey: randomBytes(30).toString("base64"),
      sessionToken: `IQoJ${randomBytes(48).toString("base64")}`,
      // Truncated to the second, as the ISO Expiration says it.
      expires: Math.floor((Date.now() + lifetimeSeconds * 1000) / 1000) * 1000,
    };
    this.byKey.set(session.accessKeyId, session);
    return session;
  }

  get(accessKeyId: string): AwsSession | undefined {
    return this.byKey.get(accessKeyId);
  }

  get issued(): number {
    return this.byKey.size;
  }

  /** Every secret issued: secret keys and session tokens (a log must carry none of them). */
  get secrets(): string[] {
    return [...this.byKey.values()].flatMap(s => [s.secretAccessKey, s.sessionToken]);
  }
}

const STS_XMLNS = "https://sts.amazonaws.com/doc/2011-06-15/";

function stsError(res: ServerResponse, status: number, code: string, message: string): void {
  res.writeHead(status, { "Content-Type": "text/xml" });
  res.end(
    `<ErrorResponse xmlns="${STS_XMLNS}">\n  <Error>\n    <Type>Sender</Type>\n    <Code>${code}</Code>\n` +
      `    <Message>${message}</Message>\n  </Error>\n  <RequestId>${randomBytes(8).toString("hex")}</RequestId>\n</ErrorResponse>\n`,
  );
}

/**
 * STS AssumeRoleWithWebIdentity (IRSA): an unsigned form POST carrying the projected token, which
 * must be the token file's content at the time of the call (it rotates) and the role it names.
 */
export class StsStandIn extends StandIn {
  protected readonly contentType = "text/xml";

  constructor(
    readonly sessions: AwsSessions,
    readonly expected: { roleArn: string; tokenFile: string },
  ) {
    super();
  }

  protected answer(call: Call, res: ServerResponse): void {
    const form = new URLSearchParams(call.body);
    if (call.method !== "POST" || call.path !== "/")
      return stsError(res, 404, "UnknownOperation", "POST / only");
    if (!String(call.headers["content-type"]).startsWith("application/x-www-form-urlencoded"))
      return stsError(res, 400, "InvalidParameterValue", "the body must be a form");
    if (form.get("Action") !== "AssumeRoleWithWebIdentity" || form.get("Version") !== "2011-06-15")
      return stsError(res, 400, "InvalidAction", "Could not find operation for version");
    for (const name of ["RoleArn", "RoleSessionName", "WebIdentityToken"])
      if (!form.get(name))
        return stsError(res, 400, "MissingParameter", `The request must contain ${name}`);
    if (!/^[\w+=,.@-]{2,64}$/.test(form.get("RoleSessionName")!))
      return stsError(res, 400, "ValidationError", "RoleSessionName is not valid");
    if (form.get("WebIdentityToken") !== readToken(this.expected.tokenFile))
      return stsError(res, 400, "InvalidIdentityToken", "Couldn't retrieve verification key");
    if (this.behaviour === "deny" || form.get("RoleArn") !== this.expected.roleArn)
      return stsError(
        res,
        403,
        "AccessDenied",
        "Not authorized to perform sts:AssumeRoleWithWebIdentity",
      );
    const s = this.sessions.issue(this.lifetimeSeconds);
    res.writeHead(200, { "Content-Type": "text/xml" });
    // Elements in the order STS writes them (Credentials' AccessKeyId last).
    res.end(
      `<AssumeRoleWithWebIdentityResponse xmlns="${STS_XMLNS}">
  <AssumeRoleWithWebIdentityResult>
    <Audience>sts.amazonaws.com</Audience>
    <AssumedRoleUser>
      <AssumedRoleId>AROA3XFRBF535PLBIFPI4:${form.get("RoleSessionName")}</AssumedRoleId>
      <Arn>${this.expected.roleArn.replace(":iam::", ":sts::").replace(":role/", ":assumed-role/")}/${form.get("RoleSessionName")}</Arn>
    </AssumedRoleUser>
    <Provider>arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/EXAMPLE</Provider>
    <Credentials>
      <SessionToken>${s.sessionToken}</SessionToken>
      <SecretAccessKey>${s.secretAccessKey}</SecretAccessKey>
      <Expiration>${isoSeconds(s.expires)}</Expiration>
      <AccessKeyId>${s.accessKeyId}</AccessKeyId>
    </Credentials>
    <SubjectFromWebIdentityToken>system:serviceaccount:pepr-system:admission-guard</SubjectFromWebIdentityToken>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata>
    <RequestId>${randomBytes(8).toString("hex")}</RequestId>
  </ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>
`,
    );
  }
}

/**
 * The EKS Pod Identity agent (AWS_CONTAINER_CREDENTIALS_FULL_URI): a GET whose Authorization is
 * the token file's content, answered with the container-credentials JSON.
 */
export class PodIdentityStandIn extends StandIn {
  protected readonly contentType = "application/json";

  constructor(
    readonly sessions: AwsSessions,
    readonly expected: { tokenFile: string },
  ) {
    super();
  }

  protected answer(call: Call, res: ServerResponse): void {
    if (call.method !== "GET") return json(res, 405, { message: "GET only" });
    const authorization = call.headers.authorization;
    if (!authorization) return json(res, 400, { message: "Authorization header is missing" });
    if (authorization !== readToken(this.expected.tokenFile))
      return json(res, 401, { message: "Service account token cannot be empty or is invalid" });
    if (this.behaviour === "deny")
      return json(res, 403, {
        code: "AccessDeniedException",
        message: "No Pod Identity Association for this service account",
      });
    const s = this.sessions.issue(this.lifetimeSeconds);
    json(res, 200, {
      AccessKeyId: s.accessKeyId,
      SecretAccessKey: s.secretAccessKey,
      Token: s.sessionToken,
      AccountId: "123456789012",
      Expiration: isoSeconds(s.expires),
    });
  }
}

const ECR_TARGET = "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken";
const ECR_JSON = "application/x-amz-json-1.1";
/** How far a signature's X-Amz-Date may be from now (AWS allows 5 minutes). */
const SKEW_MS = 5 * 60_000;

const ecrError = (res: ServerResponse, status: number, type: string, message: string) =>
  json(res, status, { __type: type, message }, ECR_JSON);

/**
 * ECR GetAuthorizationToken: its JSON-1.1 POST, SigV4-signed with a session the stand-in STS or
 * agent issued, verified by recomputing the signature with AWS's own signer; answered with a
 * base64 `AWS:<password>` that `serve(registry)` makes the registry demand as Basic.
 */
export class EcrStandIn extends StandIn {
  protected readonly contentType = ECR_JSON;
  readonly passwords = new TokenBook("ecr-");
  /** Why each refused signature was refused (for a test's message). */
  readonly refusals: string[] = [];
  private registryHost = "";

  constructor(
    readonly sessions: AwsSessions,
    readonly region: string,
  ) {
    super();
  }

  /** Makes the registry demand `Basic AWS:<password>` as ECR does, an expired one refused. */
  serve(registry: TestRegistry): void {
    this.registryHost = registry.host;
    registry.demand = {
      challenge: () => `Basic realm="https://${registry.host}/",service="ecr.amazonaws.com"`,
      accepts: authorization => {
        const basic = basicOf(authorization);
        return basic?.username === "AWS" && this.passwords.check(basic.password) === "valid";
      },
    };
  }

  protected async answerSigned(call: Call, res: ServerResponse): Promise<void> {
    const refused = (status: number, type: string, message: string) => {
      this.refusals.push(`${type}: ${message}`);
      ecrError(res, status, type, message);
    };
    if (call.method !== "POST" || call.path !== "/")
      return refused(404, "UnknownOperationException", "POST / only");
    if (call.headers["content-type"] !== ECR_JSON)
      return refused(400, "SerializationException", `Content-Type must be ${ECR_JSON}`);
    if (call.headers["x-amz-target"] !== ECR_TARGET)
      return refused(400, "UnknownOperationException", "X-Amz-Target is not GetAuthorizationToken");
    let body: unknown;
    try {
      body = JSON.parse(call.body);
    } catch {
      return refused(400, "SerializationException", "the body is not JSON");
    }
    if (!body || typeof body !== "object" || Array.isArray(body))
      return refused(400, "SerializationException", "the body is not a JSON object");

    const auth =
      /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/.exec(
        String(call.headers.authorization ?? ""),
      );
    if (!auth)
      return refused(403, "MissingAuthenticationTokenException", "no SigV4 Authorization header");
    const [, accessKeyId, day, region, service, signedHeaders] = auth;
    const amzDate = String(call.headers["x-amz-date"] ?? "");
    const date = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amzDate);
    if (!date) return refused(400, "IncompleteSignatureException", "X-Amz-Date is missing");
    const signingDate = new Date(
      Date.UTC(+date[1], +date[2] - 1, +date[3], +date[4], +date[5], +date[6]),
    );
    if (Math.abs(signingDate.getTime() - Date.now()) > SKEW_MS)
      return refused(403, "InvalidSignatureException", "Signature expired");
    if (day !== amzDate.slice(0, 8) || region !== this.region || service !== "ecr")
      return refused(
        403,
        "InvalidSignatureException",
        `Credential should be scoped to a valid region and service ecr, not ${region}/${service}`,
      );
    const session = this.sessions.get(accessKeyId);
    if (!session || call.headers["x-amz-security-token"] !== session.sessionToken)
      return refused(
        403,
        "UnrecognizedClientException",
        "The security token included in the request is invalid.",
      );
    if (session.expires <= Date.now())
      return refused(
        403,
        "ExpiredTokenException",
        "The security token included in the request is expired",
      );

    // The signature AWS's signer computes over the headers the client says it signed.
    const headers: Record<string, string> = {};
    for (const name of signedHeaders.split(";")) {
      const value = call.headers[name];
      if (value === undefined)
        return refused(403, "InvalidSignatureException", `signed header ${name} is missing`);
      headers[name] = Array.isArray(value) ? value.join(",") : value;
    }
    const signer = new SignatureV4({
      credentials: {
        accessKeyId: session.accessKeyId,
        secretAccessKey: session.secretAccessKey,
        sessionToken: session.sessionToken,
      },
      region: this.region,
      service: "ecr",
      sha256: Hash.bind(null, "sha256"),
      applyChecksum: false,
    });
    const signed = await signer.sign(
      {
        method: call.method,
        protocol: "http:",
        hostname: "127.0.0.1",
        port: this.port,
        path: call.path,
        query: Object.fromEntries(call.query),
        headers,
        body: call.body,
      },
      { signingDate },
    );
    if (signed.headers.authorization !== call.headers.authorization)
      return refused(
        403,
        "InvalidSignatureException",
        "The request signature we calculated does not match the signature you provided.",
      );

    if (this.behaviour === "deny")
      return ecrError(
        res,
        400,
        "AccessDeniedException",
        `User: arn:aws:sts::123456789012:assumed-role/admission-guard/admission-guard is not authorized to perform: ecr:GetAuthorizationToken on resource: * because no identity-based policy allows the ecr:GetAuthorizationToken action`,
      );
    const { token: password } = this.passwords.issue(this.lifetimeSeconds);
    // Epoch seconds with a fraction, as ECR writes them; the registry refuses the password after it.
    const expiresAt = (Date.now() + this.lifetimeSeconds * 1000) / 1000;
    this.passwords.record(password, expiresAt * 1000);
    json(
      res,
      200,
      {
        authorizationData: [
          {
            authorizationToken: Buffer.from(`AWS:${password}`).toString("base64"),
            expiresAt,
            proxyEndpoint: `https://${this.registryHost}`,
          },
        ],
      },
      ECR_JSON,
    );
  }

  protected answer(call: Call, res: ServerResponse): void {
    void this.answerSigned(call, res).catch(e =>
      ecrError(res, 500, "ServerException", String((e as Error).message)),
    );
  }
}

// ---------------------------------------------------------------------------------------------
// Google: the GKE metadata server, and Artifact Registry's token realm.

const METADATA_TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token";

/**
 * The GKE metadata server's token endpoint (Workload Identity): `Metadata-Flavor: Google` asked
 * and answered. `serve(registry)` makes the registry run Artifact Registry's Bearer flow, its
 * realm taking `oauth2accesstoken:<access token>` as Basic.
 */
export class GkeMetadataStandIn extends StandIn {
  protected readonly contentType = "application/json";
  readonly accessTokens = new TokenBook("ya29.");
  /** False: answers without `Metadata-Flavor: Google`, as something else on that address would. */
  answersFlavor = true;

  protected headers(): Record<string, string> {
    return this.answersFlavor ? { "Metadata-Flavor": "Google" } : {};
  }

  protected answer(call: Call, res: ServerResponse): void {
    const text = (status: number, body: string) => {
      res.writeHead(status, { ...this.headers(), "Content-Type": "text/html" });
      res.end(body);
    };
    if (call.path !== METADATA_TOKEN_PATH) return text(404, "Not Found");
    if (call.headers["metadata-flavor"] !== "Google")
      return text(403, "Missing required header: Metadata-Flavor");
    if (call.headers["x-forwarded-for"]) return text(403, "Request had an X-Forwarded-For header");
    if (this.behaviour === "deny")
      return text(
        403,
        "Unable to generate access token; IAM returned 403 Forbidden: Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist).",
      );
    const { token } = this.accessTokens.issue(this.lifetimeSeconds);
    res.writeHead(200, { ...this.headers(), "Content-Type": "application/json" });
    res.end(
      JSON.stringify({
        access_token: token,
        expires_in: this.lifetimeSeconds,
        token_type: "Bearer",
      }),
    );
  }

  /** Artifact Registry's Bearer flow on the registry: realm /v2/token, Basic with the access token. */
  serve(registry: TestRegistry): void {
    const registryTokens = new TokenBook("ar-");
    registry.overrides.push({
      path: /^\/v2\/token$/,
      handle: (req, res) => {
        const basic = basicOf(req.headers.authorization);
        if (
          basic?.username !== "oauth2accesstoken" ||
          this.accessTokens.check(basic.password) !== "valid"
        ) {
          res.writeHead(401, { "Content-Type": "application/json" });
          return void res.end(JSON.stringify({ errors: [{ code: "UNAUTHORIZED" }] }));
        }
        const { token } = registryTokens.issue(this.lifetimeSeconds);
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(JSON.stringify({ token, expires_in: this.lifetimeSeconds }));
      },
    });
    registry.demand = {
      challenge: () => `Bearer realm="http://${registry.host}/v2/token",service="${registry.host}"`,
      accepts: authorization => registryTokens.check(bearerOf(authorization)) === "valid",
    };
  }
}

// ---------------------------------------------------------------------------------------------
// Azure: Entra ID's token endpoint, and ACR's exchange and token realm on the registry.

const ACR_USER = "00000000-0000-0000-0000-000000000000";
const JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");

/**
 * Entra ID's v2.0 token endpoint (Azure Workload Identity): a client-credentials form whose
 * client_assertion is the federated token file's content, for the tenant and client expected.
 * `serve(registry)` makes the registry run ACR's exchange and Bearer flow.
 */
export class EntraStandIn extends StandIn {
  protected readonly contentType = "application/json";
  readonly accessTokens = new TokenBook("aad-");
  /** The `exp` of the refresh tokens ACR's exchange issues, from now (ACR's: 3 h). */
  refreshLifetimeSeconds = 3 * 3600;

  constructor(readonly expected: { tenantId: string; clientId: string; tokenFile: string }) {
    super();
  }

  protected answer(call: Call, res: ServerResponse): void {
    const form = new URLSearchParams(call.body);
    const error = (status: number, code: string, description: string) =>
      json(res, status, { error: code, error_description: description, error_codes: [] });
    const tenant = /^\/([^/]+)\/oauth2\/v2\.0\/token$/.exec(call.path)?.[1];
    if (call.method !== "POST" || !tenant)
      return error(404, "not_found", "POST /{tenant}/oauth2/v2.0/token");
    if (tenant !== this.expected.tenantId)
      return error(400, "invalid_tenant", `AADSTS90002: Tenant '${tenant}' not found.`);
    if (form.get("grant_type") !== "client_credentials")
      return error(
        400,
        "unsupported_grant_type",
        "AADSTS70003: grant_type must be client_credentials",
      );
    if (form.get("scope") !== "https://management.azure.com/.default")
      return error(400, "invalid_scope", "AADSTS70011: The provided scope is not valid.");
    if (form.get("client_id") !== this.expected.clientId)
      return error(
        400,
        "unauthorized_client",
        "AADSTS700016: Application not found in the directory.",
      );
    if (
      form.get("client_assertion_type") !== JWT_BEARER ||
      form.get("client_assertion") !== readToken(this.expected.tokenFile)
    )
      return error(
        401,
        "invalid_client",
        "AADSTS700024: Client assertion is not within its valid time range.",
      );
    if (this.behaviour === "deny")
      return error(
        401,
        "invalid_client",
        "AADSTS700213: No matching federated identity record found for presented assertion subject.",
      );
    const { token } = this.accessTokens.issue(this.lifetimeSeconds);
    json(res, 200, {
      token_type: "Bearer",
      expires_in: this.lifetimeSeconds,
      ext_expires_in: this.lifetimeSeconds,
      access_token: token,
    });
  }

  /**
   * ACR on the registry: POST /oauth2/exchange (an Entra token of this tenant → a refresh-token
   * JWT whose `exp` is refreshLifetimeSeconds away), GET /oauth2/token (Basic with the refresh
   * token → an access token), and every /v2/ call Bearer with that access token.
   */
  serve(registry: TestRegistry): AcrRegistry {
    const registryTokens = new TokenBook("acr-");
    const counts: AcrRegistry = {
      exchanges: 0,
      tokens: 0,
      refusedExchanges: 0,
      refreshTokens: new TokenBook(""),
    };
    const { refreshTokens } = counts;
    const denied = (res: ServerResponse, status: number, message: string) => {
      res.writeHead(status, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ errors: [{ code: "UNAUTHORIZED", message }] }));
    };
    registry.overrides.push({
      path: /^\/oauth2\/exchange$/,
      handle: (req, res) => {
        void readCall(req).then(call => {
          counts.exchanges++;
          const form = new URLSearchParams(call.body);
          if (
            call.method !== "POST" ||
            !String(call.headers["content-type"]).startsWith("application/x-www-form-urlencoded") ||
            form.get("grant_type") !== "access_token" ||
            form.get("service") !== registry.host ||
            form.get("tenant") !== this.expected.tenantId ||
            this.accessTokens.check(form.get("access_token") ?? undefined) !== "valid"
          ) {
            counts.refusedExchanges++;
            return denied(res, 401, "the access token is not valid for this registry");
          }
          const now = Math.floor(Date.now() / 1000);
          const exp = now + this.refreshLifetimeSeconds;
          const refresh = `${b64url({ alg: "RS256", typ: "JWT", kid: "TEST" })}.${b64url({
            jti: randomBytes(8).toString("hex"),
            sub: `${this.expected.clientId}`,
            nbf: now,
            exp,
            iat: now,
            iss: "Azure Container Registry",
            aud: registry.host,
            version: "1.0",
            grant_type: "refresh_token",
            tenant: this.expected.tenantId,
          })}.${randomBytes(32).toString("base64url")}`;
          refreshTokens.record(refresh, exp * 1000);
          res.writeHead(200, { "Content-Type": "application/json" });
          res.end(JSON.stringify({ refresh_token: refresh }));
        });
      },
    });
    registry.overrides.push({
      path: /^\/oauth2\/token$/,
      handle: (req, res) => {
        counts.tokens++;
        const basic = basicOf(req.headers.authorization);
        if (basic?.username !== ACR_USER || refreshTokens.check(basic.password) !== "valid")
          return void denied(res, 401, "the refresh token is not valid");
        const { token } = registryTokens.issue(300);
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(JSON.stringify({ access_token: token }));
      },
    });
    registry.demand = {
      challenge: () =>
        `Bearer realm="http://${registry.host}/oauth2/token",service="${registry.host}"`,
      accepts: authorization => registryTokens.check(bearerOf(authorization)) === "valid",
    };
    return counts;
  }
}

/** What ACR's endpoints on a registry saw. */
export interface AcrRegistry {
  /** POSTs to /oauth2/exchange, and those refused. */
  exchanges: number;
  refusedExchanges: number;
  /** GETs of /oauth2/token. */
  tokens: number;
  /** The refresh tokens the exchange issued (`expiredPresented`: those refused as expired). */
  refreshTokens: TokenBook;
}
