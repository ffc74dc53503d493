// What `npm run build` leaves in dist/ for a cluster: the mutating webhook asks to be called again
// when a later webhook (a sidecar injector) changes the pod — in the manifest and in the Helm chart
// — and the build overlay (scripts/build-overlay.ts) fails loudly when it cannot find what to change.
import { execFile } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { parseAllDocuments, parseDocument } from "yaml";
import { capabilities, policies, validators } from "../../capabilities";
import { routesOf, webhookRules } from "../../lib/engine/routes";
import { moduleEnvironment, settingsFromEnv } from "../../lib/settings";
import type { KubeObject } from "../../lib/objects/pod";
import {
  ANNOTATION_LIMIT,
  bundleReport,
  formatReport,
  moduleSecretOf,
  SECRET_LIMIT,
  secretBytes,
} from "../../scripts/bundle-report";
import { REPO_ROOT } from "../support/controller";
import { loadModuleRbac, moduleYamlPath } from "../support/module-rbac";

const exec = promisify(execFile);
const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8"));
const chartTemplate = (dist: string, name = "mutation-webhook.yaml") =>
  join(dist, `${pkg.pepr.uuid}-chart`, "templates", name);
const OVERLAY = join(REPO_ROOT, "scripts", "build-overlay.ts");
/** The build overlay on a directory laid out as dist/, with these settings in its environment. */
const runOverlay = (dist: string, env: Record<string, string> = {}) =>
  exec(process.execPath, ["--import", "tsx", OVERLAY, dist], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
  });

async function runStep(dist: string): Promise<{ code: number; stderr: string }> {
  try {
    await runOverlay(dist);
    return { code: 0, stderr: "" };
  } catch (e) {
    const err = e as { code: number; stderr: string };
    return { code: err.code, stderr: err.stderr };
  }
}

/** A copy of the manifest and the chart, the overlay's input, in a directory laid out as dist/. */
function distCopy(): string {
  const dir = mkdtempSync(join(tmpdir(), "admission-guard-dist-"));
  cpSync(moduleYamlPath(), join(dir, `pepr-module-${pkg.pepr.uuid}.yaml`));
  cpSync(join(REPO_ROOT, "dist", `${pkg.pepr.uuid}-chart`), join(dir, `${pkg.pepr.uuid}-chart`), {
    recursive: true,
  });
  return dir;
}

