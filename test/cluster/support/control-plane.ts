// A real Kubernetes control plane on loopback, the way envtest runs one, plus the controller
// manager (without it there is no `default` ServiceAccount, quota status stays unknown and no
// Deployment makes pods): etcd, kube-apiserver and kube-controller-manager as child processes,
// each on a free port, with a CA, serving and client certificates and a ServiceAccount signing key
// made for this run. By default no kubelet and no scheduler: pods are admitted and stored, and stay
// Pending (test/cluster). With { node: true } a real node joins (test/node/support/node.ts) and
// pods really start (test/node).
//
// Every process is stopped by PID (SIGTERM, then SIGKILL) in stop(), on the test process's exit,
// and — should a run die before that — by the next run (processes.ts).
import { spawn } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCertificateAuthority, issueCertificate } from "../../support/certs";
import { findBinaries, findNodeBinaries, HOW_TO_GET_THEM } from "./binaries";
import { kubeconfigYaml, type Credentials } from "../../support/kubeconfig";
import { KubeClient } from "./kube-client";
import { freeLoopbackPort, ProcessGroup } from "./processes";
import { startNode, type RunningNode } from "../../node/support/node";

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
  /**
   * The API server's audit log (JSON lines): only SubjectAccessReviews are recorded (AUDIT_POLICY),
   * so a test can count the reviews one object made the module ask.
   */
  auditLog: string;
  /** The node's name and containerd socket, when the run has a node (test/node). */
  node?: { name: string; containerdSocket: string; registry?: string };
}

export interface ControlPlane extends ControlPlaneInfo {
  /** The running node's handle (image import), when started with { node: true }. */
  runningNode?: RunningNode;
  stop(): Promise<void>;
}

export interface ControlPlaneOptions {
  /** Also start a node (test/node/support/node.ts): containerd, scheduler, kubelet, kube-proxy. */
  node?: boolean;
}

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
 * Feature gates of the kube-apiserver. ImageVolume (alpha in v1.32): without it the API server drops
 * spec.volumes[].image before admission, and the module's image-volume rules could not be shown.
 * DynamicResourceAllocation (beta in v1.32, off by default): without it the API server drops
 * spec.resourceClaims and serves no resource.k8s.io (test/cluster/78-dra.test.ts); it changes
 * nothing for pods that claim no device.
 */
export const FEATURE_GATES = ["ImageVolume=true", "DynamicResourceAllocation=true"];

/**
 * API groups served beyond the defaults: resource.k8s.io/v1beta1, DRA's API in v1.32 (a beta API
 * is off by default). Newer API servers serve it (v1) anyway.
 */
export const RUNTIME_CONFIG = ["resource.k8s.io/v1beta1=true"];

/**
 * Feature gates of the controller manager: with DRA its quota controller counts ResourceClaims in
 * status.used, and its resource-claim controller makes each pod's claims from their templates.
 */
export const CONTROLLER_MANAGER_FEATURE_GATES = ["DynamicResourceAllocation=true"];

/** What the API server's audit log records: who asked a SubjectAccessReview, nothing else. */
const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    resources: [{ group: authorization.k8s.io, resources: [subjectaccessreviews] }]
  - level: None
