// The Helm chart `npm run build` writes: Pepr's values.schema.json refuses keys it does not list,
// so every top-level key the build adds to values.yaml must be in the schema, or `helm install`
// fails before anything is applied ("Additional property ... is not allowed").
import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { parse, parseAllDocuments } from "yaml";
import cfg from "../../package.json";
import { settingsFromEnv } from "../../lib/settings";
import { readCloudIdentity } from "../../scripts/overlay/cloud-identity";
import { mergeValues, renderTemplate } from "../support/helm-template";

const exec = promisify(execFile);

const chart = join(__dirname, "../..", "dist", `${cfg.pepr.uuid}-chart`);

interface Schema {
  $ref?: string;
  definitions?: Record<string, Schema>;
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
  type?: string;
}

const built = existsSync(join(chart, "values.schema.json"));

describe("the built chart's values against its schema", () => {
  // jest runs after `npm run build` (npm test); a missing chart is a failure, not a skip.
  it("was built", () => expect(built).toBe(true));

  it("lists every top-level key of values.yaml (the schema refuses the others)", () => {
    const whole = JSON.parse(readFileSync(join(chart, "values.schema.json"), "utf8")) as Schema;
    const root = whole.$ref ? whole.definitions![whole.$ref.split("/").pop()!] : whole;
    expect(root.additionalProperties).toBe(false);
    const values = parse(readFileSync(join(chart, "values.yaml"), "utf8")) as Record<
      string,
      unknown
    >;
    const unlisted = Object.keys(values).filter(key => !root.properties?.[key]);
    expect(unlisted).toEqual([]);
    // The keys the build adds, each with its switch.
    for (const key of ["monitoring", "namespaceKeysPolicy"])
      expect(root.properties?.[key]).toBeDefined();
  });
});

