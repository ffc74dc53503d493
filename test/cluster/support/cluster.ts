// What a cluster-suite file uses: the running control plane (started by global-setup.ts), an
// admin client, kubectl as a user runs it, and the module installed for the file's tests.
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { KubeObject } from "../../../lib/objects/pod";
import type { ControlPlaneInfo } from "./control-plane";
import { STATE_ENV } from "./global-setup";
import { KubeClient, pathOf, statusMessage } from "./kube-client";
import { installModule, type InstalledModule, type InstallOptions } from "./module";
import { eventually } from "../../support/wait";

export interface Cluster extends ControlPlaneInfo {
  admin: KubeClient;
}

export function connect(): Cluster {
  const path = process.env[STATE_ENV];
  if (!path) throw new Error(`${STATE_ENV} is not set: run the suite with npm run test:cluster`);
  const info = JSON.parse(readFileSync(path, "utf8")) as ControlPlaneInfo;
  return { ...info, admin: new KubeClient(info.server, info.caPem, info.adminCredentials) };
}

export interface KubectlResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs kubectl as the cluster admin, with `input` on its standard input (for `-f -`). */
export function kubectl(cluster: Cluster, args: string[], input?: string): Promise<KubectlResult> {
  return new Promise((ok, fail) => {
    const child = spawn(cluster.kubectl, args, {
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? "",
        KUBECONFIG: cluster.adminKubeconfig,
      },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", c => (stdout += c));
    child.stderr.on("data", c => (stderr += c));
    child.on("error", fail);
    child.on("exit", code => ok({ code, stdout, stderr }));
    child.stdin.end(input ?? "");
  });
}

/** Creates (or updates) objects as the admin; throws with the API server's message on failure. */
export async function applyObjects(cluster: Cluster, objects: KubeObject[]): Promise<void> {
  for (const obj of objects) {
    const res = await cluster.admin.apply(pathOf(obj), obj);
    if (res.status >= 300)
      throw new Error(
        `applying ${obj.kind} ${obj.metadata?.name}: ${statusMessage(res) || res.text}`,
      );
  }
}

/** Waits until the controller manager has made the namespace's `default` ServiceAccount (until then ServiceAccount admission refuses pods). */
export async function defaultAccountMade(cluster: Cluster, ns: string): Promise<void> {
  await eventually(
    async () =>
      expect(
        (await cluster.admin.get(`/api/v1/namespaces/${ns}/serviceaccounts/default`)).status,
      ).toBe(200),
    30_000,
  );
}

export function namespace(
  name: string,
  labels: Record<string, string> = {},
  annotations: Record<string, string> = {},
): KubeObject {
  return { apiVersion: "v1", kind: "Namespace", metadata: { name, labels, annotations } };
}

/** The module installed for a whole test file: in beforeAll when `when` is "all", else on demand. */
export function useModule(cluster: Cluster, options: InstallOptions = {}) {
  const handle: {
    module?: InstalledModule;
    /** Installs it once (later calls return the same); `more` adds to the file's options. */
    install(more?: InstallOptions): Promise<InstalledModule>;
  } = {
    async install(more = {}) {
      handle.module ??= await installModule(cluster.admin, cluster.caPem, { ...options, ...more });
      return handle.module;
    },
  };
  afterAll(async () => {
    await handle.module?.uninstall();
    cluster.admin.close();
  });
  return handle;
}

/**
 * A Node object as a kubelet would leave it: created, its status (capacity, allocatable, Ready)
 * written through the status subresource, and the `node.kubernetes.io/not-ready` taint the
 * TaintNodesByCondition admission adds to every new node removed, as the node lifecycle controller
 * does once the node reports Ready. (No kubelet runs here.)
 */
export async function addNode(cluster: Cluster, manifest: KubeObject): Promise<void> {
  // As exported from another cluster: its resourceVersion and uid mean nothing here.
  const metadata = { ...manifest.metadata };
  delete metadata.resourceVersion;
  delete metadata.uid;
  const node: KubeObject = { apiVersion: "v1", kind: "Node", metadata, spec: manifest.spec };
  const path = pathOf(node);
  const created = await cluster.admin.create("/api/v1/nodes", node);
  if (created.status >= 300) throw new Error(`creating node: ${statusMessage(created)}`);
  const status = {
    ...(manifest.status as object),
    conditions: [
      {
        type: "Ready",
        status: "True",
        reason: "KubeletReady",
        message: "kubelet is posting ready status",
        lastHeartbeatTime: new Date().toISOString(),
        lastTransitionTime: new Date().toISOString(),
      },
    ],
  };
  const withStatus = await cluster.admin.mergePatch(`${path}/status`, { status });
  if (withStatus.status >= 300) throw new Error(`node status: ${statusMessage(withStatus)}`);
  const untainted = await cluster.admin.mergePatch(path, {
    spec: { taints: (manifest.spec as { taints?: unknown[] } | undefined)?.taints ?? null },
  });
  if (untainted.status >= 300) throw new Error(`node taints: ${statusMessage(untainted)}`);
}

/**
 * The cluster objects `check --cluster` reads, exported as a user would (`kubectl get ... -A -o
 * yaml`), written to dir/cluster.yaml; returns that path.
 */
export async function exportSnapshot(cluster: Cluster, dir: string): Promise<string> {
  const exported = await kubectl(cluster, [
    "get",
    "ns,resourcequota,limitrange,nodes,serviceaccounts,roles,rolebindings,clusterroles,clusterrolebindings",
    "-A",
    "-o",
    "yaml",
  ]);
  if (exported.code !== 0)
    throw new Error(`kubectl get for the snapshot failed: ${exported.stderr}`);
  const path = join(dir, "cluster.yaml");
  writeFileSync(path, exported.stdout);
  return path;
}