describe("deploy artifacts", () => {
  it("the module's Secret fits kubectl apply: its last-applied annotation holds at most 256 KiB", async () => {
    // `kubectl apply -f dist/pepr-module-<uuid>.yaml` copies each object into the annotation
    // kubectl.kubernetes.io/last-applied-configuration, which the API server caps at 262,144 bytes:
    // a bundle grown past it is refused (the real control plane's 00-deploy-manifest proves it).
    // Zod's locales alone once took 261 KB of the bundle (zod is imported as a namespace now).
    // Headroom: a change that adds 40 KB to the compressed module fails here first, saying what
    // the bundle holds (`npm run bundle:report`, docs/deploy.md).
    const bytes = secretBytes(moduleSecretOf(moduleYamlPath()));
    if (bytes >= SECRET_LIMIT)
      throw new Error(
        `the module Secret is ${bytes.toLocaleString("en")} bytes, past the ${SECRET_LIMIT.toLocaleString("en")} kept under kubectl apply's ${ANNOTATION_LIMIT.toLocaleString("en")}. ` +
          `Cut what the bundle need not hold:\n${formatReport(await bundleReport(REPO_ROOT, 8))}`,
      );
    expect(bytes).toBeLessThan(SECRET_LIMIT);
  });

  it("npm run bundle:report bundles as pepr build does (the Secret it measures is dist's, byte for byte) and names what comes from node_modules: zod, js-yaml, @swimlane/docker-reference, aws4", async () => {
    // The report bundles the tree as it is: dist/ must be built from it (npm run build), as for
    // every e2e test; a byte apart means the report's esbuild options are no longer Pepr's.
    const report = await bundleReport(REPO_ROOT, Infinity);
    expect(report.secretBytes).toBe(secretBytes(moduleSecretOf(moduleYamlPath())));
    expect(report.bundleBytes).toBe(
      statSync(join(REPO_ROOT, "dist", `pepr-${pkg.pepr.uuid}.js`)).size,
    );
    // What the bundle holds from node_modules, each with what it costs the Secret (everything else
    // Pepr's image has): a package newly imported by value shows here first.
    const bundled = report.packages.filter(p => p.dependency);
    // aws4: ECR's SigV4 for images.cloudCredentials (ADR 0039).
    expect(bundled.map(p => p.name).sort()).toEqual([
      "@swimlane/docker-reference",
      "aws4",
      "js-yaml",
      "zod",
    ]);
    for (const p of bundled) expect(p.secretSaved).toBeGreaterThan(0);
    expect(report.packages.filter(p => !p.dependency && p.secretSaved !== undefined)).toEqual([]);
    expect(report.packages.map(p => p.name)).toEqual(
      expect.arrayContaining(["lib/settings", "capabilities/resource-quota", "pepr.ts"]),
    );
    expect(report.duplicated).toEqual([]);
  });

  it("the manifest's mutating webhooks carry reinvocationPolicy IfNeeded; the validating ones need none", () => {
    const docs = parseAllDocuments(readFileSync(moduleYamlPath(), "utf8")).map(
      d => d.toJS() as KubeObject,
    );
    const kinds = docs.map(d => d.kind);
    expect(kinds).toContain("Deployment"); // the whole manifest survived the rewrite
    const mutating = docs.find(d => d.kind === "MutatingWebhookConfiguration")!;
    const webhooks = mutating.webhooks as { reinvocationPolicy?: string }[];
    expect(webhooks.length).toBeGreaterThan(0);
    for (const w of webhooks) expect(w.reinvocationPolicy).toBe("IfNeeded");
    const validating = docs.find(d => d.kind === "ValidatingWebhookConfiguration")!;
    for (const w of validating.webhooks as object[])
      expect(w).not.toHaveProperty("reinvocationPolicy");
  });

  it("so does the Helm chart's template, once per webhook", () => {
    const text = readFileSync(chartTemplate(join(REPO_ROOT, "dist")), "utf8");
    expect(text.match(/^\s*reinvocationPolicy: IfNeeded$/gm)).toHaveLength(
      text.match(/^\s*- admissionReviewVersions:/gm)!.length,
    );
  });

  it("the webhooks' rules name exactly the declared kinds, in the manifest and the chart, though Pepr binds whole API groups", () => {
    // The build's own settings and capabilities (as `pepr build` loaded them).
    const built = settingsFromEnv(moduleEnvironment(pkg.pepr.env));
    const routes = routesOf(policies, built, validators);
    expect(capabilities.flatMap(c => c.bindings).some(b => b.kind.plural === "*")).toBe(true);
    const docs = parseAllDocuments(readFileSync(moduleYamlPath(), "utf8")).map(
      d => d.toJS() as KubeObject,
    );
    for (const [step, kind, template] of [
      ["mutate", "MutatingWebhookConfiguration", "mutation-webhook.yaml"],
      ["validate", "ValidatingWebhookConfiguration", "validation-webhook.yaml"],
    ] as const) {
      const expected = webhookRules(routes, step);
      const webhooks = docs.find(d => d.kind === kind)!.webhooks as { rules: unknown }[];
      for (const w of webhooks) expect(w.rules).toEqual(expected);
      // The chart's template is YAML with Go actions: its rules block alone parses.
      const text = readFileSync(chartTemplate(join(REPO_ROOT, "dist"), template), "utf8");
      const block = /^ {4}rules:\n((?: {6}.*\n)+)/m.exec(text)![1];
      expect(parseDocument(block).toJS()).toEqual(expected);
    }
  });

  it("the chart's webhooks reach the controller at the manifest's path, with its CA, though Pepr's chart replaced each \"10\" in them with the timeout value", async () => {
    const dir = distCopy();
    const TIMEOUT = "{{ .Values.admission.webhookTimeout }}";
    try {
      const docs = parseAllDocuments(
        readFileSync(join(dir, `pepr-module-${pkg.pepr.uuid}.yaml`), "utf8"),
      ).map(d => d.toJS() as KubeObject);
      for (const [kind, template] of [
        ["MutatingWebhookConfiguration", "mutation-webhook.yaml"],
        ["ValidatingWebhookConfiguration", "validation-webhook.yaml"],
      ] as const) {
        const { clientConfig } = (
          docs.find(d => d.kind === kind)!.webhooks as {
            clientConfig: { caBundle: string; service: { path: string } };
          }[]
        )[0];
        const file = chartTemplate(dir, template);
        // What Pepr 1.1.4 writes when the path and the CA hold a "10" (a global replace).
        const text = readFileSync(file, "utf8");
        const pathLine = `          ${clientConfig.service.path}`;
        const caLine = `        ${clientConfig.caBundle}`;
        expect(text).toContain(`${pathLine}\n`);
        expect(text).toContain(`${caLine}\n`);
        const broken = (line: string) => `${line.slice(0, 20)}${TIMEOUT}${line.slice(20)}`;
        writeFileSync(
          file,
          text.replace(pathLine, broken(pathLine)).replace(caLine, broken(caLine)),
        );
        expect((await runStep(dir)).code).toBe(0);
        const mended = readFileSync(file, "utf8");
        expect(mended).toBe(text);
        // The timeout itself stays the chart's value.
        expect(mended.match(/webhookTimeout/g)).toHaveLength(1);
        expect(mended).toContain(`timeoutSeconds: ${TIMEOUT}`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("running the step again changes nothing", async () => {
    const dir = distCopy();
    try {
      const read = () => [
        readFileSync(join(dir, `pepr-module-${pkg.pepr.uuid}.yaml`), "utf8"),
        readFileSync(chartTemplate(dir), "utf8"),
        readFileSync(chartTemplate(dir, "validation-webhook.yaml"), "utf8"),
      ];
      const before = read();
      expect((await runStep(dir)).code).toBe(0);
      expect(read()).toEqual(before);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("fails, saying what it missed, when the chart template has no webhook it can set", async () => {
    const dir = distCopy();
    try {
      writeFileSync(chartTemplate(dir), "kind: MutatingWebhookConfiguration\nwebhooks: []\n");
      const result = await runStep(dir);
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(
        /webhook-client: .*mutation-webhook\.yaml: expected the line " {6}caBundle: >-" 1 time\(s\), found 0/,
      );
      rmSync(join(dir, `pepr-module-${pkg.pepr.uuid}.yaml`));
      expect((await runStep(dir)).stderr).toMatch(/pepr-module-.*\.yaml is missing/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it("writes nothing when an entry fails: dist/ stays as pepr build left it", async () => {
    const dir = distCopy();
    try {
      const manifest = join(dir, `pepr-module-${pkg.pepr.uuid}.yaml`);
      const deployment = join(
        dir,
        `${pkg.pepr.uuid}-chart`,
        "templates",
        "admission-deployment.yaml",
      );
      // admission-drain, after webhook-reinvocation and others, finds no anchor for its hook.
      writeFileSync(
        deployment,
        readFileSync(deployment, "utf8").replace("          ports:", "  ports:"),
      );
      const before = [manifest, chartTemplate(dir), deployment].map(f => readFileSync(f, "utf8"));
      const result = await runStep(dir);
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(
        /admission-drain: .*admission-deployment\.yaml: expected the line/,
      );
      expect([manifest, chartTemplate(dir), deployment].map(f => readFileSync(f, "utf8"))).toEqual(
        before,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("fails, naming it, when Pepr's manifest is not what an entry relies on (the ServiceAccount its RBAC names)", async () => {
    const dir = distCopy();
    try {
      const manifest = join(dir, `pepr-module-${pkg.pepr.uuid}.yaml`);
      const name = `pepr-${pkg.pepr.uuid}`;
      writeFileSync(
        manifest,
        readFileSync(manifest, "utf8").replaceAll(
          `serviceAccountName: ${name}\n`,
          `serviceAccountName: ${name}-renamed\n`,
        ),
      );
      const result = await runStep(dir);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(
        `image-credentials-rbac: Deployment ${name}: spec.template.spec.serviceAccountName is "${name}-renamed", expected "${name}"`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("image credentials RBAC (images.credentialsSecrets)", () => {
  const run = (dist: string, secrets: string) =>
    runOverlay(dist, { ADMISSION_GUARD_IMAGES_CREDENTIALS_SECRETS: secrets });
  const rbacOf = (dist: string) =>
    parseAllDocuments(readFileSync(join(dist, `pepr-module-${pkg.pepr.uuid}.yaml`), "utf8"))
      .map(d => d.toJS() as KubeObject)
      .filter(d => String(d.metadata?.name).endsWith("-image-credentials"));

  it("grants get on exactly the named Secrets in pepr-system to the admission ServiceAccount, in the manifest and the chart; once however often it runs", async () => {
    const dist = distCopy();
    try {
      await run(dist, "regcred,nvcr-pull");
      await run(dist, "regcred,nvcr-pull");
      const [role, binding] = rbacOf(dist);
      expect(role).toMatchObject({
        kind: "Role",
        metadata: { namespace: "pepr-system" },
        rules: [
          {
            apiGroups: [""],
            resources: ["secrets"],
            resourceNames: ["regcred", "nvcr-pull"],
            verbs: ["get"],
          },
        ],
      });
      expect(binding).toMatchObject({
        kind: "RoleBinding",
        subjects: [
          { kind: "ServiceAccount", name: `pepr-${pkg.pepr.uuid}`, namespace: "pepr-system" },
        ],
      });
      expect(rbacOf(dist)).toHaveLength(2);
      const chart = readFileSync(
        join(dist, `${pkg.pepr.uuid}-chart`, "templates", "image-credentials-role.yaml"),
        "utf8",
      );
      expect(chart).toContain("resourceNames:\n      - regcred\n      - nvcr-pull");
      // The setting emptied: the grant goes.
      await run(dist, "");
      expect(rbacOf(dist)).toEqual([]);
    } finally {
      rmSync(dist, { recursive: true, force: true });
    }
  });

  it("images.workloadPullSecrets (opt-in) adds get on Secrets in every namespace, named as such; off, it goes", async () => {
    const dist = distCopy();
    try {
      await runOverlay(dist, { ADMISSION_GUARD_IMAGES_WORKLOAD_PULL_SECRETS: "true" });
      const docs = parseAllDocuments(
        readFileSync(join(dist, `pepr-module-${pkg.pepr.uuid}.yaml`), "utf8"),
      ).map(d => d.toJS() as KubeObject);
      const role = docs.find(
        d =>
          d.metadata?.name === `pepr-${pkg.pepr.uuid}-workload-pull-secrets` &&
          d.kind === "ClusterRole",
      );
      expect(role?.rules).toEqual([{ apiGroups: [""], resources: ["secrets"], verbs: ["get"] }]);
      await run(dist, "");
      expect(readFileSync(join(dist, `pepr-module-${pkg.pepr.uuid}.yaml`), "utf8")).not.toContain(
        "workload-pull-secrets",
      );
    } finally {
      rmSync(dist, { recursive: true, force: true });
    }
  });

  it("the default build grants no Secret access at all", () => {
    const docs = parseAllDocuments(readFileSync(moduleYamlPath(), "utf8")).map(
      d => d.toJS() as KubeObject,
    );
    const rules = docs.flatMap(d => (d.rules as { resources?: string[] }[]) ?? []);
    expect(rules.filter(r => r.resources?.includes("secrets"))).toEqual([]);
  });
});

describe("OpenReports RBAC (reports.api)", () => {
  const grantOf = (dist: string) =>
    parseAllDocuments(readFileSync(join(dist, `pepr-module-${pkg.pepr.uuid}.yaml`), "utf8"))
      .map(d => d.toJS() as KubeObject)
      .filter(d => d.metadata?.name === `pepr-${pkg.pepr.uuid}-openreports`);

  it("openreports, both, auto: the module's ServiceAccount may get, write and remove openreports.io Reports, in the manifest and the chart; wgpolicyk8s: it goes", async () => {
    const dist = distCopy();
    try {
      for (const api of ["openreports", "both", "auto"]) {
        await runOverlay(dist, { ADMISSION_GUARD_REPORTS_API: api });
        const [role, binding, ...more] = grantOf(dist);
        expect(more).toEqual([]);
        expect(role).toMatchObject({
          kind: "ClusterRole",
          rules: [
            {
              apiGroups: ["openreports.io"],
              resources: ["reports"],
              verbs: ["get", "create", "patch", "delete"],
            },
          ],
        });
        expect(binding).toMatchObject({
          kind: "ClusterRoleBinding",
          roleRef: { kind: "ClusterRole", name: role.metadata?.name },
          subjects: [
            { kind: "ServiceAccount", name: `pepr-${pkg.pepr.uuid}`, namespace: "pepr-system" },
          ],
        });
      }
      const chart = readFileSync(
        join(dist, `${pkg.pepr.uuid}-chart`, "templates", "openreports-role.yaml"),
        "utf8",
      );
      expect(chart).toContain("- openreports.io");
      await runOverlay(dist, { ADMISSION_GUARD_REPORTS_API: "wgpolicyk8s" });
      expect(grantOf(dist)).toEqual([]);
      // With reports off there is nothing to write, whatever the API.
      await runOverlay(dist, {
        ADMISSION_GUARD_REPORTS_API: "openreports",
        ADMISSION_GUARD_REPORTS_ENABLED: "false",
      });
      expect(grantOf(dist)).toEqual([]);
    } finally {
      rmSync(dist, { recursive: true, force: true });
    }
    // Five runs of the overlay (~5 s each on a busy 2-core machine).
  }, 120_000);

  it("the default build grants nothing on openreports.io", () => {
    expect(readFileSync(moduleYamlPath(), "utf8")).not.toContain("openreports.io");
  });
});

describe("the watcher's memory (npm run bench:scale -- --memory-limit 512: 285 MiB settled, 357 MiB peak at 100,000 pods)", () => {
  it("the manifest and the Helm values give the watcher 384Mi requested, Pepr's 512Mi at most; the admission pods keep Pepr's", () => {
    const docs = parseAllDocuments(readFileSync(moduleYamlPath(), "utf8")).map(
      d => d.toJS() as KubeObject,
    );
    const deployments = docs.filter(d => d.kind === "Deployment");
    const memoryOf = (d: KubeObject) =>
      (
        d.spec as {
          template: {
            spec: { containers: { resources: Record<string, Record<string, string>> }[] };
          };
        }
      ).template.spec.containers[0].resources;
    const watcher = deployments.find(d => String(d.metadata?.name).endsWith("-watcher"))!;
    const admission = deployments.find(d => !String(d.metadata?.name).endsWith("-watcher"))!;
    expect(memoryOf(watcher)).toMatchObject({
      requests: { memory: "384Mi" },
      limits: { memory: "512Mi" },
    });
    expect(memoryOf(admission)).toMatchObject({ limits: { memory: "512Mi" } });
    const values = readFileSync(
      join(REPO_ROOT, "dist", `${pkg.pepr.uuid}-chart`, "values.yaml"),
      "utf8",
    );
    expect(values).toMatch(
      /watcher:[\s\S]*resources:\s*\n\s*requests:\s*\n\s*memory: '?384Mi'?[\s\S]*limits:\s*\n\s*memory: '?512Mi'?/,
    );
  });
});

describe("issue 26: the install's doors (scripts/overlay/entries.ts: admission-drain, exemptions-namespace, ignored-namespaces, namespace-keys-policy)", () => {
  const runGuards = runOverlay;
  const docsOf = (dist: string) =>
    parseAllDocuments(readFileSync(join(dist, `pepr-module-${pkg.pepr.uuid}.yaml`), "utf8")).map(
      d => d.toJS() as KubeObject,
    );
  const chartFile = (dist: string, file: string) =>
    readFileSync(join(dist, `${pkg.pepr.uuid}-chart`, file), "utf8");
  type Hook = { exec?: { command: string[] }; httpGet?: unknown };
  const preStopOf = (docs: KubeObject[]): Hook => {
    const admission = docs.find(
      d => d.kind === "Deployment" && d.metadata?.name === `pepr-${pkg.pepr.uuid}`,
    )!;
    return (
      admission.spec as {
        template: { spec: { containers: { lifecycle: { preStop: Hook } }[] } };
      }
    ).template.spec.containers[0].lifecycle.preStop;
  };

  it("the drain is an exec inside the controller's container calling 127.0.0.1, not a request from outside the pod", () => {
    const hook = preStopOf(docsOf(join(REPO_ROOT, "dist")));
    expect(hook.httpGet).toBeUndefined();
    expect(hook.exec!.command.slice(0, 2)).toEqual(["node", "-e"]);
    expect(hook.exec!.command[2]).toContain(
      'host:"127.0.0.1",port:3000,path:"/admission-guard/drain"',
    );
    const template = chartFile(join(REPO_ROOT, "dist"), "templates/admission-deployment.yaml");
    expect(template).not.toMatch(/httpGet:\s*\n\s*path: \/admission-guard\/drain/);
    expect(template).toContain("exec:");
    expect(template).toContain(JSON.stringify(hook.exec!.command[2]));
  });

  it("the install creates the Exemptions namespace, labelled as its own (manifest and chart)", () => {
    const ns = docsOf(join(REPO_ROOT, "dist")).find(
      d => d.kind === "Namespace" && d.metadata?.name === "admission-guard-exemptions",
    );
    expect(ns?.metadata?.labels).toEqual({
      "app.kubernetes.io/managed-by": "admission-guard",
      "admission-guard.dev/owned-by": pkg.pepr.uuid,
    });
    expect(chartFile(join(REPO_ROOT, "dist"), "templates/exemptions-namespace.yaml")).toContain(
      `admission-guard.dev/owned-by: ${pkg.pepr.uuid}`,
    );
  });

  it("the validating webhook is sent Exemptions from every namespace it sees, not only the Exemptions namespace, so a misplaced one is refused", () => {
    const validating = docsOf(join(REPO_ROOT, "dist")).find(
      d => d.kind === "ValidatingWebhookConfiguration",
    )!;
    type Webhook = {
      rules: { apiGroups: string[]; resources: string[]; operations: string[] }[];
      namespaceSelector: { matchExpressions: { operator: string; values: string[] }[] };
      objectSelector?: unknown;
    };
    for (const w of validating.webhooks as Webhook[]) {
      expect(w.rules).toContainEqual(
        expect.objectContaining({
          apiGroups: ["admission-guard.dev"],
          resources: ["exemptions"],
          operations: ["CREATE", "UPDATE"],
        }),
      );
      // Only the system and ignored namespaces are left out; no selector narrows it further.
      expect(w.namespaceSelector.matchExpressions.map(e => e.operator)).toEqual(["NotIn"]);
      expect(w.namespaceSelector.matchExpressions[0].values).not.toContain(
        "admission-guard-exemptions",
      );
      expect(w.objectSelector ?? {}).toEqual({});
    }
  });

  // Issue 40: a tenant's own admission-guard.dev/mode=off gives more than Pod Security's labels.
  const POLICY = `pepr-${pkg.pepr.uuid}-namespace-keys`;
  const policyOf = (docs: KubeObject[]) =>
    docs.filter(
      d =>
        /^ValidatingAdmissionPolicy(Binding)?$/.test(String(d.kind)) && d.metadata?.name === POLICY,
    );
  type Policy = {
    matchConditions: { expression: string }[];
    validations: { expression: string; message: string }[];
  };
  /**
   * The chart's template as Helm renders it with these values: its `if` and the one action that
   * writes the admins (printf of two toJson, then quote: a Go-quoted string, JSON's form here).
   */
  const renderChart = (
    text: string,
    values: { enabled: boolean; adminUsers: string[]; adminGroups: string[] },
  ) => {
    const body = text.match(
      /^\{\{- if \.Values\.namespaceKeysPolicy\.enabled \}\}\n([\s\S]*)\{\{- end \}\}\n$/,
    );
    if (!body) throw new Error("the template is not one if-block");
    if (!values.enabled) return [];
    const rendered = body[1].replace(
      /\{\{ printf ("(?:[^"\\]|\\.)*") \(toJson \.Values\.namespaceKeysPolicy\.adminUsers\) \(toJson \.Values\.namespaceKeysPolicy\.adminGroups\) \| quote \}\}/,
      (_, format: string) => {
        const parts = (JSON.parse(format) as string).split("%s");
        expect(parts).toHaveLength(3);
        return JSON.stringify(
          parts[0] +
            JSON.stringify(values.adminUsers) +
            parts[1] +
            JSON.stringify(values.adminGroups) +
            parts[2],
        );
      },
    );
    expect(rendered).not.toContain("{{");
    return parseAllDocuments(rendered).map(d => d.toJS() as KubeObject);
  };

  it("the namespace-keys policy is in the manifest by default: policy then binding, after the Exemptions namespace, for system:masters", () => {
    const dist = join(REPO_ROOT, "dist");
    const docs = docsOf(dist);
    const [policy, binding] = policyOf(docs);
    expect([policy?.kind, binding?.kind]).toEqual([
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding",
    ]);
    // One `kubectl apply -f`: the install labels its Exemptions namespace (owned-by) before the
    // policy exists, and the binding comes with its policy.
    const at = (d: KubeObject) => docs.indexOf(d);
    const exemptions = docs.find(
      d => d.kind === "Namespace" && d.metadata?.name === "admission-guard-exemptions",
    )!;
    expect(at(exemptions)).toBeLessThan(at(policy));
    expect(at(policy)).toBeLessThan(at(binding));
    expect(binding.spec).toEqual({ policyName: POLICY, validationActions: ["Deny"] });
    const spec = policy.spec as Policy;
    expect(spec.matchConditions[0].expression).toBe(
      '!(request.userInfo.username in []) && !(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ["system:masters"]))',
    );
    expect(spec.validations.map(v => v.message)).toEqual([
      expect.stringMatching(/^admission-guard\/namespace-keys: .*labels\. Fix: /),
      expect.stringMatching(/^admission-guard\/namespace-keys: .*annotations\. Fix: /),
    ]);
    // The file of its own holds the same objects (for a build that turned the policy off).
    const file = parseAllDocuments(
      readFileSync(join(dist, "admission-guard-namespace-keys-vap.yaml"), "utf8"),
    ).map(d => d.toJS() as KubeObject);
    expect(file).toEqual([policy, binding]);
  });

  it("the chart's value is on by default and its template renders the manifest's policy; off renders none", () => {
    const dist = join(REPO_ROOT, "dist");
    const values = parseDocument(chartFile(dist, "values.yaml")).toJS() as {
      namespaceKeysPolicy: { enabled: boolean; adminUsers: string[]; adminGroups: string[] };
    };
    expect(values.namespaceKeysPolicy).toEqual({
      enabled: true,
      adminGroups: ["system:masters"],
      adminUsers: [],
    });
    const template = chartFile(dist, "templates/namespace-keys-policy.yaml");
    expect(renderChart(template, values.namespaceKeysPolicy)).toEqual(policyOf(docsOf(dist)));
    expect(renderChart(template, { ...values.namespaceKeysPolicy, enabled: false })).toEqual([]);
    // A managed cluster's admins: their group and user reach the CEL as Helm writes them.
    const [managed] = renderChart(template, {
      enabled: true,
      adminGroups: ["system:masters", "eks:cluster-admins"],
      adminUsers: ["alice@example.com"],
    });
    expect((managed.spec as Policy).matchConditions[0].expression).toBe(
      '!(request.userInfo.username in ["alice@example.com"]) && !(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ["system:masters","eks:cluster-admins"]))',
    );
  });

  it("namespaceKeysPolicy settings at build: off takes the policy out of the manifest and the chart's default; admin groups reach both; on again puts it back", async () => {
    const dist = distCopy();
    try {
      await runGuards(dist, { ADMISSION_GUARD_NAMESPACE_KEYS_POLICY_ENABLED: "false" });
      expect(policyOf(docsOf(dist))).toEqual([]);
      expect(chartFile(dist, "values.yaml")).toMatch(/namespaceKeysPolicy:\n\s+enabled: false/);
      // Still shipped on its own, for an admin who applies it later.
      expect(
        parseAllDocuments(
          readFileSync(join(dist, "admission-guard-namespace-keys-vap.yaml"), "utf8"),
        ),
      ).toHaveLength(2);
      await runGuards(dist, {
        ADMISSION_GUARD_NAMESPACE_KEYS_POLICY_ADMIN_GROUPS: "system:masters,platform-admins",
        ADMISSION_GUARD_NAMESPACE_KEYS_POLICY_ADMIN_USERS: "alice@example.com",
      });
      const [policy, ...rest] = policyOf(docsOf(dist));
      expect(rest).toHaveLength(1); // its binding, once however often the overlay runs
      expect((policy.spec as Policy).matchConditions[0].expression).toContain(
        'username in ["alice@example.com"]',
      );
      expect((policy.spec as Policy).matchConditions[0].expression).toContain(
        'g in ["system:masters","platform-admins"]',
      );
      expect(chartFile(dist, "values.yaml")).toMatch(
        /namespaceKeysPolicy:\n\s+enabled: true\n\s+adminGroups:\n\s+- system:masters\n\s+- platform-admins\n\s+adminUsers:\n\s+- alice@example.com\n/,
      );
      // A name that would break out of the CEL string stops the build.
      await expect(
        runGuards(dist, {
          ADMISSION_GUARD_NAMESPACE_KEYS_POLICY_ADMIN_GROUPS: 'x"] || true || ["',
        }),
      ).rejects.toMatchObject({
        stderr: expect.stringMatching(/namespaceKeysPolicy\.adminGroups/),
      });
    } finally {
      rmSync(dist, { recursive: true, force: true });
    }
  });

  it("the install writes no namespace key after it is applied: the controller may not write namespaces", () => {
    // Its only namespace labels are the Exemptions namespace's, applied by whoever installs (an
    // admin). The controller's own ServiceAccount reads namespaces and never writes them.
    const { objects } = loadModuleRbac();
    const namespaceVerbs = objects
      .filter(o => /Role$/.test(String(o.kind)))
      .flatMap(
        o => (o.rules ?? []) as { apiGroups?: string[]; resources?: string[]; verbs?: string[] }[],
      )
      .filter(
        r =>
          r.apiGroups?.includes("") &&
          (r.resources?.includes("namespaces") || r.resources?.includes("*")),
      )
      .flatMap(r => r.verbs ?? []);
    expect(namespaceVerbs.length).toBeGreaterThan(0);
    expect(namespaceVerbs.filter(v => !["get", "list", "watch"].includes(v))).toEqual([]);
    const labelled = docsOf(join(REPO_ROOT, "dist"))
      .filter(d => d.kind === "Namespace")
      .filter(d =>
        Object.keys({
          ...d.metadata?.labels,
          ...(d.metadata as { annotations?: object })?.annotations,
        }).some(k => k.startsWith("admission-guard.dev/")),
      )
      .map(d => d.metadata?.name);
    expect(labelled).toEqual(["admission-guard-exemptions"]);
  });

  it("ships the webhook NetworkPolicy opt-in (issue 40): the admission pods' serving port from listed sources only; a file of its own and a chart value off by default, none in the manifest", () => {
    const dist = join(REPO_ROOT, "dist");
    const [policy, ...more] = parseAllDocuments(
      readFileSync(join(dist, "admission-guard-webhook-networkpolicy.yaml"), "utf8"),
    ).map(d => d.toJS() as KubeObject);
    expect(more).toEqual([]);
    expect(policy.kind).toBe("NetworkPolicy");
    const spec = policy.spec as {
      podSelector: { matchLabels: Record<string, string> };
      ingress: { ports: { port: number }[]; from: object[] }[];
    };
    // It selects the admission pods (not the watcher) and names the port they serve on, which
    // is the Service's targetPort: a NetworkPolicy sees the pod's port, not the Service's 443.
    const docs = docsOf(dist);
    const admission = docs.find(
      d => d.kind === "Deployment" && d.metadata?.name === `pepr-${pkg.pepr.uuid}`,
    )!;
    const template = (
      admission.spec as {
        template: {
          metadata: { labels: Record<string, string> };
          spec: { containers: { ports: { containerPort: number }[] }[] };
        };
      }
    ).template;
    expect(template.metadata.labels).toMatchObject(spec.podSelector.matchLabels);
    expect(spec.podSelector.matchLabels["pepr.dev/controller"]).toBe("admission");
    const service = docs.find(
      d => d.kind === "Service" && d.metadata?.name === `pepr-${pkg.pepr.uuid}`,
    )!;
    const port = (service.spec as { ports: { targetPort: number }[] }).ports[0].targetPort;
    expect(spec.ingress.map(rule => rule.ports.map(p => p.port))).toEqual([[port]]);
    expect(template.spec.containers[0].ports[0].containerPort).toBe(port);
    // Never a rule without sources (that admits everyone): the file's placeholder is no address.
    expect(spec.ingress[0].from).toEqual([{ ipBlock: { cidr: "API-SERVER-CIDR" } }]);
    expect(docs.filter(d => d.kind === "NetworkPolicy")).toEqual([]);
    const chart = chartFile(dist, "templates/webhook-network-policy.yaml");
    expect(chart).toMatch(/\{\{- fail "webhookNetworkPolicy\.enabled needs cidrs or peers/);
    expect(chart).toMatch(/^\{\{- if \.Values\.webhookNetworkPolicy\.enabled \}\}$/m);
    expect(chart).toContain("{{- range .Values.webhookNetworkPolicy.cidrs }}");
    expect(chartFile(dist, "values.yaml")).toMatch(
      /webhookNetworkPolicy:\n\s+enabled: false\n\s+cidrs: \[\]\n\s+peers: \[\]/,
    );
  });

  it("settings ignoredNamespaces join the system ones in every webhook's namespaceSelector and the chart's values; once however often it runs", async () => {
    const dist = distCopy();
    try {
      const ignored = { ADMISSION_GUARD_IGNORED_NAMESPACES: "cert-manager,gpu-operator" };
      await runGuards(dist, ignored);
      await runGuards(dist, ignored);
      const docs = docsOf(dist);
      const selectors = docs
        .filter(d => /WebhookConfiguration$/.test(String(d.kind)))
        .flatMap(d => d.webhooks as { namespaceSelector: { matchExpressions: object[] } }[])
        .map(w => w.namespaceSelector.matchExpressions);
      expect(selectors.length).toBeGreaterThan(1);
      for (const expressions of selectors)
        expect(expressions).toContainEqual({
          key: "kubernetes.io/metadata.name",
          operator: "NotIn",
          values: [
            "kube-system",
            "pepr-system",
            "kube-public",
            "kube-node-lease",
            "cert-manager",
            "gpu-operator",
          ],
        });
      expect(docs.filter(d => d.kind === "Namespace").map(d => d.metadata?.name)).toEqual([
        "pepr-system",
        "admission-guard-exemptions",
      ]);
      expect(chartFile(dist, "values.yaml")).toMatch(
        /additionalIgnoredNamespaces:\n(\s+- '?[a-z-]+'?\n)*\s+- cert-manager\n\s+- gpu-operator\n/,
      );
      // Dropped from the setting: gone from the selector, the system ones stay.
      await runGuards(dist);
      const values = (
        docsOf(dist).find(d => d.kind === "MutatingWebhookConfiguration")!.webhooks as {
          namespaceSelector: { matchExpressions: { values: string[] }[] };
        }[]
      )[0].namespaceSelector.matchExpressions[0].values;
      expect(values).toEqual(["kube-system", "pepr-system", "kube-public", "kube-node-lease"]);
    } finally {
      rmSync(dist, { recursive: true, force: true });
    }
  });

  it("a setting that cannot work stops the build, naming it", async () => {
    const dist = distCopy();
    try {
      await expect(
        runGuards(dist, {
          ADMISSION_GUARD_IGNORED_NAMESPACES: "admission-guard-exemptions",
        }),
      ).rejects.toMatchObject({ stderr: expect.stringMatching(/exemptions\.namespace/) });
    } finally {
      rmSync(dist, { recursive: true, force: true });
    }
  });
});
