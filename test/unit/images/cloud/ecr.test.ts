// ECR credentials (lib/images/cloud/ecr.ts): IRSA's STS AssumeRoleWithWebIdentity or the EKS Pod
// Identity agent, then GetAuthorizationToken signed with SigV4 (checked here by AWS's own signer),
// over an injected transport; and every way an answer can be hostile.
import { Hash } from "@smithy/hash-node";
import { writeFileSync } from "node:fs";
import { SignatureV4 } from "@smithy/signature-v4";
import { awsIdentity, ecrEndpoints, fetchEcr, onlyElement } from "../../../../lib/images/cloud/ecr";
import { MAX_LIFETIME_MS } from "../../../../lib/images/cloud/common";
import { CloudCredentialEntry, type EcrEntry } from "../../../../lib/images/cloud/settings";
import { context, fakeTransport, json, never, text, tokenFile, type Seen } from "./fake-cloud";

const entry = (extra: Partial<EcrEntry> = {}): EcrEntry =>
  CloudCredentialEntry.parse({
    provider: "ecr",
    registries: ["*.dkr.ecr.eu-west-1.amazonaws.com"],
    region: "eu-west-1",
    stsEndpoint: "http://127.0.0.1:1001",
    ecrEndpoint: "http://127.0.0.1:1002",
    ...extra,
  }) as EcrEntry;

const ROLE = "arn:aws:iam::123456789012:role/admission-guard";
const iso = (ms: number) => new Date(ms).toISOString();
const stsXml = (expiresAt: number, credentials = 1) =>
  `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult>${`<Credentials><AccessKeyId>ASIAEXAMPLE</AccessKeyId><SecretAccessKey>s3cr3t&amp;key</SecretAccessKey><SessionToken>sess10n</SessionToken><Expiration>${iso(expiresAt)}</Expiration></Credentials>`.repeat(credentials)}</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>`;
const ecrJson = (expiresAtSeconds: number, password = "pa:ss") => ({
  authorizationData: [
    {
      authorizationToken: Buffer.from(`AWS:${password}`).toString("base64"),
      expiresAt: expiresAtSeconds,
      proxyEndpoint: "https://123456789012.dkr.ecr.eu-west-1.amazonaws.com",
    },
  ],
});

/** STS and ECR answering as AWS does, unless a test overrides one. */
function aws(over: { sts?: (r: Seen) => Response; ecr?: (r: Seen) => Response } = {}) {
  const hour = Date.now() + 3600_000;
  return fakeTransport(r =>
    r.url.port === "1001"
      ? (over.sts?.(r) ?? text(stsXml(hour)))
      : (over.ecr?.(r) ?? json(ecrJson(Math.floor(Date.now() / 1000) + 12 * 3600))),
  );
}

const webEnv = () => ({ AWS_ROLE_ARN: ROLE, AWS_WEB_IDENTITY_TOKEN_FILE: tokenFile("jwt.irsa") });

