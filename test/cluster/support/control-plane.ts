// A real Kubernetes control plane on loopback, the way envtest runs one, plus the controller
// manager (without it there is no `default` ServiceAccount, quota status stays unknown and no
// Deployment makes pods): etcd, kube-apiserver and kube-controller-manager as child processes,
// each on a free port, with a CA, serving and client certificates and a ServiceAccount signing key
// made for this run. No kubelet, no scheduler: pods are admitted and stored, and stay Pending.
//
// Every process is stopped by PID (SIGTERM, then SIGKILL) in stop(), on the test process's exit,
// and — should a run die before that — by the next run, which reads the PIDs left in its state file.
import { spawn, type ChildProcess } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCertificateAuthority, issueCertificate } from "../../support/certs";
import { captureOutput } from "../../support/controller";
import { findBinaries, HOW_TO_GET_THEM } from "./binaries";
import { kubeconfigYaml, type Credentials } from "../../support/kubeconfig";
import { KubeClient } from "./kube-client";

/** What a test process needs to reach a running control plane (written by globalSetup). */
export interface ControlPlaneInfo {
  dir: string;
  server: string;
  caPem: string;
  /** Admin (system:masters) client certificate. */
  adminCredentials: Credentials;
  adminKubeconfig: string;
  kubectl: string;
  pids: number[];
}

export interface ControlPlane extends ControlPlaneInfo {
  stop(): Promise<void>;
}

/** Where runs leave their state: a run that died leaves PIDs that the next run stops. */
const RUNS_DIR = join(tmpdir(), "admission-guard-control-plane");
/** etcd's data is throw-away: on tmpfs when the machine has one (no fsync cost). */
const DATA_ROOT = existsSync("/dev/shm") ? "/dev/shm" : tmpdir();

/** Options of the kube-apiserver that the suite relies on (see README, Testing). */
export const ADMISSION_PLUGINS = [
  "NamespaceLifecycle",
  "LimitRanger",
  "ServiceAccount",
  "PodSecurity",
  "MutatingAdmissionWebhook",
  "ValidatingAdmissionWebhook",
  "ResourceQuota",
];

/**
 * Controllers: all the default ones, but
 * - node-lifecycle-controller: there are no kubelets, so it would taint the suite's Node objects
 *   unreachable after its grace period;
 * - service-ca-certificate-publisher-controller: an OpenShift addition in OpenShift-built binaries
 *   (unknown names are refused by upstream builds, so it is only named when the binary knows it).
 */
function controllersFlag(kcmHelp: string): string {
  const off = ["node-lifecycle-controller"];
  if (kcmHelp.includes("service-ca-certificate-publisher-controller"))
    off.push("service-ca-certificate-publisher-controller");
  return ["*", ...off.map(c => `-${c}`)].join(",");
}

function freeLoopbackPort(): Promise<number> {
  return new Promise((ok, fail) => {
    const server = createServer();
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => ok(port));
    });
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Stops what a run that died left behind: PIDs from its state file, checked to still be ours. */
function reapStaleRuns(): void {
  if (!existsSync(RUNS_DIR)) return;
  for (const entry of readdirSync(RUNS_DIR)) {
    const stateFile = join(RUNS_DIR, entry);
    let state: { owner: number; pids: number[]; dir: string };
    try {
      state = JSON.parse(readFileSync(stateFile, "utf8"));
    } catch {
      continue;
    }
    if (alive(state.owner)) continue; // another live run
    for (const pid of state.pids) {
      const cmdline = (() => {
        try {
          return readFileSync(`/proc/${pid}/cmdline`, "utf8");
        } catch {
          return "";
        }
      })();
      if (cmdline.includes(state.dir)) process.kill(pid, "SIGKILL");
    }
    rmSync(state.dir, { recursive: true, force: true });
    rmSync(stateFile, { force: true });
  }
}

interface Child {
  name: string;
  process: ChildProcess;
  log: () => string;
  exited?: { code: number | null; signal: string | null };
}

const LOG_LIMIT = 256 * 1024;

function startChild(name: string, command: string, args: string[], dir: string): Child {
  const proc = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], cwd: dir });
  const child: Child = { name, process: proc, log: captureOutput(proc, LOG_LIMIT) };
  proc.on("exit", (code, signal) => (child.exited = { code, signal }));
  return child;
}

