// The real deploy on the node: the unchanged output of `pepr build` (dist/pepr-module-<uuid>.yaml)
// applied as `npx pepr deploy` applies it, the controller running as pods of Pepr's controller
// image (built here from this machine's Node.js and this repository's node_modules), behind its
// Service, under its own ServiceAccount. The API server calls the webhook through the Service
// (kube-proxy), the pods reach the API server through the kubernetes Service. Deleting the
// manifest leaves a cluster where pods are created normally.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import type { KubeObject } from "../../lib/objects/pod";
import { moduleYamlPath } from "../support/module-rbac";
import { REPO_ROOT } from "../support/controller";
import { eventually } from "../support/wait";
import {
  applyObjects,
  connect,
  exportSnapshot,
  kubectl,
  namespace,
} from "../cluster/support/cluster";
import { readModuleManifest } from "../cluster/support/module";
import { buildControllerImage } from "./support/controller-image";
import { removeNamespaces, seedNamespaces, serverContainer, table } from "./support/workloads";
import { runCheck } from "../support/check-command";

/** One line of `check -o json`, as far as this file reads it. */
interface CheckVerdict {
  source: { file: string };
  kind: string;
  name: string;
  handled: boolean;
  allowed: boolean;
  violations: { capability: string; message: string; fix: string; severity: string }[];
}

const cluster = connect();
const registry = cluster.node!.registry!;
const manifest = readModuleManifest();
const NS = "deployed";
const MODULE_NS = manifest.serviceAccount.namespace;
const admissionName = () =>
  manifest.docs.find(
    d => d.kind === "Deployment" && !String(d.metadata?.name).endsWith("-watcher"),
  )!.metadata!.name!;

/** This host's address on the pods' bridge (the CNI bridge plugin's gateway). */
function bridgeAddress(): string {
  const out = execFileSync("ip", ["-4", "-o", "addr", "show", "agnode0"], { encoding: "utf8" });
  const address = /inet (\d+\.\d+\.\d+\.\d+)\//.exec(out)?.[1];
  if (!address) throw new Error(`no IPv4 address on the pods' bridge: ${out}`);
  return address;
}

const ctr = (...args: string[]) =>
  execFileSync("ctr", ["--address", cluster.node!.containerdSocket, "-n", "k8s.io", ...args], {
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
  });

async function readyReplicas(name: string): Promise<number> {
  const d = await cluster.admin.get(`/apis/apps/v1/namespaces/${MODULE_NS}/deployments/${name}`);
  return Number((d.body.status as { readyReplicas?: number } | undefined)?.readyReplicas ?? 0);
}

const pod = (name: string): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: NS, labels: { app: "serve" } },
  spec: {
    containers: [serverContainer(registry)],
  },
});