describe("fetchEcr through IRSA (web identity)", () => {
  it("assumes the role with the token file, then asks ECR with a SigV4 signature AWS's own signer agrees with", async () => {
    const { transport, seen } = aws();
    const obtained = await fetchEcr(entry(), context(transport, webEnv()));
    expect(obtained.credentials).toEqual({
      username: "AWS",
      password: "pa:ss",
      sameHostOnly: true,
    });
    const [sts, ecr] = seen;
    expect(sts.method).toBe("POST");
    expect(sts.url.toString()).toBe("http://127.0.0.1:1001/");
    expect(sts.headers["content-type"]).toBe("application/x-www-form-urlencoded");
    expect(Object.fromEntries(new URLSearchParams(sts.body))).toEqual({
      Action: "AssumeRoleWithWebIdentity",
      Version: "2011-06-15",
      RoleArn: ROLE,
      RoleSessionName: "admission-guard",
      WebIdentityToken: "jwt.irsa",
    });
    expect(sts.headers.authorization).toBeUndefined(); // unsigned
    expect(ecr.url.toString()).toBe("http://127.0.0.1:1002/");
    expect(ecr.body).toBe("{}");
    expect(ecr.headers["x-amz-target"]).toBe(
      "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken",
    );
    expect(ecr.headers["content-type"]).toBe("application/x-amz-json-1.1");
    expect(ecr.headers["x-amz-security-token"]).toBe("sess10n");
    const auth = ecr.headers.authorization;
    expect(auth).toMatch(
      /^AWS4-HMAC-SHA256 Credential=ASIAEXAMPLE\/\d{8}\/eu-west-1\/ecr\/aws4_request,/,
    );
    expect(await smithySignature(ecr)).toBe(/Signature=([0-9a-f]{64})/.exec(auth)![1]);
  });

  it("keeps the credentials no longer than the STS session that asked for them", async () => {
    const sessionEnd = Date.now() + 900_000;
    const { transport } = aws({ sts: () => text(stsXml(sessionEnd)) });
    const obtained = await fetchEcr(entry(), context(transport, webEnv()));
    expect(obtained.expiresAt).toBe(sessionEnd);
  });

  it("takes an expiry far in the future as 12 h from now", async () => {
    const { transport } = aws({
      sts: () => text(stsXml(Date.now() + 10 * 365 * 86400_000)),
      ecr: () => json(ecrJson(4_000_000_000)),
    });
    const before = Date.now();
    const obtained = await fetchEcr(entry(), context(transport, webEnv()));
    expect(obtained.expiresAt).toBeGreaterThanOrEqual(before + MAX_LIFETIME_MS);
    expect(obtained.expiresAt).toBeLessThanOrEqual(Date.now() + MAX_LIFETIME_MS);
  });

  it.each<[string, { sts?: (r: Seen) => Response; ecr?: (r: Seen) => Response }, string]>([
    [
      "STS denies the role",
      {
        sts: () =>
          text(
            "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>Not authorized to perform sts:AssumeRoleWithWebIdentity</Message></Error></ErrorResponse>",
            403,
          ),
      },
      "STS AssumeRoleWithWebIdentity answered HTTP 403 (AccessDenied)",
    ],
    [
      "STS answers two sets of Credentials",
      { sts: () => text(stsXml(Date.now() + 3600_000, 2)) },
      "STS AssumeRoleWithWebIdentity's answer has not exactly one Credentials",
    ],
    [
      "STS answers garbage",
      { sts: () => text("<html>\u0000\u0001") },
      "STS AssumeRoleWithWebIdentity's answer has not exactly one Credentials",
    ],
    [
      "STS answers 1 MiB",
      { sts: () => text("<".repeat(1024 * 1024)) },
      "STS AssumeRoleWithWebIdentity could not be read: its answer is over the 65536 byte limit",
    ],
    [
      "the session expired already",
      { sts: () => text(stsXml(Date.now() - 1000)) },
      "the AWS session gave credentials already expired",
    ],
    [
      "ECR denies",
      {
        ecr: () =>
          json(
            {
              __type: "AccessDeniedException",
              message: "not authorized: ecr:GetAuthorizationToken",
            },
            400,
          ),
      },
      "ECR GetAuthorizationToken answered HTTP 400 (AccessDeniedException)",
    ],
    [
      "ECR's token expired already",
      { ecr: () => json(ecrJson(Math.floor(Date.now() / 1000) - 60)) },
      "ECR GetAuthorizationToken gave credentials already expired",
    ],
    [
      "ECR's token is not user:password",
      {
        ecr: () =>
          json({ authorizationData: [{ authorizationToken: "bm9jb2xvbg==", expiresAt: 4e9 }] }),
      },
      "ECR GetAuthorizationToken's authorizationToken is not user:password",
    ],
    [
      "ECR's expiresAt is a string",
      {
        ecr: () =>
          json({ authorizationData: [{ authorizationToken: "QVdTOng=", expiresAt: "soon" }] }),
      },
      "ECR GetAuthorizationToken gave no expiresAt number",
    ],
    [
      "ECR answers an array",
      { ecr: () => json([1, 2]) },
      "ECR GetAuthorizationToken is not a JSON object",
    ],
  ])("fails with what went wrong when %s, never a token", async (_, over, message) => {
    const { transport } = aws(over);
    const error = fetchEcr(entry(), context(transport, webEnv()));
    await expect(error).rejects.toThrow(message);
    await expect(error).rejects.not.toThrow(/jwt\.irsa|sess10n|s3cr3t/);
  });

  it("gives up on an endpoint that does not answer, at the fetch's deadline", async () => {
    const { transport } = fakeTransport(r => never(r.signal));
    await expect(
      fetchEcr(entry(), context(transport, webEnv(), { signal: AbortSignal.timeout(50) })),
    ).rejects.toThrow("STS AssumeRoleWithWebIdentity did not answer in time");
  });

  it("reads the token file at every fetch (it rotates), and refuses a missing or 1 MiB one", async () => {
    const { transport, seen } = aws();
    const env = webEnv();
    await fetchEcr(entry(), context(transport, env));
    writeFileSync(env.AWS_WEB_IDENTITY_TOKEN_FILE, "jwt.rotated\n");
    await fetchEcr(entry(), context(transport, env));
    expect(new URLSearchParams(seen[2].body).get("WebIdentityToken")).toBe("jwt.rotated");

    await expect(
      fetchEcr(
        entry(),
        context(transport, { ...env, AWS_WEB_IDENTITY_TOKEN_FILE: "/nonexistent/t" }),
      ),
    ).rejects.toThrow("the web identity token file /nonexistent/t could not be read: ENOENT");
    const big = tokenFile(Buffer.alloc(1024 * 1024, 97));
    await expect(
      fetchEcr(entry(), context(transport, { ...env, AWS_WEB_IDENTITY_TOKEN_FILE: big })),
    ).rejects.toThrow(`the web identity token file ${big} is over 16384 bytes`);
    expect(seen).toHaveLength(4); // neither reached STS
  });
});

