// The built module installed in the real control plane, as `npx pepr dev` runs it: the RBAC and
// webhook configurations `npm run build` wrote into dist/pepr-module-<uuid>.yaml, applied as they
// are, except that each webhook's clientConfig points by URL at a controller on this machine (as
// `pepr dev` does) instead of at the in-cluster Service. The controller is the built bundle,
// authenticated with a token of the module's own ServiceAccount: the generated ClusterRole and Role
// decide what it may do. No Deployment, Service or Secret is applied (there is no kubelet). In a
// cluster, Pepr's runtime wrapper in the controller pod applies the PeprStore CRD before it forks
// the module; the bundle run here does not, so the harness does it with the module's own token.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { parseAllDocuments } from "yaml";
import { peprStoreCRD } from "pepr/src/lib/assets/store";
import type { KubeObject } from "../../../lib/objects/pod";
import { createTestCerts, type TestCerts } from "../../support/certs";
import {
  bundlePath,
  freePort,
  startController,
  startWatcher,
  type Controller,
} from "../../support/controller";
import { moduleYamlPath } from "../../support/module-rbac";
import { kubeconfigYaml } from "../../support/kubeconfig";
import { eventually } from "../../support/wait";
import { KubeClient, pathOf, statusMessage } from "./kube-client";

const WEBHOOK_KINDS = ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"];
/** What the module needs to run in a cluster, besides its Deployment, Service and Secrets. */
const INSTALLED_KINDS = [
  "Namespace",
  "ServiceAccount",
  "ClusterRole",
  "ClusterRoleBinding",
  "Role",
  "RoleBinding",
  // What the module's own ServiceAccount may change in its webhook configurations (only arming),
  // and who may set admission-guard.dev/* namespace keys (system:masters, as the admin here).
  "ValidatingAdmissionPolicy",
  "ValidatingAdmissionPolicyBinding",
];

interface Webhook {
  name: string;
  clientConfig: { service?: { path?: string }; url?: string; caBundle?: string };
  failurePolicy?: string;
}

export interface ModuleManifest {
  docs: KubeObject[];
  /** The controller's ServiceAccount (the one the admission Deployment runs as). */
  serviceAccount: { namespace: string; name: string };
  /** The secret path segment the generated webhooks call: /mutate/<apiPath>, /validate/<apiPath>. */
  apiPath: string;
  webhookConfigurations: KubeObject[];
}

export function readModuleManifest(path = moduleYamlPath()): ModuleManifest {
  const docs = parseAllDocuments(readFileSync(path, "utf8"))
    .map(d => d.toJS() as KubeObject)
    .filter(Boolean);
  const deployment = docs.find(
    d => d.kind === "Deployment" && !String(d.metadata?.name).endsWith("-watcher"),
  );
  const saName = (deployment?.spec as { template?: { spec?: { serviceAccountName?: string } } })
    ?.template?.spec?.serviceAccountName;
  if (!deployment || !saName) throw new Error(`${path}: no admission Deployment`);
  const webhookConfigurations = docs.filter(d => WEBHOOK_KINDS.includes(String(d.kind)));
  const servicePath = (webhookConfigurations[0]?.webhooks as Webhook[] | undefined)?.[0]
    ?.clientConfig.service?.path;
  const apiPath = /^\/(?:mutate|validate)\/([0-9a-f]+)$/.exec(servicePath ?? "")?.[1];
  if (!apiPath) throw new Error(`${path}: no webhook with a /mutate or /validate service path`);
  return {
    docs,
    serviceAccount: { namespace: String(deployment.metadata?.namespace), name: saName },
    apiPath,
    webhookConfigurations,
  };
}

/** A webhook configuration as generated, its client config pointed at https://127.0.0.1:<port>. */
export function pointedAt(config: KubeObject, port: number, caPem: string): KubeObject {
  const copy = structuredClone(config);
  for (const webhook of copy.webhooks as Webhook[]) {
    const path = webhook.clientConfig.service?.path;
    if (!path) throw new Error(`webhook ${webhook.name} has no service path`);
    webhook.clientConfig = {
      url: `https://127.0.0.1:${port}${path}`,
      caBundle: Buffer.from(caPem).toString("base64"),
    };
  }
  return copy;
}

export interface InstalledModule {
  manifest: ModuleManifest;
  controller: Controller;
  /** Pepr's watcher (the module's Watch bindings), when InstallOptions.watcher asked for it. */
  watcher?: Controller;
  /** Stops the controller; its webhooks stay registered (the API server then fails closed). */
  stopController(): Promise<void>;
  /** Starts the controller again on the same port and path. */
  startController(): Promise<void>;
  /** Stops the controller and removes its webhook configurations. */
  uninstall(): Promise<void>;
}