beforeAll(async () => {
  // Pods reach the API server through the kubernetes Service: its endpoint is this host on the
  // bridge (the API server binds every address on the node tier). The bridge exists once a pod ran.
  await applyObjects(cluster, [namespace(NS)]);
  try {
    bridgeAddress();
  } catch {
    await cluster.admin.create(`/api/v1/namespaces/${NS}/pods`, pod("bridge"));
    await eventually(() => bridgeAddress(), 60_000, 500);
  }
  const port = Number(new URL(cluster.server).port);
  await applyObjects(cluster, [
    {
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: {
        name: "kubernetes-node-tier",
        namespace: "default",
        labels: { "kubernetes.io/service-name": "kubernetes" },
      },
      addressType: "IPv4",
      endpoints: [{ addresses: [bridgeAddress()], conditions: { ready: true } }],
      ports: [{ name: "https", port, protocol: "TCP" }],
    } as KubeObject,
  ]);
  const dir = mkdtempSync(join(cluster.dir, "controller-image-"));
  try {
    ctr("images", "import", buildControllerImage(dir).archive);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 300_000);

/** The module's webhook configurations' failure policies, by kind (absent: undefined). */
async function failurePolicies(): Promise<Record<string, string[] | undefined>> {
  const found: Record<string, string[] | undefined> = {};
  for (const config of manifest.webhookConfigurations) {
    const kind = String(config.kind);
    const res = await cluster.admin.get(
      `/apis/admissionregistration.k8s.io/v1/${kind.toLowerCase()}s/${config.metadata?.name}`,
    );
    found[kind] =
      res.status === 200
        ? (res.body.webhooks as { failurePolicy: string }[]).map(w => w.failurePolicy)
        : undefined;
  }
  return found;
}
const everyWebhook = (policy: string) =>
  Object.fromEntries(
    manifest.webhookConfigurations.map(c => [
      String(c.kind),
      (c.webhooks as unknown[]).map(() => policy),
    ]),
  );

// Where the image cannot be pulled (a typo, an air-gapped cluster that has not mirrored it): the
// controller never starts, and `pepr deploy` waits for a rollout that never comes.
const UNPULLABLE = "127.0.0.1:9/admission-guard/not-mirrored:v0";

test("npx pepr deploy with a controller image that cannot be pulled: no replica Ready, pods still created (no lock-out)", async () => {
  const deploy = spawn("npx", ["pepr", "deploy", "--yes", "--image", UNPULLABLE], {
    cwd: REPO_ROOT,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "",
      KUBECONFIG: cluster.adminKubeconfig,
    },
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  deploy.stdout!.on("data", c => (output += c));
  deploy.stderr!.on("data", c => (output += c));
  try {
    // It applies the webhook configurations first, then RBAC, the Deployments and their Secrets.
    await eventually(
      async () => {
        expect(await failurePolicies()).toEqual(everyWebhook("Ignore"));
        const pods = await cluster.admin.get(
          `/api/v1/namespaces/${MODULE_NS}/pods?labelSelector=${encodeURIComponent("pepr.dev/controller=admission")}`,
        );
        const waiting = ((pods.body.items as KubeObject[]) ?? []).map(
          p =>
            (p.status as { containerStatuses?: { state?: { waiting?: { reason?: string } } }[] })
              ?.containerStatuses?.[0]?.state?.waiting?.reason,
        );
        expect(waiting.length).toBe(2);
        for (const reason of waiting) expect(reason).toMatch(/ErrImagePull|ImagePullBackOff/);
      },
      240_000,
      1000,
    ).catch(e => {
      throw new Error(`${(e as Error).message}\npepr deploy said:\n${output.slice(-3000)}`);
    });
    expect(deploy.exitCode).toBeNull(); // still waiting for its rollout
    const r = await underLoad(NS, () => new Promise(res => setTimeout(res, 3000)), 5, 0);
    record("npx pepr deploy, image not pullable (no replica Ready)", r);
    expect(r.refused).toEqual([]);
    expect(r.admitted).toBeGreaterThan(0);
    // Nothing answers, so nothing armed them.
    expect(await failurePolicies()).toEqual(everyWebhook("Ignore"));
  } finally {
    if (deploy.exitCode === null) process.kill(-deploy.pid!, "SIGTERM");
  }
}, 360_000);

test("kubectl apply of the generated manifest: the admission Deployment (2 replicas) and the watcher become Ready", async () => {
  // Server-side, as `pepr deploy` applies it (the namespace and RBAC exist from the earlier files).
  const applied = await kubectl(cluster, [
    "apply",
    "--server-side",
    "--force-conflicts",
    "-f",
    moduleYamlPath(),
  ]);
  expect([applied.code, applied.stderr]).toEqual([0, ""]);
  const admission = admissionName();
  await eventually(
    async () => {
      expect(await readyReplicas(admission)).toBe(2);
      expect(await readyReplicas(`${admission}-watcher`)).toBe(1);
    },
    180_000,
    1000,
  );
  // Installed failing open, armed by the controller once a replica is Ready behind the Service.
  await eventually(
    async () => expect(await failurePolicies()).toEqual(everyWebhook("Fail")),
    60_000,
    500,
  );
}, 300_000);

test("a pod is fixed by the in-cluster controller, called through its Service, and runs", async () => {
  const created = await eventually(
    async () => {
      const result = await kubectl(
        cluster,
        ["apply", "-f", "-"],
        stringify(pod("through-service")),
      );
      if (result.code !== 0) throw new Error(result.stderr);
      return result;
    },
    60_000,
    1000,
  );
  expect(created.stderr).toContain("admission-guard/security-context");
  const stored = (await cluster.admin.get(`/api/v1/namespaces/${NS}/pods/through-service`)).body;
  expect(stored.metadata?.annotations?.["admission-guard.dev/fixed"]).toContain(
    "security-context/",
  );
  await eventually(
    async () => {
      const p = (await cluster.admin.get(`/api/v1/namespaces/${NS}/pods/through-service`)).body;
      expect((p.status as { phase?: string }).phase).toBe("Running");
    },
    60_000,
    500,
  );
}, 120_000);

test("the seeds through the in-cluster controller: the verdicts `check` gives on a snapshot of this cluster", async () => {
  // The seeds' namespaces as their field reports describe them (seedNamespaces, as 20-seeds).
  await applyObjects(cluster, [
    ...seedNamespaces(),
    {
      apiVersion: "v1",
      kind: "ResourceQuota",
      metadata: { name: "compute-resources", namespace: "mlflow-prod" },
      spec: { hard: { "limits.cpu": "2", "limits.memory": "4Gi" } },
    } as KubeObject,
  ]);
  // The quota as the controller manager has counted it, in the snapshot and in the module's cache.
  await eventually(async () => {
    const q = await cluster.admin.get(
      "/api/v1/namespaces/mlflow-prod/resourcequotas/compute-resources",
    );
    expect((q.body.status as { used?: object } | undefined)?.used).toBeDefined();
  }, 30_000);
  const dir = mkdtempSync(join(cluster.dir, "seeds-"));
  try {
    await exportSnapshot(cluster, dir);
    const seeds = ["llamaindex-trainer.yaml", "mlflow-train.yaml", "gpt4-canary.yaml"];
    const check = await runCheck(
      [
        "--cluster",
        "cluster.yaml",
        "-o",
        "json",
        ...seeds.map(f => join(REPO_ROOT, "examples", f)),
      ],
      dir,
    );
    const verdicts = check.stdout
      .trim()
      .split("\n")
      .map(l => JSON.parse(l) as CheckVerdict)
      .filter(v => v.handled);
    expect(verdicts.map(v => `${v.kind} ${v.name}`)).toEqual([
      "Pod llamaindex-trainer",
      "Pod mlflow-train",
      "Pod test-gpt4",
      "Deployment gpt4-canary",
    ]);
    // The trainers are denied whatever the node carries (4 CPUs on a 2-CPU node; 8 CPUs against a
    // quota of 2); the canary's node fit depends on the node's labels, left by earlier files.
    expect(verdicts.slice(0, 2).map(v => v.allowed)).toEqual([false, false]);
    for (const seed of seeds) {
      const applied = await eventually(async () => {
        const r = await kubectl(cluster, [
          "apply",
          "--dry-run=server",
          "-f",
          join(REPO_ROOT, "examples", seed),
        ]);
        // The controller's node and quota caches fill at its start; a verdict needs them.
        if (/has not synced yet/.test(r.stderr)) throw new Error(r.stderr);
        return r;
      }, 30_000);
      const ofSeed = verdicts.filter(v => v.source.file.endsWith(seed));
      expect([seed, applied.code === 0]).toEqual([seed, ofSeed.every(v => v.allowed)]);
      for (const v of ofSeed) {
        for (const violation of v.violations.filter(x => x.severity === "deny")) {
          expect(applied.stderr).toContain(`admission-guard/${violation.capability}`);
          expect(applied.stderr).toContain(violation.message);
          expect(applied.stderr).toContain(violation.fix);
        }
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await removeNamespaces(cluster, ["llama-index", "mlflow-prod", "gpt4-canary"]);
  }
}, 180_000);

/**
 * Pod creations at `perSecond` (server-side dry runs: every webhook is called, nothing is stored)
 * in `ns` while `during` runs, then for `settleMs` more; every refusal counted with its message.
 */
async function underLoad(ns: string, during: () => Promise<void>, perSecond = 20, settleMs = 2000) {
  let running = true;
  const sent: Promise<void>[] = [];
  const refused: string[] = [];
  let admitted = 0;
  const loop = (async () => {
    for (let i = 0; running; i++) {
      const body = { ...pod("x"), metadata: { generateName: "load-", namespace: ns } };
      sent.push(
        cluster.admin.create(`/api/v1/namespaces/${ns}/pods`, body, "?dryRun=All").then(res => {
          if (res.status === 201) admitted++;
          else refused.push(String((res.body as { message?: string }).message ?? res.status));
        }),
      );
      await new Promise(r => setTimeout(r, 1000 / perSecond));
    }
  })();
  await during();
  await new Promise(r => setTimeout(r, settleMs));
  running = false;
  await loop;
  await Promise.all(sent);
  return { admitted, refused };
}

const availability: string[][] = [];
afterAll(() => {
  process.stdout.write(
    `\nThe in-cluster controller under a load of pod creations (20/s, server-side dry runs):\n\n${table(
      ["scenario", "admitted", "refused", "a refusal"],
      availability,
    )}\n\n`,
  );
});
const record = (scenario: string, r: { admitted: number; refused: string[] }) =>
  availability.push([
    scenario,
    String(r.admitted),
    String(r.refused.length),
    r.refused[0]?.slice(0, 140) ?? "-",
  ]);

/** The admission pods; those terminating (which still serve for their grace period) too if asked. */
async function admissionPods(withTerminating = false): Promise<string[]> {
  const res = await cluster.admin.get(
    `/api/v1/namespaces/${MODULE_NS}/pods?labelSelector=${encodeURIComponent("pepr.dev/controller=admission")}`,
  );
  return ((res.body.items as KubeObject[]) ?? [])
    .filter(
      p => withTerminating || !(p.metadata as { deletionTimestamp?: string }).deletionTimestamp,
    )
    .map(p => p.metadata!.name!);
}

test("one admission pod deleted under load: every creation admitted", async () => {
  const [victim] = await admissionPods();
  const r = await underLoad(NS, async () => {
    await new Promise(res => setTimeout(res, 2000));
    expect(
      (await kubectl(cluster, ["delete", "pod", victim, "-n", MODULE_NS, "--wait=false"])).code,
    ).toBe(0);
    await eventually(async () => expect((await admissionPods()).length).toBe(2), 60_000, 500);
  });
  record("delete one admission pod", r);
  expect(r.refused).toEqual([]);
}, 120_000);

test("kubectl rollout restart of the admission Deployment under load: every creation admitted", async () => {
  const r = await underLoad(NS, async () => {
    await new Promise(res => setTimeout(res, 2000));
    expect(
      (
        await kubectl(cluster, [
          "rollout",
          "restart",
          `deployment/${admissionName()}`,
          "-n",
          MODULE_NS,
        ])
      ).code,
    ).toBe(0);
    const status = await kubectl(cluster, [
      "rollout",
      "status",
      `deployment/${admissionName()}`,
      "-n",
      MODULE_NS,
      "--timeout=120s",
    ]);
    expect(status.code).toBe(0);
  });
  record("kubectl rollout restart", r);
  expect(r.refused).toEqual([]);
}, 180_000);

test("both admission replicas gone: refused (fail-closed) with the reason, kube-system unaffected; back once one is Ready", async () => {
  const scale = (n: number) =>
    kubectl(cluster, [
      "scale",
      `deployment/${admissionName()}`,
      "-n",
      MODULE_NS,
      `--replicas=${n}`,
    ]);
  expect((await scale(0)).code).toBe(0);
  await eventually(async () => expect(await admissionPods(true)).toEqual([]), 60_000, 500);
  const down = await underLoad(NS, () => new Promise(res => setTimeout(res, 2000)), 5, 0);
  record("both replicas gone", down);
  expect(down.admitted).toBe(0);
  expect(down.refused[0]).toMatch(/failed calling webhook/);
  const system = await underLoad(
    "kube-system",
    () => new Promise(res => setTimeout(res, 1000)),
    5,
    0,
  );
  record("both replicas gone, in kube-system", system);
  expect(system.refused).toEqual([]);
  expect((await scale(2)).code).toBe(0);
  await eventually(async () => expect(await readyReplicas(admissionName())).toBe(2), 120_000, 1000);
  // Ready, and behind the Service: kube-proxy has programmed its endpoints once a creation passes.
  await eventually(
    async () => {
      const res = await cluster.admin.create(
        `/api/v1/namespaces/${NS}/pods`,
        { ...pod("x"), metadata: { generateName: "probe-", namespace: NS } },
        "?dryRun=All",
      );
      expect(res.status).toBe(201);
    },
    60_000,
    500,
  );
  const back = await underLoad(NS, () => new Promise(res => setTimeout(res, 2000)), 5, 0);
  record("two replicas Ready again", back);
  expect(back.refused).toEqual([]);
}, 300_000);

test("kubectl delete of the manifest: no webhook left, pods are created normally", async () => {
  const deleted = await kubectl(cluster, ["delete", "-f", moduleYamlPath(), "--wait=true"]);
  expect(deleted.code).toBe(0);
  for (const config of manifest.webhookConfigurations) {
    const kind = String(config.kind).toLowerCase();
    const res = await cluster.admin.get(
      `/apis/admissionregistration.k8s.io/v1/${kind}s/${config.metadata?.name}`,
    );
    expect(res.status).toBe(404);
  }
  const result = await kubectl(cluster, ["apply", "-f", "-"], stringify(pod("after-uninstall")));
  expect([result.code, result.stderr]).toEqual([0, ""]);
  const stored = (await cluster.admin.get(`/api/v1/namespaces/${NS}/pods/after-uninstall`)).body;
  expect(stored.metadata?.annotations?.["admission-guard.dev/fixed"]).toBeUndefined();
}, 120_000);