describe("fetchEcr through EKS Pod Identity", () => {
  it("asks the agent with its token file as Authorization, then ECR with the session", async () => {
    const hour = Date.now() + 3600_000;
    const { transport, seen } = fakeTransport(r =>
      r.url.port === "1003"
        ? json({
            AccessKeyId: "ASIAPOD",
            SecretAccessKey: "podsecret",
            Token: "podtoken",
            Expiration: iso(hour),
          })
        : json(ecrJson(Math.floor(Date.now() / 1000) + 12 * 3600, "ecrpw")),
    );
    const env = {
      AWS_CONTAINER_CREDENTIALS_FULL_URI: "http://127.0.0.1:1003/v1/credentials",
      AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: tokenFile("eks-pod-identity-token"),
    };
    const obtained = await fetchEcr(entry(), context(transport, env));
    expect(obtained.credentials.password).toBe("ecrpw");
    expect(obtained.expiresAt).toBe(Date.parse(iso(hour)));
    expect(seen[0].url.toString()).toBe("http://127.0.0.1:1003/v1/credentials");
    expect(seen[0].headers.authorization).toBe("eks-pod-identity-token");
    expect(seen[1].headers["x-amz-security-token"]).toBe("podtoken");
    expect(seen[1].headers.authorization).toContain("Credential=ASIAPOD/");
  });
});

describe("awsIdentity", () => {
  const podEnv = { AWS_CONTAINER_CREDENTIALS_FULL_URI: "http://169.254.170.23/v1/credentials" };
  it("auto: web identity when a role and its token file are set, else Pod Identity", () => {
    expect(awsIdentity(entry(), { ...webEnv(), ...podEnv }).kind).toBe("web-identity");
    expect(awsIdentity(entry(), podEnv).kind).toBe("pod-identity");
    expect(() => awsIdentity(entry(), { AWS_ROLE_ARN: ROLE })).toThrow("no AWS identity");
  });

  it("an entry's fields win over the env; its endpoints are the ones its fetch reaches", () => {
    const e = entry({ identity: "pod-identity", podIdentityEndpoint: "http://127.0.0.1:1003/x" });
    expect(ecrEndpoints(e, { ...webEnv(), ...podEnv })).toEqual([
      "http://127.0.0.1:1003/x",
      "http://127.0.0.1:1002",
    ]);
    const defaults = CloudCredentialEntry.parse({
      provider: "ecr",
      registries: ["*.dkr.ecr.us-east-1.amazonaws.com"],
      region: "us-east-1",
    }) as EcrEntry;
    expect(ecrEndpoints(defaults, webEnv())).toEqual([
      "https://sts.us-east-1.amazonaws.com",
      "https://api.ecr.us-east-1.amazonaws.com",
    ]);
    expect(() => awsIdentity(entry({ identity: "web-identity" }), podEnv)).toThrow(
      "web identity needs a role",
    );
  });
});

describe("onlyElement", () => {
  it("reads the one element, decoding entities, and refuses none, two or an unclosed one", () => {
    expect(onlyElement("<a><B> x&lt;&amp;y </B></a>", "B")).toBe("x<&y");
    expect(onlyElement("<B>1</B><B>2</B>", "B")).toBeUndefined();
    expect(onlyElement("<B>1", "B")).toBeUndefined();
    expect(onlyElement("", "B")).toBeUndefined();
  });
});

/** The signature AWS's own signer (@smithy/signature-v4) computes for the request aws4 signed. */
async function smithySignature(request: Seen): Promise<string> {
  const auth = request.headers.authorization;
  const signed = /SignedHeaders=([^,]+)/.exec(auth)![1].split(";");
  const amzDate = request.headers["x-amz-date"];
  const date = new Date(
    `${amzDate.slice(0, 4)}-${amzDate.slice(4, 6)}-${amzDate.slice(6, 8)}T${amzDate.slice(9, 11)}:${amzDate.slice(11, 13)}:${amzDate.slice(13, 15)}Z`,
  );
  const signer = new SignatureV4({
    credentials: {
      accessKeyId: "ASIAEXAMPLE",
      secretAccessKey: "s3cr3t&key",
      sessionToken: "sess10n",
    },
    region: "eu-west-1",
    service: "ecr",
    sha256: Hash.bind(null, "sha256"),
    applyChecksum: false,
  });
  const headers = Object.fromEntries(
    signed
      .filter(h => h !== "x-amz-date" && h !== "x-amz-security-token")
      .map(h => [h, request.headers[h]]),
  );
  const result = await signer.sign(
    {
      method: request.method,
      protocol: request.url.protocol,
      hostname: request.url.hostname,
      port: Number(request.url.port),
      path: request.url.pathname,
      query: {},
      headers,
      body: request.body,
    },
    { signingDate: date },
  );
  return /Signature=([0-9a-f]{64})/.exec(String(result.headers.authorization))![1];
}
