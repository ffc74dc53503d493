// Cloud registries read through the controller's own identity (issue 43), through the real built
// controller: for ECR (IRSA web identity and EKS Pod Identity), Artifact Registry (GKE Workload
// Identity) and ACR (Azure Workload Identity), loopback stand-ins speak each service's wire
// protocol (test/support/cloud-stand-ins.ts) in front of a registry that demands what the flow ends
// with. The image is read and its user applied; a token past its expiry is refreshed (the registry
// refuses the old one); a denied identity, or an endpoint that answers garbage, is not the
// metadata server or never answers, is a warning, never a denial; a pod's image reference naming a
// credential endpoint is refused by the egress policy; `check --inspect-images` with the same
// settings and environment says what the webhook says.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { KubeObject } from "../../lib/objects/pod";
import type { SettingsInput } from "../../lib/settings";
import { admit } from "../support/admission";
import { runCheck } from "../support/check-command";
import {
  AwsSessions,
  EcrStandIn,
  EntraStandIn,
  GkeMetadataStandIn,
  PodIdentityStandIn,
  StsStandIn,
  type TokenBook,
} from "../support/cloud-stand-ins";
import { startEnvironment, type Environment } from "../support/environment";
import { canonical, settingsEnv } from "../support/parity";
import { TestRegistry } from "../support/registry";
import { eventually } from "../support/wait";

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
type Entry = NonNullable<NonNullable<SettingsInput["images"]>["cloudCredentials"]>[number];

/** Lifetime of every token the stand-ins issue: short, so that the module refreshes them here. */
const LIFETIME_S = 4;
const ROLE = "arn:aws:iam::123456789012:role/admission-guard";
const TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47";
const CLIENT = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
const UNAVAILABLE = "the module's cloud credentials for this registry could not be obtained";

const dir = mkdtempSync(join(tmpdir(), "cloud-credentials-"));
const files = {
  aws: join(dir, "aws-web-identity-token"),
  pod: join(dir, "eks-pod-identity-token"),
  azure: join(dir, "azure-federated-token"),
};
const rotate = (file: string) => writeFileSync(file, `projected.${Date.now()}.${Math.random()}`);

const sessions = new AwsSessions();
const sts = new StsStandIn(sessions, { roleArn: ROLE, tokenFile: files.aws });
const stsDenied = new StsStandIn(sessions, { roleArn: ROLE, tokenFile: files.aws });
const ecrWeb = new EcrStandIn(sessions, "us-east-1");
const agent = new PodIdentityStandIn(sessions, { tokenFile: files.pod });
const agentDenied = new PodIdentityStandIn(sessions, { tokenFile: files.pod });
const ecrPod = new EcrStandIn(sessions, "us-west-2");
const ecrDenied = new EcrStandIn(sessions, "us-west-2");
const gke = new GkeMetadataStandIn();
const gkeDenied = new GkeMetadataStandIn();
const azure = { tenantId: TENANT, clientId: CLIENT, tokenFile: files.azure };
const entra = new EntraStandIn(azure);
const entraDenied = new EntraStandIn(azure);
const stsGarbage = new StsStandIn(sessions, { roleArn: ROLE, tokenFile: files.aws });
const gkeImpostor = new GkeMetadataStandIn();
const entraSilent = new EntraStandIn(azure);
const standIns = [
  sts,
  stsDenied,
  ecrWeb,
  agent,
  agentDenied,
  ecrPod,
  gke,
  gkeDenied,
  entra,
  entraDenied,
  stsGarbage,
  gkeImpostor,
  entraSilent,
  ecrDenied,
];

/** A cloud flow: the registry it opens, the entry that configures it, who answers for the identity. */
interface Flow {
  name: string;
  registry: TestRegistry;
  entry: () => Entry;
  /** The stand-in asked first (STS, the agent, the metadata server, Entra). */
  identity: { count(): number };
  /** What the registry accepts, as issued (its count grows with each fetch); none when refused. */
  issued?: () => TokenBook;
}

const registries = Array.from({ length: 12 }, () => new TestRegistry());
let acrIssued: TokenBook;

