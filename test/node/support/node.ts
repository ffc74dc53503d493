// A real node for the control plane of test/cluster: containerd (CRI) with runc and the CNI
// bridge, kube-scheduler, the kubelet and kube-proxy, all as child processes of the run, on
// loopback, with every file under the run's directory. Pods really start here.
//
// What these machines need (2-core VMs, cgroup v1, no systemd, no CAP_SYS_RESOURCE), learned by
// running it:
// - containerd's CRI plugin with `restrict_oom_score_adj = true`: without CAP_SYS_RESOURCE every
//   sandbox fails (`runc create failed ... can't get final child's PID from pipe: EOF`);
// - the cgroupfs driver (`SystemdCgroup = false`, kubelet `cgroupDriver: cgroupfs`) and
//   `failSwapOn: false`;
// - CNI bridge + host-local (+ portmap; containerd runs loopback itself), from Debian's plugins;
// - the sandbox ("pause") image built here from busybox, as containerd's `sandbox_image`.
//
// The kubelet and kube-proxy change the host while they run (sysctls, iptables chains, mounts,
// network namespaces, cgroups): stop() puts each back, and so does the next run for one that died
// (processes.ts onStaleRun).
import { execFile, spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  rmdirSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { stringify } from "yaml";
import type { CertificateAuthority } from "../../support/certs";
import { issueCertificate } from "../../support/certs";
import { kubeconfigYaml } from "../../support/kubeconfig";
import type { KubeObject } from "../../../lib/objects/pod";
import type { NodeBinaries } from "../../cluster/support/binaries";
import type { KubeClient } from "../../cluster/support/kube-client";
import {
  freeLoopbackPort,
  onStaleRun,
  commandLine,
  ProcessGroup,
} from "../../cluster/support/processes";
import { baseFiles, buildImage } from "./images";

const run = promisify(execFile);

export const NODE_NAME = "admission-guard-node";
/** The pods' network: a bridge on this machine, host-local addresses, nothing routed out. */
export const POD_CIDR = "10.244.0.0/24";
const BRIDGE = "agnode0";
export const PAUSE_IMAGE = "localhost/admission-guard/pause:1";

/** Sysctls the kubelet, kube-proxy or the bridge plugin set: read before, put back after. */
const SYSCTLS = [
  "vm/overcommit_memory",
  "vm/panic_on_oom",
  "kernel/panic",
  "kernel/panic_on_oops",
  "kernel/keys/root_maxkeys",
  "kernel/keys/root_maxbytes",
  "net/ipv4/ip_forward",
  "net/ipv4/conf/all/route_localnet",
  "net/ipv6/conf/all/forwarding",
];

export interface RunningNode {
  name: string;
  /** containerd's socket (ctr --address). */
  containerdSocket: string;
  /** Imports an image archive (OCI layout with Docker's manifest.json) into the CRI namespace. */
  importImage(archive: string): Promise<void>;
  /** Lets containerd pull from a registry on this machine over plain HTTP (as insecure registries). */
  trustPlainHttp(host: string): void;
  stop(): Promise<void>;
}

export interface NodeContext {
  group: ProcessGroup;
  dir: string;
  ca: CertificateAuthority;
  server: string;
  admin: KubeClient;
  bins: NodeBinaries;
}

function readSysctls(): Record<string, string> {
  const values: Record<string, string> = {};
  for (const key of SYSCTLS) {
    try {
      values[key] = readFileSync(`/proc/sys/${key}`, "utf8").trim();
    } catch {
      // not on this kernel
    }
  }
  return values;
}

function restoreSysctls(values: Record<string, string>): void {
  for (const [key, value] of Object.entries(values)) {
    try {
      if (readFileSync(`/proc/sys/${key}`, "utf8").trim() !== value)
        writeFileSync(`/proc/sys/${key}`, value);
    } catch {
      // read-only here: nothing was changed either
    }
  }
}

/** Unmounts everything mounted below `dir`, deepest first (lazily: a busy mount is detached). */
function unmountBelow(dir: string): void {
  const mounts = readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .map(line => line.split(" ")[4])
    .filter(point => point && (point === dir || point.startsWith(`${dir}/`)))
    .sort((a, b) => b.length - a.length);
  for (const point of mounts) spawnSync("umount", ["-l", point], { stdio: "ignore" });
}

/** Removes the iptables chains kube-proxy, the kubelet and the CNI plugins made (KUBE-*, CNI-*). */
function removeChains(): void {
  for (const family of ["iptables", "ip6tables"]) {
    const saved = spawnSync(`${family}-save`, [], { encoding: "utf8" });
    if (saved.status !== 0 || !/KUBE-|CNI-/.test(saved.stdout)) continue;
    const kept = saved.stdout
      .split("\n")
      .filter(line => !/KUBE-|CNI-/.test(line))
      .join("\n");
    spawnSync(`${family}-restore`, [], { input: kept, stdio: ["pipe", "ignore", "ignore"] });
  }
}

/** The kubelet's pod cgroups (kubepods under every v1 controller), removed bottom-up. */
function removePodCgroups(): void {
  const removeTree = (path: string) => {
    let entries: string[] = [];
    try {
      entries = readdirSync(path, { withFileTypes: true })
        .filter(e => e.isDirectory())
        .map(e => e.name);
    } catch {
      return;
    }
    for (const entry of entries) removeTree(join(path, entry));
    try {
      rmdirSync(path);
    } catch {
      // still has a process: left as it is
    }
  };
  const root = "/sys/fs/cgroup";
  if (!existsSync(root)) return;
  for (const controller of readdirSync(root)) {
    for (const top of ["kubepods", "kubepods.slice"]) {
      const path = join(root, controller, top);
      if (existsSync(path)) removeTree(path);
    }
  }
}

/** containerd shims outlive containerd: those started for this run's socket are ended. */
function killShims(socket: string): void {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const cmd = commandLine(Number(entry));
    if (cmd.includes("containerd-shim") && cmd.includes(socket)) {
      try {
        process.kill(Number(entry), "SIGKILL");
      } catch {
        // gone already
      }
    }
  }
}

