// ACR: an Entra ID token for the controller's federated identity (Azure Workload Identity: the
// projected token as client assertion), exchanged at the registry's /oauth2/exchange for a refresh
// token, which the registry takes as the password of the all-zero user. One per registry, named
// exactly. Why: docs/adr/0039-registry-credentials-from-the-cloud-identity.md
import type { AcrEntry } from "./settings";
import {
  CredentialError,
  endpointUrl,
  expiryFrom,
  jsonCall,
  readTokenFile,
  stringField,
  type CloudEnv,
  type FetchContext,
  type Obtained,
} from "./common";

export const AZURE_AUTHORITY_HOST = "https://login.microsoftonline.com/";
/** ACR's refresh tokens live 3 h when theirs says nothing. */
export const ACR_REFRESH_TOKEN_MS = 3 * 3600_000;
const ACR_USER = "00000000-0000-0000-0000-000000000000";

interface AzureIdentity {
  authority: string;
  tenantId: string;
  clientId: string;
  tokenFile: string;
}

/** The identity an entry uses: its fields, else the Workload Identity webhook's env. */
export function azureIdentity(entry: AcrEntry, env: CloudEnv): AzureIdentity {
  const tenantId = entry.tenantId ?? env.AZURE_TENANT_ID;
  const clientId = entry.clientId ?? env.AZURE_CLIENT_ID;
  const tokenFile = entry.tokenFile ?? env.AZURE_FEDERATED_TOKEN_FILE;
  if (!tenantId || !clientId || !tokenFile)
    throw new CredentialError(
      "Azure Workload Identity needs a tenant (tenantId or $AZURE_TENANT_ID), a client (clientId or $AZURE_CLIENT_ID) and a token file (tokenFile or $AZURE_FEDERATED_TOKEN_FILE)",
    );
  const authority = endpointUrl(
    entry.authorityHost ?? env.AZURE_AUTHORITY_HOST ?? AZURE_AUTHORITY_HOST,
    "Entra ID",
  );
  return { authority, tenantId, clientId, tokenFile };
}

/** The registry's own URL (http when images.plainHttp lists it). */
const registryUrl = (registry: string, plainHttp: ReadonlySet<string>) =>
  `${plainHttp.has(registry) ? "http" : "https"}://${registry}`;

/** The hosts a registry's fetch reaches: Entra ID, and the registry's token exchange. */
export function acrEndpoints(
  entry: AcrEntry,
  registry: string,
  env: CloudEnv,
  plainHttp: ReadonlySet<string>,
): string[] {
  return [azureIdentity(entry, env).authority, registryUrl(registry, plainHttp)];
}

/** One refresh token for one registry: Entra ID's token, then the registry's exchange. */
export async function fetchAcr(
  entry: AcrEntry,
  registry: string,
  ctx: FetchContext,
): Promise<Obtained> {
  const identity = azureIdentity(entry, ctx.env);
  const assertion = await readTokenFile(identity.tokenFile, "Azure federated");
  const what = "Entra ID";
  const aad = await jsonCall(
    ctx,
    `${identity.authority}/${encodeURIComponent(identity.tenantId)}/oauth2/v2.0/token`,
    form({
      client_id: identity.clientId,
      grant_type: "client_credentials",
      client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
      client_assertion: assertion,
      scope: "https://management.azure.com/.default",
    }),
    what,
    "error",
  );
  const accessToken = stringField(aad.body, "access_token", what);
  const exchange = `ACR's token exchange on ${registry}`;
  const answer = await jsonCall(
    ctx,
    `${registryUrl(registry, ctx.plainHttp)}/oauth2/exchange`,
    form({
      grant_type: "access_token",
      service: registry,
      tenant: identity.tenantId,
      access_token: accessToken,
    }),
    exchange,
    "error",
  );
  const refreshToken = stringField(answer.body, "refresh_token", exchange);
  const now = ctx.now();
  const exp = jwtExpiry(refreshToken);
  return {
    credentials: { username: ACR_USER, password: refreshToken, sameHostOnly: true },
    expiresAt: expiryFrom(exp ?? now + ACR_REFRESH_TOKEN_MS, now, exchange),
  };
}

const form = (fields: Record<string, string>) => ({
  method: "POST",
  headers: { "Content-Type": "application/x-www-form-urlencoded" },
  body: new URLSearchParams(fields).toString(),
});

/** A JWT's `exp` (epoch ms); undefined when the token is not a JWT or has none. */
export function jwtExpiry(token: string): number | undefined {
  const payload = token.split(".")[1];
  if (!payload) return undefined;
  try {
    const exp = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"))?.exp;
    return typeof exp === "number" && Number.isFinite(exp) ? exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}