// Issue 43: what EKS, GKE and AKS need of the install for the controller to read their registries
// with its own identity, as chart values (rendered here as Helm renders them: test/support/helm-template)
// and, from the same values file (deploy/cloud-identity.yaml), in the manifest. The admission and
// the watcher pods get the same: the watcher's report scan reads the same images.
describe("the cloud identity of the install (chart values cloudIdentity.*, admission.podLabels, watcher.podLabels)", () => {
  const dist = join(__dirname, "../..", "dist");
  const NAME = `pepr-${cfg.pepr.uuid}`;
  const template = (name: string) => readFileSync(join(chart, "templates", name), "utf8");
  const defaults = () => parse(readFileSync(join(chart, "values.yaml"), "utf8")) as object;
  type Container = {
    name: string;
    env: { name: string; value?: string }[];
    volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[];
  };
  type Deployment = {
    kind: string;
    metadata: { name: string; annotations?: Record<string, string> };
    spec: {
      selector: { matchLabels: Record<string, string> };
      template: {
        metadata: { labels: Record<string, string> };
        spec: { containers: Container[]; volumes: { name: string; projected?: unknown }[] };
      };
    };
  };
  /** The chart's template rendered with its values.yaml and `values` over them. */
  const render = (name: string, values: object = {}, base = defaults()) =>
    parseAllDocuments(renderTemplate(template(name), mergeValues(base, values))).map(
      d => d.toJS() as Deployment,
    )[0];
  /** What a Deployment's pods carry of the cloud identity: their labels, the token. */
  const podsOf = (deployment: Deployment, container: string) => {
    const pod = deployment.spec.template;
    const [main] = pod.spec.containers.filter(c => c.name === container);
    return {
      labels: pod.metadata.labels,
      selector: deployment.spec.selector.matchLabels,
      volumes: pod.spec.volumes.filter(v => v.name === "cloud-identity-token"),
      mounts: main.volumeMounts.filter(m => m.name === "cloud-identity-token"),
      env: main.env.filter(e => /^(AWS|AZURE)_/.test(e.name)),
    };
  };
  /** What the cloud identity is on an install: the SA's annotations, each kind of pod's labels and token. */
  const identityOf = (sa: Deployment, admission: Deployment, watcher: Deployment) => ({
    annotations: sa.metadata.annotations,
    admission: podsOf(admission, "server"),
    watcher: podsOf(watcher, "watcher"),
  });
  const chartIdentity = (values: object = {}, base = defaults()) =>
    identityOf(
      render("service-account.yaml", values, base),
      render("admission-deployment.yaml", values, base),
      render("watcher-deployment.yaml", values, base),
    );
  const manifestOf = (dir: string) =>
    parseAllDocuments(readFileSync(join(dir, `pepr-module-${cfg.pepr.uuid}.yaml`), "utf8")).map(
      d => d.toJS() as Deployment,
    );
  const manifestIdentity = (dir: string) => {
    const docs = manifestOf(dir);
    const find = (kind: string, name = NAME) =>
      docs.find(d => d.kind === kind && d.metadata.name === name)!;
    return identityOf(
      find("ServiceAccount"),
      find("Deployment"),
      find("Deployment", `${NAME}-watcher`),
    );
  };
  // Pepr's selector labels, each kind of pod its own, whatever the values say.
  const ADMISSION_SELECTOR = { app: NAME, "pepr.dev/controller": "admission" };
  const WATCHER_SELECTOR = { app: `${NAME}-watcher`, "pepr.dev/controller": "watcher" };
  type Token = { volumes: object[]; mounts: object[]; env: object[] };
  const NO_TOKEN: Token = { volumes: [], mounts: [], env: [] };
  /** The identity expected: the annotations, and the same labels and token on both kinds of pod. */
  const expected = ({
    annotations,
    podLabels = {},
    token = NO_TOKEN,
  }: { annotations?: object; podLabels?: object; token?: Token } = {}) => ({
    annotations,
    admission: {
      labels: { ...ADMISSION_SELECTOR, ...podLabels },
      selector: ADMISSION_SELECTOR,
      ...token,
    },
    watcher: {
      labels: { ...WATCHER_SELECTOR, ...podLabels },
      selector: WATCHER_SELECTOR,
      ...token,
    },
  });
  const NONE = expected();
  const awsToken = {
    enabled: true,
    audience: "sts.amazonaws.com",
    path: "/var/run/secrets/admission-guard/cloud-identity/token",
    expirationSeconds: 86400,
    env: "AWS_WEB_IDENTITY_TOKEN_FILE",
  };
  const tokenOf = (audience: string, expirationSeconds: number, path = "token") => [
    {
      name: "cloud-identity-token",
      projected: {
        sources: [{ serviceAccountToken: { audience, expirationSeconds, path } }],
      },
    },
  ];

  /** awsToken as the pods get it. */
  const AWS_TOKEN: Token = {
    volumes: tokenOf("sts.amazonaws.com", 86400),
    mounts: [
      {
        name: "cloud-identity-token",
        mountPath: "/var/run/secrets/admission-guard/cloud-identity",
        readOnly: true,
      },
    ],
    env: [{ name: "AWS_WEB_IDENTITY_TOKEN_FILE", value: awsToken.path }],
  };

  it("by default changes nothing: no annotation on the ServiceAccount, Pepr's pod labels on both kinds of pod, no token, in the manifest and the chart", () => {
    expect(manifestIdentity(dist)).toEqual(NONE);
    expect(chartIdentity()).toEqual(NONE);
    expect((defaults() as { cloudIdentity: object }).cloudIdentity).toEqual({
      serviceAccountAnnotations: {},
      projectedToken: { ...awsToken, enabled: false, audience: "", expirationSeconds: 3600 },
    });
  });

  it("puts each cloud's ServiceAccount annotation on the controller's ServiceAccount: IRSA, GKE Workload Identity, Azure Workload Identity", () => {
    for (const annotations of [
      { "eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/admission-guard" },
      { "iam.gke.io/gcp-service-account": "admission-guard@my-project.iam.gserviceaccount.com" },
      { "azure.workload.identity/client-id": "00000000-1111-2222-3333-444444444444" },
    ])
      expect(chartIdentity({ cloudIdentity: { serviceAccountAnnotations: annotations } })).toEqual(
        expected({ annotations }),
      );
  });

  it("labels the admission and the watcher pods through Pepr's admission.podLabels and watcher.podLabels (Azure's azure.workload.identity/use), a string, each selector Pepr's", () => {
    const podLabels = { "azure.workload.identity/use": "true" };
    expect(chartIdentity({ admission: { podLabels }, watcher: { podLabels } })).toEqual(
      expected({ podLabels }),
    );
  });

  it("mounts a projected ServiceAccount token in the admission and the watcher containers with the variable naming it: AWS, then Azure", () => {
    expect(chartIdentity({ cloudIdentity: { projectedToken: awsToken } })).toEqual(
      expected({ token: AWS_TOKEN }),
    );
    const azure = {
      ...awsToken,
      audience: "api://AzureADTokenExchange",
      path: "/var/run/secrets/azure/tokens/azure-identity-token",
      expirationSeconds: 3600,
      env: "AZURE_FEDERATED_TOKEN_FILE",
    };
    expect(chartIdentity({ cloudIdentity: { projectedToken: azure } })).toEqual(
      expected({
        token: {
          volumes: tokenOf("api://AzureADTokenExchange", 3600, "azure-identity-token"),
          mounts: [
            {
              name: "cloud-identity-token",
              mountPath: "/var/run/secrets/azure/tokens",
              readOnly: true,
            },
          ],
          env: [{ name: "AZURE_FEDERATED_TOKEN_FILE", value: azure.path }],
        },
      }),
    );
    // Without an audience the chart refuses to render (a token for no one is refused by STS and Entra ID).
    for (const template of ["admission-deployment.yaml", "watcher-deployment.yaml"])
      expect(() =>
        render(template, { cloudIdentity: { projectedToken: { ...awsToken, audience: "" } } }),
      ).toThrow(/cloudIdentity\.projectedToken\.audience/);
  });

  it("its schema takes exactly these keys, a token file variable the module reads, a lifetime the kubelet accepts", () => {
    const whole = JSON.parse(readFileSync(join(chart, "values.schema.json"), "utf8")) as Schema;
    const root = whole.$ref ? whole.definitions![whole.$ref.split("/").pop()!] : whole;
    const schema = root.properties!.cloudIdentity as Schema & {
      properties: { projectedToken: Schema & { properties: Record<string, object> } };
    };
    expect(schema.additionalProperties).toBe(false);
    expect(Object.keys(schema.properties).sort()).toEqual([
      "projectedToken",
      "serviceAccountAnnotations",
    ]);
    const token = schema.properties.projectedToken;
    expect(token.additionalProperties).toBe(false);
    expect(token.properties.env).toEqual({
      type: "string",
      enum: ["AWS_WEB_IDENTITY_TOKEN_FILE", "AZURE_FEDERATED_TOKEN_FILE"],
    });
    expect(token.properties.expirationSeconds).toEqual({ type: "integer", minimum: 600 });
  });

  it("docs/deploy.md grants the manifest's ServiceAccount, and its settings and values examples are valid", () => {
    const docs = readFileSync(join(__dirname, "../..", "docs", "deploy.md"), "utf8");
    const section = docs.slice(
      docs.indexOf("## Cloud registries"),
      docs.indexOf("## Module config"),
    );
    const [sa] = manifestOf(dist).filter(d => d.kind === "ServiceAccount");
    expect(sa.metadata.name).toBe(NAME);
    // Every grant names it: the subject of the trust policy, the binding and the federated credential.
    expect(section).toContain(`SA=${NAME}`);
    expect(section).toContain(`system:serviceaccount:pepr-system:${NAME}`);
    expect(section.match(/pepr-[0-9a-f]{8}-[0-9a-f-]{27}/g)?.every(n => n === NAME)).toBe(true);
    const blocks = [...section.matchAll(/```yaml\n([\s\S]*?)```/g)].map(m => m[1]);
    const settings = blocks.filter(b => b.startsWith("images:"));
    const providers = settings.flatMap(
      b => settingsFromEnv({ ADMISSION_GUARD_SETTINGS: b }).images.cloudCredentials,
    );
    expect(providers.map(p => p.provider)).toEqual(["ecr", "gcp", "acr"]);
    // The chart values shown are what the build's values file takes.
    const values = blocks.filter(b => /^(cloudIdentity|admission):/.test(b));
    expect(values).toHaveLength(3);
    const dir = mkdtempSync(join(tmpdir(), "admission-guard-docs-"));
    try {
      for (const [i, text] of values.entries()) {
        writeFileSync(
          join(dir, `${i}.yaml`),
          text.replace("<the identity's clientId>", "00000000-0000-0000-0000-000000000000"),
        );
        expect(() => readCloudIdentity(pathToFileURL(join(dir, `${i}.yaml`)))).not.toThrow();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe("the manifest, from deploy/cloud-identity.yaml at build", () => {
    const OVERLAY = join(__dirname, "../..", "scripts", "build-overlay.ts");
    let dir: string;
    const runOverlay = (valuesFile?: string, env: NodeJS.ProcessEnv = process.env) =>
      exec(
        process.execPath,
        ["--import", "tsx", OVERLAY, dir, "", ...(valuesFile ? [valuesFile] : [])],
        { cwd: join(__dirname, "../.."), env },
      );
    const valuesFile = (text: string) => {
      const file = join(dir, "cloud-identity.yaml");
      writeFileSync(file, text);
      return file;
    };
    beforeEach(() => {
      dir = mkdtempSync(join(tmpdir(), "admission-guard-cloud-identity-"));
      cpSync(
        join(dist, `pepr-module-${cfg.pepr.uuid}.yaml`),
        join(dir, `pepr-module-${cfg.pepr.uuid}.yaml`),
      );
      cpSync(chart, join(dir, `${cfg.pepr.uuid}-chart`), { recursive: true });
    });
    afterEach(() => rmSync(dir, { recursive: true, force: true }));

    // As deploy/cloud-identity.yaml writes the watcher's labels: an alias of the admission pods'.
    const text = `cloudIdentity:
  serviceAccountAnnotations:
    eks.amazonaws.com/role-arn: arn:aws:iam::111122223333:role/admission-guard
  projectedToken:
    enabled: true
    audience: sts.amazonaws.com
    expirationSeconds: 86400
admission:
  podLabels: &podLabels
    azure.workload.identity/use: "true"
watcher:
  podLabels: *podLabels
`;

    it("carries what the file says to both kinds of pod, the same as the chart renders by default and with the file as values; the defaults again take it all out", async () => {
      const before = readFileSync(join(dir, `pepr-module-${cfg.pepr.uuid}.yaml`), "utf8");
      const file = valuesFile(text);
      await runOverlay(file);
      await runOverlay(file); // once however often it runs
      const carried = manifestIdentity(dir);
      expect(carried).toEqual(
        expected({
          annotations: {
            "eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/admission-guard",
          },
          podLabels: { "azure.workload.identity/use": "true" },
          token: AWS_TOKEN,
        }),
      );
      // The chart's defaults are the file's: helm install without values installs the same.
      const chartDefaults = parse(
        readFileSync(join(dir, `${cfg.pepr.uuid}-chart`, "values.yaml"), "utf8"),
      ) as object;
      expect(chartIdentity({}, chartDefaults)).toEqual(carried);
      // And so does `helm install -f` the file on a chart built without it.
      expect(chartIdentity(parse(text) as object)).toEqual(carried);
      await runOverlay();
      expect(readFileSync(join(dir, `${cfg.pepr.uuid}-chart`, "values.yaml"), "utf8")).toBe(
        readFileSync(join(chart, "values.yaml"), "utf8"),
      );
      expect(readFileSync(join(dir, `pepr-module-${cfg.pepr.uuid}.yaml`), "utf8")).toBe(before);
    });

    it("a module without a watcher (reports and events off at build): the admission pods carry it alone", async () => {
      // What `pepr build` writes without Watch bindings: no watcher Deployment, no chart template.
      const manifest = join(dir, `pepr-module-${cfg.pepr.uuid}.yaml`);
      const docs = parseAllDocuments(readFileSync(manifest, "utf8")).filter(
        d => (d.toJS() as Deployment).metadata.name !== `${NAME}-watcher`,
      );
      writeFileSync(manifest, docs.map(d => d.toString()).join(""));
      rmSync(join(dir, `${cfg.pepr.uuid}-chart`, "templates", "watcher-deployment.yaml"));
      const { stdout } = await runOverlay(valuesFile(text), {
        ...process.env,
        ADMISSION_GUARD_SETTINGS: "reports: {enabled: false}\nevents: {enabled: false}\n",
      });
      expect(stdout).toContain(
        "cloud-identity: ServiceAccount annotations [eks.amazonaws.com/role-arn], admission pod labels [azure.workload.identity/use], projected token in the admission pods",
      );
      const after = manifestOf(dir);
      expect(after.some(d => d.metadata.name === `${NAME}-watcher`)).toBe(false);
      const admission = after.find(d => d.kind === "Deployment" && d.metadata.name === NAME)!;
      expect(podsOf(admission, "server")).toEqual(
        expected({ podLabels: { "azure.workload.identity/use": "true" }, token: AWS_TOKEN })
          .admission,
      );
    });

    it("a file that cannot work stops the build, naming the key", async () => {
      for (const [text, key] of [
        ["admission:\n  podLabels:\n    app: other\n", /admission\.podLabels\.app/],
        ["cloudIdentity:\n  projectedToken:\n    enabled: true\n", /projectedToken\.audience/],
        [
          "cloudIdentity:\n  projectedToken:\n    enabled: true\n    audience: sts.amazonaws.com\n    env: AWS_ROLE_ARN\n",
          /projectedToken\.env: must be one of AWS_WEB_IDENTITY_TOKEN_FILE, AZURE_FEDERATED_TOKEN_FILE/,
        ],
        ["cloudIdentity:\n  roleArn: x\n", /cloudIdentity\.roleArn: not a key/],
        // The watcher judges with the same images: its labels are the admission pods'.
        [
          'admission:\n  podLabels:\n    azure.workload.identity/use: "true"\nwatcher:\n  podLabels: {}\n',
          /watcher\.podLabels: must be admission\.podLabels/,
        ],
      ] as const)
        await expect(runOverlay(valuesFile(text))).rejects.toMatchObject({
          stderr: expect.stringMatching(key),
        });
    });
  });
});