async function must<T extends { status: number; text: string }>(what: string, call: Promise<T>) {
  const res = await call;
  if (res.status >= 300) throw new Error(`${what}: HTTP ${res.status} ${res.text.slice(0, 500)}`);
  return res;
}

export interface InstallOptions {
  /** The controller's environment: settings as ADMISSION_GUARD_*, LOG_LEVEL. */
  env?: Record<string, string>;
  /** The output directory of another build (variant-build.ts); default: this repo's dist/. */
  dist?: string;
  /**
   * Also run the watcher, as the watcher Deployment `pepr build` writes runs it: the same bundle
   * and ServiceAccount, PEPR_WATCH_MODE=true.
   */
  watcher?: boolean;
}

export async function installModule(
  admin: KubeClient,
  caPem: string,
  options: InstallOptions = {},
): Promise<InstalledModule> {
  const manifest = readModuleManifest(
    options.dist ? join(options.dist, basename(moduleYamlPath())) : undefined,
  );
  for (const doc of manifest.docs.filter(d => INSTALLED_KINDS.includes(String(d.kind))))
    await must(`applying ${doc.kind} ${doc.metadata?.name}`, admin.apply(pathOf(doc), doc));

  const { namespace, name } = manifest.serviceAccount;
  const tokenRequest = await must(
    `a token for ServiceAccount ${namespace}/${name}`,
    admin.create(`/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`, {
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenRequest",
      spec: { expirationSeconds: 4 * 3600 },
    }),
  );
  const token = (tokenRequest.body.status as { token: string }).token;
  const dir = mkdtempSync(join(tmpdir(), "admission-guard-module-"));
  const kubeconfigPath = join(dir, "kubeconfig");
  writeFileSync(kubeconfigPath, kubeconfigYaml(admin.server, caPem, { token }), { mode: 0o600 });
  const asModule = new KubeClient(admin.server, caPem, { token });
  await must(
    "applying the PeprStore CRD as the module's ServiceAccount",
    asModule.apply(
      `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${peprStoreCRD.metadata!.name}`,
      peprStoreCRD,
    ),
  );
  asModule.close();
  const certs: TestCerts = createTestCerts();
  const port = await freePort();
  const controllerOptions = {
    api: { url: admin.server, kubeconfigPath, certs },
    bundle: options.dist ? join(options.dist, basename(bundlePath())) : undefined,
    port,
    apiPath: manifest.apiPath,
    env: options.env,
  };

  const installed: InstalledModule = {
    manifest,
    controller: await startController(controllerOptions),
    watcher: options.watcher
      ? await startWatcher({ ...controllerOptions, port: await freePort() })
      : undefined,
    async stopController() {
      await installed.controller.stop();
    },
    async startController() {
      installed.controller = await startController(controllerOptions);
    },
    async uninstall() {
      for (const config of manifest.webhookConfigurations) {
        const res = await admin.delete(pathOf(config));
        if (res.status >= 300 && res.status !== 404)
          throw new Error(`deleting ${config.kind}: ${statusMessage(res)}`);
      }
      await installed.controller.stop();
      await installed.watcher?.stop();
      rmSync(dir, { recursive: true, force: true });
      rmSync(certs.dir, { recursive: true, force: true });
    },
  };
  try {
    for (const config of manifest.webhookConfigurations)
      await must(
        `registering ${config.kind}`,
        admin.apply(
          pathOf(config, `${String(config.kind).toLowerCase()}s`),
          pointedAt(config, port, certs.caPem),
        ),
      );
    // Registered as built (failurePolicy Ignore): the controller arms them (lib/webhooks) within
    // a round or two; the tests that follow expect the module as it runs once installed.
    if (options.env?.ADMISSION_GUARD_WEBHOOKS_FAILURE_POLICY !== "Ignore")
      await eventually(
        async () => {
          for (const config of manifest.webhookConfigurations) {
            const res = await admin.get(pathOf(config));
            const policies = (res.body.webhooks as Webhook[]).map(w => w.failurePolicy);
            if (policies.some(p => p !== "Fail"))
              throw new Error(`${config.kind} not armed: ${policies.join(", ")}`);
          }
        },
        20_000,
        200,
      );
  } catch (e) {
    await installed.uninstall();
    throw e;
  }
  return installed;
}
