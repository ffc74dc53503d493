// Artifact Registry and GCR: an access token of the controller's Google service account from the
// GKE metadata server (Workload Identity), which the registry takes as oauth2accesstoken's
// password. Why: docs/adr/0039-registry-credentials-from-the-cloud-identity.md
import type { GcpEntry } from "./settings";
import {
  CredentialError,
  endpointUrl,
  expiryFrom,
  jsonCall,
  stringField,
  type FetchContext,
  type Obtained,
} from "./common";

/** The metadata server's link-local address, which metadata.google.internal names. */
export const GCP_METADATA_ENDPOINT = "http://169.254.169.254";
const TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token";

/** The hosts an entry's fetch reaches. */
export function gcpEndpoints(entry: GcpEntry): string[] {
  return [endpointUrl(entry.metadataEndpoint ?? GCP_METADATA_ENDPOINT, "metadata")];
}

/** One access token for the entry from the metadata server. */
export async function fetchGcp(entry: GcpEntry, ctx: FetchContext): Promise<Obtained> {
  const what = "the GKE metadata server";
  const { body, headers } = await jsonCall(
    ctx,
    `${gcpEndpoints(entry)[0]}${TOKEN_PATH}`,
    { headers: { "Metadata-Flavor": "Google" } },
    what,
  );
  // The metadata server says so on every answer: anything else is not it.
  if (headers.get("metadata-flavor") !== "Google")
    throw new CredentialError(`${what}'s answer has no Metadata-Flavor: Google`);
  const token = stringField(body, "access_token", what);
  if (String(body.token_type).toLowerCase() !== "bearer")
    throw new CredentialError(`${what} gave a token that is not a Bearer token`);
  const expiresIn = body.expires_in;
  if (typeof expiresIn !== "number") throw new CredentialError(`${what} gave no expires_in number`);
  const now = ctx.now();
  return {
    credentials: { username: "oauth2accesstoken", password: token, sameHostOnly: true },
    expiresAt: expiryFrom(now + expiresIn * 1000, now, what),
  };
}