`;

/**
 * Controllers: all the default ones, but
 * - node-lifecycle-controller: without a kubelet it would taint the suite's Node objects
 *   unreachable after its grace period. With a real kubelet (the node tier) it runs: it lifts the
 *   not-ready taint every new Node gets, once the node reports Ready;
 * - service-ca-certificate-publisher-controller: an OpenShift addition in OpenShift-built binaries
 *   (unknown names are refused by upstream builds, so it is only named when the binary knows it).
 *   On the node tier it runs: that build's ServiceAccount admission adds its ConfigMap
 *   `openshift-service-ca.crt` to every pod's token volume, which the kubelet must then mount.
 */
function controllersFlag(kcmHelp: string, withNode: boolean): string {
  const off = withNode ? [] : ["node-lifecycle-controller"];
  if (!withNode && kcmHelp.includes("service-ca-certificate-publisher-controller"))
    off.push("service-ca-certificate-publisher-controller");
  return ["*", ...off.map(c => `-${c}`)].join(",");
}

export async function startControlPlane(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const bins = findBinaries();
  if (bins.missing.length)
    throw new Error(
      `no Kubernetes control-plane binaries: missing ${bins.missing.join(", ")}; ${HOW_TO_GET_THEM}`,
    );
  const nodeBins = options.node ? findNodeBinaries() : undefined;
  if (nodeBins?.missing.length)
    throw new Error(
      `no node binaries: missing ${nodeBins.missing.join(", ")} (see README, Testing)`,
    );
  const dir = mkdtempSync(join(DATA_ROOT, "admission-guard-k8s-"));
  const group = new ProcessGroup(dir);

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
    auditPolicy: join(dir, "audit-policy.yaml"),
    auditLog: join(dir, "audit.log"),
  };
  writeFileSync(files.ca, ca.pem);
  writeFileSync(files.auditPolicy, AUDIT_POLICY);
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
    group.start("etcd", bins.etcd!, [
      `--name=admission-guard`,
      `--data-dir=${join(dir, "etcd")}`,
      `--listen-client-urls=${etcdUrl}`,
      `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-cluster=admission-guard=http://127.0.0.1:${etcdPeer}`,
      `--log-level=warn`,
    ]);

    const server = `https://127.0.0.1:${apiPort}`;
    group.start("kube-apiserver", bins.kubeApiserver!, [
      `--etcd-servers=${etcdUrl}`,
      // Loopback, but on the node tier every address: pods reach the API server through the
      // kubernetes Service, whose endpoint is this host's address on the pods' bridge.
      `--bind-address=${options.node ? "0.0.0.0" : "127.0.0.1"}`,
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
      `--feature-gates=${FEATURE_GATES.join(",")}`,
      `--runtime-config=${RUNTIME_CONFIG.join(",")}`,
      `--audit-policy-file=${files.auditPolicy}`,
      `--audit-log-path=${files.auditLog}`,
      `--v=0`,
    ]);

    const adminCreds: Credentials = { certPem: admin.certPem, keyPem: admin.keyPem };
    const client = new KubeClient(server, ca.pem, adminCreds);
    await group.waitFor(
      "the API server to be ready",
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
    group.start("kube-controller-manager", bins.kubeControllerManager!, [
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
      `--controllers=${controllersFlag(kcmHelp, Boolean(options.node))}`,
      `--feature-gates=${CONTROLLER_MANAGER_FEATURE_GATES.join(",")}`,
      `--v=0`,
    ]);
    // The controller manager works once it has made the `default` ServiceAccount of `default`.
    await group.waitFor(
      "the controller manager to create ServiceAccount default/default",
      async () =>
        (await client.raw("GET", "/api/v1/namespaces/default/serviceaccounts/default")).status ===
        200
          ? true
          : undefined,
      60_000,
    );

    const runningNode = nodeBins
      ? await startNode({ group, dir, ca, server, admin: client, bins: nodeBins })
      : undefined;

    const info: ControlPlaneInfo = {
      dir,
      server,
      caPem: ca.pem,
      adminCredentials: adminCreds,
      adminKubeconfig: files.adminKubeconfig,
      kubectl: bins.kubectl!,
      auditLog: files.auditLog,
      pids: group.children.map(c => c.process.pid!),
      node: runningNode && {
        name: runningNode.name,
        containerdSocket: runningNode.containerdSocket,
      },
    };
    return {
      ...info,
      runningNode,
      async stop() {
        // The node first (its pods, then its processes, then what they changed on the host), then
        // in reverse order the controller manager and API server, etcd last.
        await runningNode?.stop();
        client.close();
        await group.stopAll();
        group.remove();
      },
    };
  } catch (e) {
    await group.stopAll();
    group.remove();
    throw e;
  }
}