/** The flow of registries[index], its entry given that registry's host. */
const flow = (
  name: string,
  index: number,
  entry: (registries: string[]) => Entry,
  identity: Flow["identity"],
  issued?: Flow["issued"],
): Flow => ({
  name,
  registry: registries[index],
  entry: () => entry([registries[index].host]),
  identity,
  issued,
});
const ecrEntry = (
  registries: string[],
  region: string,
  identity: "web-identity" | "pod-identity",
) => ({ provider: "ecr", registries, region, identity }) as const;

const flows: Flow[] = [
  flow(
    "ECR through IRSA (STS web identity)",
    0,
    r => ({
      ...ecrEntry(r, "us-east-1", "web-identity"),
      stsEndpoint: sts.url,
      ecrEndpoint: ecrWeb.url,
    }),
    sts,
    () => ecrWeb.passwords,
  ),
  flow(
    "ECR through EKS Pod Identity",
    1,
    r => ({ ...ecrEntry(r, "us-west-2", "pod-identity"), ecrEndpoint: ecrPod.url }),
    agent,
    () => ecrPod.passwords,
  ),
  flow(
    "Artifact Registry through GKE Workload Identity",
    2,
    r => ({ provider: "gcp", registries: r, metadataEndpoint: gke.url }),
    gke,
    () => gke.accessTokens,
  ),
  flow(
    "ACR through Azure Workload Identity",
    3,
    r => ({ provider: "acr", registries: r }),
    entra,
    () => acrIssued,
  ),
];

/**
 * The same four with the identity denied (STS AccessDenied, the agent, IAM, invalid_client, ECR's
 * AccessDeniedException), and credential endpoints that answer garbage, are not the metadata
 * server (no Metadata-Flavor), or never answer.
 */
const denied: Flow[] = [
  flow(
    "ECR through IRSA, STS AccessDenied",
    4,
    r => ({
      ...ecrEntry(r, "us-east-1", "web-identity"),
      stsEndpoint: stsDenied.url,
      ecrEndpoint: ecrWeb.url,
    }),
    stsDenied,
  ),
  flow(
    "ECR through EKS Pod Identity, no association",
    5,
    r => ({
      ...ecrEntry(r, "us-west-2", "pod-identity"),
      podIdentityEndpoint: `${agentDenied.url}/v1/credentials`,
      ecrEndpoint: ecrPod.url,
    }),
    agentDenied,
  ),
  flow(
    "Artifact Registry, IAM denies the token",
    6,
    r => ({ provider: "gcp", registries: r, metadataEndpoint: gkeDenied.url }),
    gkeDenied,
  ),
  flow(
    "ACR, Entra invalid_client",
    7,
    r => ({ provider: "acr", registries: r, authorityHost: `${entraDenied.url}/` }),
    entraDenied,
  ),
  flow(
    "ECR through IRSA, STS answers garbage",
    8,
    r => ({
      ...ecrEntry(r, "us-east-1", "web-identity"),
      stsEndpoint: stsGarbage.url,
      ecrEndpoint: ecrWeb.url,
    }),
    stsGarbage,
  ),
  flow(
    "Artifact Registry, an impostor answers without Metadata-Flavor",
    9,
    r => ({ provider: "gcp", registries: r, metadataEndpoint: gkeImpostor.url }),
    gkeImpostor,
  ),
  flow(
    "ACR, Entra ID never answers",
    10,
    r => ({ provider: "acr", registries: r, authorityHost: `${entraSilent.url}/` }),
    entraSilent,
  ),
  flow(
    "ECR through EKS Pod Identity, GetAuthorizationToken AccessDeniedException",
    11,
    r => ({ ...ecrEntry(r, "us-west-2", "pod-identity"), ecrEndpoint: ecrDenied.url }),
    ecrDenied,
  ),
];

const settings = () => ({
  images: {
    inspect: true,
    plainHttp: registries.map(r => r.host),
    cloudCredentials: [...flows, ...denied].map(f => f.entry()),
  },
});
/** The controller's identity, as the clouds' webhooks inject it (IRSA, Pod Identity, Azure WI). */
const identityEnv = () => ({
  AWS_ROLE_ARN: ROLE,
  AWS_WEB_IDENTITY_TOKEN_FILE: files.aws,
  AWS_CONTAINER_CREDENTIALS_FULL_URI: `${agent.url}/v1/credentials`,
  AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: files.pod,
  AZURE_TENANT_ID: TENANT,
  AZURE_CLIENT_ID: CLIENT,
  AZURE_FEDERATED_TOKEN_FILE: files.azure,
  AZURE_AUTHORITY_HOST: `${entra.url}/`,
});

