// The cloud stand-ins refuse what the real services refuse (the e2e tests, test/e2e/
// cloud-credentials.test.ts, prove only that they accept the module's calls): ECR recomputes the
// SigV4 signature with AWS's own signer and refuses one aws4 made with another secret, over another
// body or region, or with an expired session; STS and Entra check the projected token they are
// given; the metadata server wants Metadata-Flavor; a registry refuses an expired token.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import aws4 from "aws4";
import {
  AwsSessions,
  type AcrRegistry,
  EcrStandIn,
  EntraStandIn,
  GkeMetadataStandIn,
  StsStandIn,
  type AwsSession,
} from "../../support/cloud-stand-ins";
import { TestRegistry } from "../../support/registry";

const dir = mkdtempSync(join(tmpdir(), "cloud-stand-ins-"));
const tokenFile = join(dir, "token");
const ROLE = "arn:aws:iam::123456789012:role/admission-guard";
const sessions = new AwsSessions();
const sts = new StsStandIn(sessions, { roleArn: ROLE, tokenFile });
const ecr = new EcrStandIn(sessions, "us-east-1");
const gke = new GkeMetadataStandIn();
const entra = new EntraStandIn({ tenantId: "tenant-1", clientId: "client-1", tokenFile });
const ecrRegistry = new TestRegistry();
const arRegistry = new TestRegistry();
const acrRegistry = new TestRegistry();
let acr: AcrRegistry;

const servers = [sts, ecr, gke, entra, ecrRegistry, arRegistry, acrRegistry];

beforeAll(async () => {
  writeFileSync(tokenFile, "projected-token-1");
  await Promise.all(servers.map(s => s.start()));
  ecr.serve(ecrRegistry);
  gke.serve(arRegistry);
  acr = entra.serve(acrRegistry);
});
afterAll(async () => {
  await Promise.all(servers.map(s => s.stop()));
});

const form = (fields: Record<string, string>) => ({
  method: "POST",
  headers: { "Content-Type": "application/x-www-form-urlencoded" },
  body: new URLSearchParams(fields).toString(),
});
const entraToken = (tenant: string, fields: Record<string, string> = {}) =>
  fetch(
    `${entra.url}/${tenant}/oauth2/v2.0/token`,
    form({
      client_id: "client-1",
      grant_type: "client_credentials",
      client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
      client_assertion: "projected-token-1",
      scope: "https://management.azure.com/.default",
      ...fields,
    }),
  );
const assume = (token: string, roleArn = ROLE) =>
  fetch(
    `${sts.url}/`,
    form({
      Action: "AssumeRoleWithWebIdentity",
      Version: "2011-06-15",
      RoleArn: roleArn,
      RoleSessionName: "admission-guard",
      WebIdentityToken: token,
    }),
  );

async function session(): Promise<AwsSession> {
  const res = await assume("projected-token-1");
  expect(res.status).toBe(200);
  const xml = await res.text();
  const field = (name: string) => new RegExp(`<${name}>([^<]+)</${name}>`).exec(xml)![1];
  return {
    accessKeyId: field("AccessKeyId"),
    secretAccessKey: field("SecretAccessKey"),
    sessionToken: field("SessionToken"),
    expires: Date.parse(field("Expiration")),
  };
}