function netnsList(): string[] {
  try {
    return readdirSync("/var/run/netns");
  } catch {
    return [];
  }
}

/** What puts the host back; also run for a run that died (its sysctls saved in its directory). */
function cleanUpHost(dir: string, netnsBefore?: Set<string>): void {
  killShims(join(dir, "containerd", "containerd.sock"));
  unmountBelow(dir);
  if (netnsBefore)
    for (const ns of netnsList())
      if (!netnsBefore.has(ns)) spawnSync("ip", ["netns", "delete", ns], { stdio: "ignore" });
  spawnSync("ip", ["link", "delete", BRIDGE], { stdio: "ignore" });
  removeChains();
  removePodCgroups();
  const saved = join(dir, "sysctls.json");
  if (existsSync(saved)) restoreSysctls(JSON.parse(readFileSync(saved, "utf8")));
}
onStaleRun(dir => {
  if (existsSync(join(dir, "containerd"))) cleanUpHost(dir);
});

function containerdConfig(dir: string, cniDir: string): string {
  const root = join(dir, "containerd");
  return `version = 2
root = "${root}/root"
state = "${root}/state"
[grpc]
  address = "${root}/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  # No CAP_SYS_RESOURCE on these machines: never lower a process's oom_score_adj.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${cniDir}"
    conf_dir = "${dir}/cni/net.d"
  # Per-registry hosts.toml files, read at each pull (trustPlainHttp writes them).
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "${dir}/certs.d"
`;
}

function cniConfig(dir: string): string {
  return JSON.stringify({
    cniVersion: "0.4.0",
    name: "admission-guard-node",
    plugins: [
      {
        type: "bridge",
        bridge: BRIDGE,
        isGateway: true,
        ipMasq: false,
        hairpinMode: true,
        ipam: {
          type: "host-local",
          ranges: [[{ subnet: POD_CIDR }]],
          routes: [{ dst: "0.0.0.0/0" }],
          dataDir: join(dir, "cni", "ipam"),
        },
      },
      { type: "portmap", capabilities: { portMappings: true } },
    ],
  });
}

/** The pause image: busybox sleeping as PID 1 (the sandbox only holds the pod's namespaces). */
function buildPauseImage(outDir: string) {
  return buildImage(
    {
      tags: [PAUSE_IMAGE],
      files: baseFiles("root:x:0:0:root:/root:/bin/sh\n", "root:x:0:\n"),
      config: { Entrypoint: ["/bin/busybox", "sleep", "2147483647"], User: "65535:65535" },
    },
    outDir,
  );
}