let env: Environment;

beforeAll(async () => {
  Object.values(files).forEach(rotate);
  await Promise.all([...standIns, ...registries].map(s => s.start()));
  for (const s of [sts, ecrWeb, agent, ecrPod, gke, entra]) s.lifetimeSeconds = LIFETIME_S;
  entra.refreshLifetimeSeconds = LIFETIME_S;
  for (const s of [stsDenied, agentDenied, gkeDenied, entraDenied, ecrDenied]) s.behaviour = "deny";
  stsGarbage.behaviour = "garbage";
  gkeImpostor.answersFlavor = false;
  entraSilent.behaviour = "slow";
  // The denied flows' registries demand ECR's credentials too (served first: ECR's answer names
  // the last registry served as its proxyEndpoint).
  ecrWeb.serve(registries[4]);
  ecrPod.serve(registries[5]);
  ecrWeb.serve(registries[8]);
  ecrWeb.serve(registries[0]);
  ecrPod.serve(registries[1]);
  gke.serve(registries[2]);
  acrIssued = entra.serve(registries[3]).refreshTokens;
  gkeDenied.serve(registries[6]);
  entraDenied.serve(registries[7]);
  gkeImpostor.serve(registries[9]);
  entraSilent.serve(registries[10]);
  ecrDenied.serve(registries[11]);
  for (const r of registries) {
    r.putImage("ml/train", "1", { User: "1234" });
    r.putImage("ml/train", "2", { User: "1234" });
  }
  env = await startEnvironment({
    objects: [{ apiVersion: "v1", kind: "Namespace", metadata: { name: "ml" } }],
    // The tests' controllers read no image unless told (test/support/controller.ts IMAGES_OFF).
    env: { ...settingsEnv(settings()), ...identityEnv(), ADMISSION_GUARD_IMAGES_INSPECT: "true" },
  });
}, 60_000);
afterAll(async () => {
  await env?.stop();
  await Promise.all([...standIns, ...registries].map(s => s.stop()));
});

const pod = (images: string[]): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "train", namespace: "ml" },
  spec: { containers: images.map((image, i) => ({ name: `c${i}`, image })) },
});
const runAsUser = (result: { patched: KubeObject }) =>
  (result.patched.spec as Obj).securityContext?.runAsUser;

describe.each(flows)("$name", flow => {
  test("the private image is read with the cloud credentials: the pod runs as its USER 1234", async () => {
    // The store fetched a token at start (admission never waits for one).
    await eventually(() => expect(flow.issued!().issued).toBeGreaterThan(0), 20_000, 100);
    const result = await eventually(
      async () => {
        const r = await admit(env.controller, pod([`${flow.registry.host}/ml/train:1`]));
        expect(runAsUser(r)).toBe(1234);
        return r;
      },
      40_000,
      500,
    );
    expect(result.allowed).toBe(true);
    expect(result.warnings.join("\n")).not.toContain("was not inspected");
    // The registry was read only with what the flow issued (it refuses anything else).
    expect(flow.registry.countOf(/^\/v2\/ml\/train\/manifests\/1$/)).toBeGreaterThan(0);
  }, 60_000);

  test("a token past its expiry is refreshed before it is needed; the registry refuses the old one", async () => {
    // The projected token rotates too: the stand-ins accept only the file's current content.
    Object.values(files).forEach(rotate);
    const issuedBefore = flow.issued!().issued;
    const since = Date.now();
    // Every token that existed before `since` has expired, and newer ones were fetched.
    await eventually(
      () => {
        expect(Date.now() - since).toBeGreaterThan(LIFETIME_S * 1000);
        expect(flow.issued!().issued).toBeGreaterThanOrEqual(issuedBefore + 2);
      },
      30_000,
      200,
    );
    // A tag not read yet: a registry call now, with whatever the store holds.
    const result = await admit(env.controller, pod([`${flow.registry.host}/ml/train:2`]));
    expect(runAsUser(result)).toBe(1234);
    expect(result.warnings.join("\n")).not.toContain("was not inspected");
  }, 60_000);
});