async function stopChild(child: Child): Promise<void> {
  if (child.exited || child.process.pid === undefined) return;
  const exit = new Promise<void>(done => child.process.once("exit", () => done()));
  child.process.kill("SIGTERM");
  const timer = setTimeout(() => child.process.kill("SIGKILL"), 5000);
  await exit;
  clearTimeout(timer);
}

async function waitFor<T>(
  what: string,
  children: Child[],
  probe: () => Promise<T | undefined>,
  timeoutMs: number,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError = "";
  for (;;) {
    const dead = children.find(c => c.exited);
    if (dead)
      throw new Error(
        `${dead.name} exited (code ${dead.exited!.code}) while waiting for ${what}:\n${dead.log().slice(-3000)}`,
      );
    try {
      const result = await probe();
      if (result !== undefined) return result;
    } catch (e) {
      lastError = (e as Error).message;
    }
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${lastError ? ` (${lastError})` : ""}:\n` +
          children.map(c => `--- ${c.name}\n${c.log().slice(-2000)}`).join("\n"),
      );
    await new Promise(r => setTimeout(r, 100));
  }
}

export async function startControlPlane(): Promise<ControlPlane> {
  const bins = findBinaries();
  if (bins.missing.length)
    throw new Error(
      `no Kubernetes control-plane binaries: missing ${bins.missing.join(", ")}; ${HOW_TO_GET_THEM}`,
    );
  reapStaleRuns();
  mkdirSync(RUNS_DIR, { recursive: true });
  const dir = mkdtempSync(join(DATA_ROOT, "admission-guard-k8s-"));
  const stateFile = join(RUNS_DIR, `${process.pid}.json`);
  const children: Child[] = [];
  const saveState = () =>
    writeFileSync(
      stateFile,
      JSON.stringify({ owner: process.pid, dir, pids: children.map(c => c.process.pid) }),
    );
  const killAll = () => {
    for (const c of children) if (!c.exited) c.process.kill("SIGKILL");
  };
  process.once("exit", killAll);

  // Certificates: one CA signs the API server's serving certificate and every client certificate.
  const ca = createCertificateAuthority("admission-guard control-plane CA");
  const serving = issueCertificate(ca, {
    commonName: "kube-apiserver",
    ips: ["127.0.0.1", "10.0.0.1"],
    dnsNames: ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"],
    usage: "server",
  });
  const admin = issueCertificate(ca, {
    commonName: "admission-guard-test-admin",
    organizations: ["system:masters"],
    usage: "client",
  });
  const kcm = issueCertificate(ca, {
    commonName: "system:kube-controller-manager",
    usage: "client",
  });
  const serviceAccountKey = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const files = {
    ca: join(dir, "ca.crt"),
    serving: join(dir, "apiserver.crt"),
    servingKey: join(dir, "apiserver.key"),
    saPub: join(dir, "sa.pub"),
    saKey: join(dir, "sa.key"),
    kcmKubeconfig: join(dir, "kcm.kubeconfig"),
    adminKubeconfig: join(dir, "admin.kubeconfig"),
  };
  writeFileSync(files.ca, ca.pem);
  writeFileSync(files.serving, serving.certPem);
  writeFileSync(files.servingKey, serving.keyPem, { mode: 0o600 });
  writeFileSync(
    files.saPub,
    serviceAccountKey.publicKey.export({ type: "spki", format: "pem" }).toString(),
  );
  writeFileSync(
    files.saKey,
    serviceAccountKey.privateKey.export({ type: "pkcs1", format: "pem" }).toString(),
    { mode: 0o600 },
  );

  try {
    const [etcdClient, etcdPeer, apiPort] = [
      await freeLoopbackPort(),
      await freeLoopbackPort(),
      await freeLoopbackPort(),
    ];
    const etcdUrl = `http://127.0.0.1:${etcdClient}`;
    const etcd = startChild(
      "etcd",
      bins.etcd!,
      [
        `--name=admission-guard`,
        `--data-dir=${join(dir, "etcd")}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
        `--initial-cluster=admission-guard=http://127.0.0.1:${etcdPeer}`,
        `--log-level=warn`,
      ],
      dir,
    );
    children.push(etcd);
    saveState();

    const server = `https://127.0.0.1:${apiPort}`;
    const apiserver = startChild(
      "kube-apiserver",
      bins.kubeApiserver!,
      [
        `--etcd-servers=${etcdUrl}`,
        `--bind-address=127.0.0.1`,
        `--advertise-address=127.0.0.1`,
        `--secure-port=${apiPort}`,
        `--cert-dir=${dir}`,
        `--tls-cert-file=${files.serving}`,
        `--tls-private-key-file=${files.servingKey}`,
        `--client-ca-file=${files.ca}`,
        `--service-account-issuer=https://kubernetes.default.svc.cluster.local`,
        `--service-account-key-file=${files.saPub}`,
        `--service-account-signing-key-file=${files.saKey}`,
        `--service-cluster-ip-range=10.0.0.0/24`,
        `--authorization-mode=Node,RBAC`,
        `--enable-admission-plugins=${ADMISSION_PLUGINS.join(",")}`,
        // Pods may ask for privileged containers, as on most clusters: policies decide, not this flag.
        `--allow-privileged=true`,
        // Bound to loopback: no endpoint reconciliation for the kubernetes Service (it refuses a
        // loopback address).
        `--endpoint-reconciler-type=none`,
        `--v=0`,
      ],
      dir,
    );
    children.push(apiserver);
    saveState();

    const adminCreds: Credentials = { certPem: admin.certPem, keyPem: admin.keyPem };
    const client = new KubeClient(server, ca.pem, adminCreds);
    await waitFor(
      "the API server to be ready",
      children,
      async () => ((await client.raw("GET", "/readyz")).status === 200 ? true : undefined),
      60_000,
    );

    writeFileSync(
      files.kcmKubeconfig,
      kubeconfigYaml(server, ca.pem, { certPem: kcm.certPem, keyPem: kcm.keyPem }),
      { mode: 0o600 },
    );
    writeFileSync(files.adminKubeconfig, kubeconfigYaml(server, ca.pem, adminCreds), {
      mode: 0o600,
    });
    const kcmHelp = await new Promise<string>(done => {
      const help = spawn(bins.kubeControllerManager!, ["--help"], { stdio: "pipe" });
      let text = "";
      help.stdout.on("data", c => (text += c));
      help.stderr.on("data", c => (text += c));
      help.on("exit", () => done(text));
    });
    const controllerManager = startChild(
      "kube-controller-manager",
      bins.kubeControllerManager!,
      [
        `--kubeconfig=${files.kcmKubeconfig}`,
        `--authentication-kubeconfig=${files.kcmKubeconfig}`,
        `--authorization-kubeconfig=${files.kcmKubeconfig}`,
        `--secure-port=0`,
        `--leader-elect=false`,
        // Each controller acts as its own ServiceAccount, as in real clusters: pods a ReplicaSet
        // makes arrive at webhooks from system:serviceaccount:kube-system:replicaset-controller.
        `--use-service-account-credentials=true`,
        `--service-account-private-key-file=${files.saKey}`,
        `--root-ca-file=${files.ca}`,
        `--controllers=${controllersFlag(kcmHelp)}`,
        `--v=0`,
      ],
      dir,
    );
    children.push(controllerManager);
    saveState();
    // The controller manager works once it has made the `default` ServiceAccount of `default`.
    await waitFor(
      "the controller manager to create ServiceAccount default/default",
      children,
      async () =>
        (await client.raw("GET", "/api/v1/namespaces/default/serviceaccounts/default")).status ===
        200
          ? true
          : undefined,
      60_000,
    );

    const info: ControlPlaneInfo = {
      dir,
      server,
      caPem: ca.pem,
      adminCredentials: adminCreds,
      adminKubeconfig: files.adminKubeconfig,
      kubectl: bins.kubectl!,
      pids: children.map(c => c.process.pid!),
    };
    return {
      ...info,
      async stop() {
        // Reverse order: the controller manager and API server first, etcd last.
        for (const child of [...children].reverse()) await stopChild(child);
        process.removeListener("exit", killAll);
        rmSync(dir, { recursive: true, force: true });
        rmSync(stateFile, { force: true });
      },
    };
  } catch (e) {
    killAll();
    rmSync(dir, { recursive: true, force: true });
    rmSync(stateFile, { force: true });
    throw e;
  }
}