export async function startNode(ctx: NodeContext): Promise<RunningNode> {
  const { dir } = ctx;
  const netnsBefore = new Set(netnsList());
  writeFileSync(join(dir, "sysctls.json"), JSON.stringify(readSysctls()));
  for (const sub of [
    "containerd",
    "cni/net.d",
    "cni/ipam",
    "certs.d",
    "kubelet",
    "pod-logs",
    "images",
  ])
    mkdirSync(join(dir, sub), { recursive: true });
  const socket = join(dir, "containerd", "containerd.sock");
  try {
    return await bringUp(ctx, socket, netnsBefore);
  } catch (e) {
    // The control plane stops every process; what they changed on the host is put back here.
    await ctx.group.stopAll();
    cleanUpHost(dir, netnsBefore);
    throw e;
  }
}

async function bringUp(
  ctx: NodeContext,
  socket: string,
  netnsBefore: Set<string>,
): Promise<RunningNode> {
  const { group, dir, ca, server, admin, bins } = ctx;
  // containerd
  const containerdToml = join(dir, "containerd.toml");
  writeFileSync(containerdToml, containerdConfig(dir, bins.cniDir!));
  writeFileSync(join(dir, "cni", "net.d", "10-admission-guard.conflist"), cniConfig(dir));
  group.start("containerd", bins.containerd!, ["--config", containerdToml, "--log-level", "warn"], {
    ...process.env,
    PATH: `${process.env.PATH ?? ""}:/usr/sbin:/sbin`,
  });
  const ctr = (args: string[]) =>
    run(bins.ctr!, ["--address", socket, "--namespace", "k8s.io", ...args], {
      maxBuffer: 16 * 1024 * 1024,
    });
  await group.waitFor(
    "containerd to answer",
    async () => ((await ctr(["version"])).stdout.includes("Server") ? true : undefined),
    30_000,
  );
  const importImage = async (archive: string) => {
    await ctr(["images", "import", "--no-unpack=false", archive]);
  };
  await importImage(buildPauseImage(join(dir, "images")).archive);

  // Identities, as kubeadm makes them: the node's, the scheduler's and kube-proxy's.
  const identity = (file: string, commonName: string, organizations: string[] = []) => {
    const cert = issueCertificate(ca, { commonName, organizations, usage: "client" });
    const path = join(dir, file);
    writeFileSync(path, kubeconfigYaml(server, ca.pem, cert), { mode: 0o600 });
    return path;
  };
  const kubeletKubeconfig = identity("kubelet.kubeconfig", `system:node:${NODE_NAME}`, [
    "system:nodes",
  ]);
  const schedulerKubeconfig = identity("scheduler.kubeconfig", "system:kube-scheduler");
  const proxyKubeconfig = identity("kube-proxy.kubeconfig", "system:kube-proxy");
  const serving = issueCertificate(ca, {
    commonName: NODE_NAME,
    ips: ["127.0.0.1"],
    dnsNames: [NODE_NAME, "localhost"],
    usage: "server",
  });
  writeFileSync(join(dir, "kubelet.crt"), serving.certPem);
  writeFileSync(join(dir, "kubelet.key"), serving.keyPem, { mode: 0o600 });

  group.start("kube-scheduler", bins.kubeScheduler!, [
    `--kubeconfig=${schedulerKubeconfig}`,
    `--authentication-kubeconfig=${schedulerKubeconfig}`,
    `--authorization-kubeconfig=${schedulerKubeconfig}`,
    `--bind-address=127.0.0.1`,
    `--secure-port=${await freeLoopbackPort()}`,
    `--leader-elect=false`,
    `--v=0`,
  ]);

  const kubeletConfig = join(dir, "kubelet.yaml");
  writeFileSync(
    kubeletConfig,
    stringify({
      apiVersion: "kubelet.config.k8s.io/v1beta1",
      kind: "KubeletConfiguration",
      address: "127.0.0.1",
      port: await freeLoopbackPort(),
      readOnlyPort: 0,
      healthzBindAddress: "127.0.0.1",
      healthzPort: await freeLoopbackPort(),
      tlsCertFile: join(dir, "kubelet.crt"),
      tlsPrivateKeyFile: join(dir, "kubelet.key"),
      authentication: {
        anonymous: { enabled: false },
        webhook: { enabled: false },
        x509: { clientCAFile: join(dir, "ca.crt") },
      },
      authorization: { mode: "AlwaysAllow" },
      cgroupDriver: "cgroupfs",
      containerRuntimeEndpoint: `unix://${socket}`,
      failSwapOn: false,
      resolvConf: "/etc/resolv.conf",
      clusterDomain: "cluster.local",
      podLogsDir: join(dir, "pod-logs"),
      // A shared CI machine: evict nothing, collect no images (they were loaded, not pulled).
      evictionHard: {
        "memory.available": "50Mi",
        "nodefs.available": "1%",
        "imagefs.available": "1%",
        "nodefs.inodesFree": "1%",
      },
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
      serializeImagePulls: false,
      syncFrequency: "10s",
      nodeStatusUpdateFrequency: "5s",
    }),
  );
  group.start("kubelet", bins.kubelet!, [
    `--config=${kubeletConfig}`,
    `--kubeconfig=${kubeletKubeconfig}`,
    `--root-dir=${join(dir, "kubelet")}`,
    `--hostname-override=${NODE_NAME}`,
    `--v=0`,
  ]);

  group.start("kube-proxy", bins.kubeProxy!, [
    `--kubeconfig=${proxyKubeconfig}`,
    `--hostname-override=${NODE_NAME}`,
    `--proxy-mode=iptables`,
    `--cluster-cidr=${POD_CIDR}`,
    // Leave the host's conntrack table size alone.
    `--conntrack-max-per-core=0`,
    `--metrics-bind-address=127.0.0.1:${await freeLoopbackPort()}`,
    `--healthz-bind-address=127.0.0.1:${await freeLoopbackPort()}`,
    `--v=0`,
  ]);

  // Ready, and schedulable: the node lifecycle controller lifts the not-ready taint.
  await group.waitFor(
    `node ${NODE_NAME} to be Ready and untainted`,
    async () => {
      const node = (await admin.get(`/api/v1/nodes/${NODE_NAME}`)).body;
      const ready = (
        (node.status as { conditions?: { type: string; status: string }[] })?.conditions ?? []
      ).some(c => c.type === "Ready" && c.status === "True");
      const taints = (node.spec as { taints?: unknown[] } | undefined)?.taints ?? [];
      return ready && taints.length === 0 ? true : undefined;
    },
    90_000,
  );

  const byName = (name: string) => group.children.find(c => c.name === name)!;
  return {
    name: NODE_NAME,
    containerdSocket: socket,
    importImage,
    trustPlainHttp(host: string) {
      const hostDir = join(dir, "certs.d", host);
      mkdirSync(hostDir, { recursive: true });
      writeFileSync(
        join(hostDir, "hosts.toml"),
        `server = "http://${host}"\n[host."http://${host}"]\n  capabilities = ["pull", "resolve"]\n`,
      );
    },
    async stop() {
      // Pods first, through the kubelet, so that their sandboxes and networks are torn down by CRI.
      const pods = await admin.get("/api/v1/pods");
      for (const pod of (pods.body.items as KubeObject[] | undefined) ?? [])
        await admin.raw(
          "DELETE",
          `/api/v1/namespaces/${pod.metadata?.namespace}/pods/${pod.metadata?.name}?gracePeriodSeconds=0`,
        );
      const deadline = Date.now() + 30_000;
      while (Date.now() < deadline) {
        const tasks = await ctr(["tasks", "list", "--quiet"]).catch(() => ({ stdout: "" }));
        if (!tasks.stdout.trim()) break;
        await new Promise(r => setTimeout(r, 500));
      }
      for (const name of ["kube-proxy", "kubelet", "kube-scheduler"])
        await ProcessGroup.stop(byName(name));
      spawnSync(bins.kubeProxy!, ["--cleanup", "--proxy-mode=iptables"], { stdio: "ignore" });
      // Whatever still runs (a pod the kubelet had no time for) is ended without CRI.
      try {
        const left = (await ctr(["tasks", "list", "--quiet"])).stdout.split("\n").filter(Boolean);
        for (const id of left)
          await ctr(["tasks", "kill", "--signal", "SIGKILL", id]).catch(() => {});
      } catch {
        // containerd gone: the shims are killed below
      }
      await ProcessGroup.stop(byName("containerd"));
      cleanUpHost(dir, netnsBefore);
    },
  };
}