describe.each(denied)("$name", flow => {
  test("admitted with today's defaults and the 'not inspected' warning naming the credentials, never denied", async () => {
    await eventually(() => expect(flow.identity.count()).toBeGreaterThan(0), 20_000, 100);
    const image = `${flow.registry.host}/ml/train:1`;
    const result = await eventually(
      async () => {
        const r = await admit(env.controller, pod([image]));
        expect(r.warnings.join("\n")).toContain(UNAVAILABLE);
        return r;
      },
      20_000,
      500,
    );
    expect(result.allowed).toBe(true);
    expect(runAsUser(result)).toBe(1000);
    expect(result.warnings).toContainEqual(
      expect.stringContaining(
        `image "${image}" (container "c0") was not inspected (${UNAVAILABLE}`,
      ),
    );
  }, 60_000);
});

test("a pod's image naming a credential endpoint is refused by the egress policy: no request reaches it", async () => {
  const endpoints = [sts, agent, gke, entra, ecrWeb];
  const images = [
    ...endpoints.map(s => `${s.host}/latest/meta-data:1`),
    "169.254.169.254/computemetadata/v1:1",
    "169.254.170.23/v1/credentials:1",
  ];
  const result = await admit(env.controller, pod(images));
  expect(result.allowed).toBe(true);
  images.forEach((image, i) =>
    expect(result.warnings).toContainEqual(
      expect.stringContaining(
        `image "${image}" (container "c${i}") was not inspected (the registry host is not allowed by the egress policy`,
      ),
    ),
  );
  // The stand-ins saw the module's credential calls only, never an image lookup.
  for (const s of endpoints) expect(s.count(/^\/v2\//)).toBe(0);
});

test("check --inspect-images with the same settings and environment says what the webhook says", async () => {
  const pods = [...flows, denied[0]].map((f, i) => ({
    ...pod([`${f.registry.host}/ml/train:1`]),
    metadata: { name: `train-${i}`, namespace: "ml" },
  }));
  const dir = mkdtempSync(join(tmpdir(), "cloud-check-"));
  writeFileSync(join(dir, "settings.json"), JSON.stringify(settings()));
  writeFileSync(
    join(dir, "pods.json"),
    JSON.stringify({ apiVersion: "v1", kind: "List", items: pods }),
  );
  const check = await runCheck(
    ["--settings", "settings.json", "--inspect-images", "-n", "ml", "-o", "json", "pods.json"],
    dir,
    identityEnv(),
  );
  // Its log (stderr) says which identity was refused, as the controller's does.
  expect(check.stderr).toContain("AccessDenied");
  const judged = check.stdout
    .trim()
    .split("\n")
    .map(line => JSON.parse(line) as Obj);
  expect(judged.map(j => j.name)).toEqual(pods.map(p => p.metadata.name));
  for (const [i, manifest] of pods.entries()) {
    const webhook = await admit(env.controller, manifest);
    expect(judged[i].allowed).toBe(webhook.allowed);
    expect(judged[i].object.spec.securityContext).toEqual(
      (webhook.patched.spec as Obj).securityContext,
    );
    // An offline snapshot without quotas or nodes says so; the controller's synced caches hold none.
    const offline = (judged[i].warnings as string[]).filter(
      w =>
        !/^admission-guard\/resource-quota: .* not checked .*the cluster snapshot holds no/.test(w),
    );
    expect(canonical(offline)).toBe(canonical(webhook.validateResponse.warnings ?? []));
  }
  expect(judged.map(j => j.object.spec.securityContext.runAsUser)).toEqual([
    1234, 1234, 1234, 1234, 1000,
  ]);
  expect(judged[4].warnings.join("\n")).toContain(UNAVAILABLE);
}, 60_000);

test("the controller's log names credential failures and never carries a token", async () => {
  const logs = env.controller.logs();
  expect(logs).toMatch(/AccessDenied|invalid_client|403/);
  const secrets = [
    ...Object.values(files).map(f => readFileSync(f, "utf8")),
    ...sessions.secrets,
    ...[
      ecrWeb.passwords,
      ecrPod.passwords,
      gke.accessTokens,
      entra.accessTokens,
      acrIssued,
    ].flatMap(b => b.tokens),
  ];
  for (const secret of secrets) expect(logs).not.toContain(secret);
});