/** GetAuthorizationToken as the module sends it, signed by aws4; `tamper` changes it after. */
async function getAuthorizationToken(
  s: Pick<AwsSession, "accessKeyId" | "secretAccessKey" | "sessionToken">,
  { region = "us-east-1", tamper }: { region?: string; tamper?: (r: aws4.Request) => void } = {},
) {
  const request: aws4.Request = {
    host: ecr.host,
    path: "/",
    method: "POST",
    service: "ecr",
    region,
    headers: {
      "Content-Type": "application/x-amz-json-1.1",
      "X-Amz-Target": "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken",
    },
    body: "{}",
  };
  aws4.sign(request, s);
  tamper?.(request);
  const res = await fetch(`${ecr.url}/`, {
    method: "POST",
    headers: request.headers as Record<string, string>,
    body: request.body as string,
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> }; // eslint-disable-line @typescript-eslint/no-explicit-any
}

test("STS takes the token file's current content and the role, and issues a session", async () => {
  expect((await session()).accessKeyId).toMatch(/^ASIA/);
  const wrongToken = await assume("someone-elses-token");
  expect(wrongToken.status).toBe(400);
  expect(await wrongToken.text()).toContain("<Code>InvalidIdentityToken</Code>");
  const wrongRole = await assume("projected-token-1", "arn:aws:iam::123456789012:role/other");
  expect(wrongRole.status).toBe(403);
  expect(await wrongRole.text()).toContain("<Code>AccessDenied</Code>");
  // The file rotated: the old token is refused, the new one taken.
  writeFileSync(tokenFile, "projected-token-2");
  expect((await assume("projected-token-1")).status).toBe(400);
  expect((await assume("projected-token-2")).status).toBe(200);
  writeFileSync(tokenFile, "projected-token-1");
});

test("ECR verifies aws4's signature with AWS's signer; its password opens the registry, Basic", async () => {
  const s = await session();
  const ok = await getAuthorizationToken(s);
  expect(ok.status).toBe(200);
  const [data] = ok.body.authorizationData;
  expect(typeof data.expiresAt).toBe("number");
  const basic = `Basic ${data.authorizationToken}`;
  expect(Buffer.from(data.authorizationToken, "base64").toString()).toMatch(/^AWS:/);
  expect((await fetch(`http://${ecrRegistry.host}/v2/`)).status).toBe(401);
  const challenge = (await fetch(`http://${ecrRegistry.host}/v2/`)).headers.get("www-authenticate");
  expect(challenge).toBe(`Basic realm="https://${ecrRegistry.host}/",service="ecr.amazonaws.com"`);
  expect(
    (await fetch(`http://${ecrRegistry.host}/v2/`, { headers: { Authorization: basic } })).status,
  ).toBe(200);
});

test.each([
  [
    "another secret",
    { secret: "not-the-secret" },
    "InvalidSignatureException: The request signature we calculated",
  ],
  [
    "a body changed after signing",
    {
      tamper: (r: aws4.Request) => {
        r.body = '{"registryIds":["1"]}';
        r.headers!["Content-Length"] = Buffer.byteLength(r.body);
      },
    },
    "InvalidSignatureException: The request signature we calculated",
  ],
  ["another region's scope", { region: "eu-west-1" }, "InvalidSignatureException: Credential"],
  [
    "no session token",
    { tamper: (r: aws4.Request) => void delete r.headers!["X-Amz-Security-Token"] },
    "UnrecognizedClientException",
  ],
])("ECR refuses a signature made with %s", async (_what, how, refusal) => {
  const s = await session();
  const { secret, ...rest } = how as { secret?: string; region?: string };
  const answer = await getAuthorizationToken(
    { ...s, secretAccessKey: secret ?? s.secretAccessKey },
    rest,
  );
  expect(answer.status).toBe(403);
  expect(ecr.refusals.at(-1)).toContain(refusal);
});

test("ECR refuses an expired session; the registry an expired password", async () => {
  const expired = sessions.issue(0);
  expect((await getAuthorizationToken(expired)).body.__type).toBe("ExpiredTokenException");
  ecr.lifetimeSeconds = 0;
  const answer = await getAuthorizationToken(await session());
  ecr.lifetimeSeconds = 3600;
  const basic = `Basic ${answer.body.authorizationData[0].authorizationToken}`;
  const before = ecr.passwords.expiredPresented;
  expect(
    (await fetch(`http://${ecrRegistry.host}/v2/`, { headers: { Authorization: basic } })).status,
  ).toBe(401);
  expect(ecr.passwords.expiredPresented).toBe(before + 1);
});

test("the metadata server wants Metadata-Flavor and says it; Artifact Registry's realm takes its token", async () => {
  const url = `${gke.url}/computeMetadata/v1/instance/service-accounts/default/token`;
  expect((await fetch(url)).status).toBe(403);
  const res = await fetch(url, { headers: { "Metadata-Flavor": "Google" } });
  expect(res.headers.get("metadata-flavor")).toBe("Google");
  const { access_token: accessToken, token_type: type } = (await res.json()) as Record<
    string,
    string
  >;
  expect(type).toBe("Bearer");
  const challenge = (await fetch(`http://${arRegistry.host}/v2/`)).headers.get("www-authenticate");
  expect(challenge).toBe(
    `Bearer realm="http://${arRegistry.host}/v2/token",service="${arRegistry.host}"`,
  );
  const basic = (password: string) =>
    `Basic ${Buffer.from(`oauth2accesstoken:${password}`).toString("base64")}`;
  const realm = `http://${arRegistry.host}/v2/token`;
  expect((await fetch(realm, { headers: { Authorization: basic("ya29.forged") } })).status).toBe(
    401,
  );
  const answer = await fetch(realm, { headers: { Authorization: basic(accessToken) } });
  const { token } = (await answer.json()) as { token: string };
  expect(
    (
      await fetch(`http://${arRegistry.host}/v2/`, {
        headers: { Authorization: `Bearer ${token}` },
      })
    ).status,
  ).toBe(200);
});

test("Entra takes the federated token as client_assertion, for its tenant and client only", async () => {
  expect((await entraToken("tenant-1")).status).toBe(200);
  expect((await entraToken("tenant-2")).status).toBe(400);
  const forged = await entraToken("tenant-1", { client_assertion: "forged" });
  expect(forged.status).toBe(401);
  expect(((await forged.json()) as { error: string }).error).toBe("invalid_client");
  expect((await entraToken("tenant-1", { client_id: "client-2" })).status).toBe(400);
});

test("ACR exchanges only a valid Entra token of its tenant; an expired refresh token is refused", async () => {
  const aad = ((await (await entraToken("tenant-1")).json()) as { access_token: string })
    .access_token;
  const exchange = (fields: Record<string, string>) =>
    fetch(
      `http://${acrRegistry.host}/oauth2/exchange`,
      form({
        grant_type: "access_token",
        service: acrRegistry.host,
        tenant: "tenant-1",
        access_token: aad,
        ...fields,
      }),
    );
  expect((await exchange({ access_token: "aad-forged" })).status).toBe(401);
  expect((await exchange({ tenant: "tenant-2" })).status).toBe(401);
  const realm = (refresh: string) =>
    fetch(`http://${acrRegistry.host}/oauth2/token?service=${acrRegistry.host}`, {
      headers: {
        Authorization: `Basic ${Buffer.from(`00000000-0000-0000-0000-000000000000:${refresh}`).toString("base64")}`,
      },
    });
  const { refresh_token: refresh } = (await (await exchange({})).json()) as Record<string, string>;
  const exp = JSON.parse(Buffer.from(refresh.split(".")[1], "base64url").toString()).exp;
  expect(exp).toBeGreaterThan(Date.now() / 1000);
  const { access_token: token } = (await (await realm(refresh)).json()) as Record<string, string>;
  expect(
    (
      await fetch(`http://${acrRegistry.host}/v2/`, {
        headers: { Authorization: `Bearer ${token}` },
      })
    ).status,
  ).toBe(200);
  entra.refreshLifetimeSeconds = 0;
  const { refresh_token: stale } = (await (await exchange({})).json()) as Record<string, string>;
  entra.refreshLifetimeSeconds = 3 * 3600;
  expect((await realm(stale)).status).toBe(401);
  expect(acr.refreshTokens.expiredPresented).toBe(1);
});
