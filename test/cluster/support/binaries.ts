// Where the real control plane comes from, found the way controller-runtime's envtest finds it:
// the directory $KUBEBUILDER_ASSETS, else /usr/local/kubebuilder/bin (what `setup-envtest use
// 1.32.x -p path` prints). etcd and kubectl may also come from the PATH (Debian's etcd-server
// installs /usr/bin/etcd). Nothing here builds or downloads anything.
//
// Run directly (`npx tsx test/cluster/support/binaries.ts`) it prints what it found and exits 0
// when the real-cluster suite can run, 1 when it cannot: `.ci/run` asks it before running the suite.
import { accessSync, constants, existsSync } from "node:fs";
import { delimiter, join } from "node:path";

export const DEFAULT_ASSETS_DIR = "/usr/local/kubebuilder/bin";

export interface ControlPlaneBinaries {
  assetsDir: string;
  etcd?: string;
  kubeApiserver?: string;
  kubeControllerManager?: string;
  kubectl?: string;
  /** What is missing, said so a user knows what to get; empty when the suite can run. */
  missing: string[];
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function inDir(dir: string, name: string): string | undefined {
  const path = join(dir, name);
  return existsSync(path) && executable(path) ? path : undefined;
}

function onPath(name: string, env: NodeJS.ProcessEnv): string | undefined {
  for (const dir of (env.PATH ?? "").split(delimiter).filter(Boolean)) {
    const found = inDir(dir, name);
    if (found) return found;
  }
  return undefined;
}

export function findBinaries(env: NodeJS.ProcessEnv = process.env): ControlPlaneBinaries {
  const assetsDir = env.KUBEBUILDER_ASSETS || DEFAULT_ASSETS_DIR;
  const found = {
    assetsDir,
    kubeApiserver: inDir(assetsDir, "kube-apiserver"),
    kubeControllerManager: inDir(assetsDir, "kube-controller-manager"),
    etcd: inDir(assetsDir, "etcd") ?? onPath("etcd", env),
    kubectl: inDir(assetsDir, "kubectl") ?? onPath("kubectl", env),
  };
  const missing: string[] = [];
  if (!found.kubeApiserver) missing.push(`kube-apiserver (in ${assetsDir})`);
  if (!found.kubeControllerManager) missing.push(`kube-controller-manager (in ${assetsDir})`);
  if (!found.etcd) missing.push(`etcd (in ${assetsDir} or on the PATH)`);
  if (!found.kubectl) missing.push(`kubectl (in ${assetsDir} or on the PATH)`);
  return { ...found, missing };
}

/**
 * The node tier (test/node): the kubelet, kube-scheduler and kube-proxy beside kube-apiserver (the
 * same source tree builds them), and from Debian's packages containerd (with ctr), runc, the CNI
 * plugins, iptables and conntrack; busybox-static for the images the tier builds.
 */
export interface NodeBinaries {
  kubelet?: string;
  kubeScheduler?: string;
  kubeProxy?: string;
  containerd?: string;
  ctr?: string;
  runc?: string;
  /** The CNI plugins' directory (bridge, host-local, portmap, loopback). */
  cniDir?: string;
  iptables?: string;
  conntrack?: string;
  busybox?: string;
  missing: string[];
}

/** Debian's containernetworking-plugins, then the upstream default. */
const CNI_DIRS = ["/usr/lib/cni", "/opt/cni/bin"];
const CNI_PLUGINS = ["bridge", "host-local", "portmap", "loopback"];
export const NODE_DEBIAN_PACKAGES = [
  "containerd",
  "runc",
  "containernetworking-plugins",
  "iptables",
  "conntrack",
  "busybox-static",
];

export function findNodeBinaries(env: NodeJS.ProcessEnv = process.env): NodeBinaries {
  const assetsDir = env.KUBEBUILDER_ASSETS || DEFAULT_ASSETS_DIR;
  const sbinPath = { ...env, PATH: `${env.PATH ?? ""}${delimiter}/usr/sbin${delimiter}/sbin` };
  const found = {
    kubelet: inDir(assetsDir, "kubelet"),
    kubeScheduler: inDir(assetsDir, "kube-scheduler"),
    kubeProxy: inDir(assetsDir, "kube-proxy"),
    containerd: onPath("containerd", sbinPath),
    ctr: onPath("ctr", sbinPath),
    runc: onPath("runc", sbinPath),
    cniDir: CNI_DIRS.find(dir => CNI_PLUGINS.every(p => inDir(dir, p))),
    iptables: onPath("iptables", sbinPath),
    conntrack: onPath("conntrack", sbinPath),
    busybox: inDir("/bin", "busybox") ?? onPath("busybox", sbinPath),
  };
  const missing: string[] = [];
  for (const [name, path] of Object.entries(found))
    if (!path)
      missing.push(
        ["kubelet", "kubeScheduler", "kubeProxy"].includes(name)
          ? `${name.replace(/[A-Z]/g, c => `-${c.toLowerCase()}`)} (in ${assetsDir})`
          : name === "cniDir"
            ? `the CNI plugins ${CNI_PLUGINS.join(", ")} (in ${CNI_DIRS.join(" or ")})`
            : `${name} (on the PATH)`,
      );
  return { ...found, missing };
}

export const HOW_TO_GET_THEM =
  "get them with `setup-envtest use 1.32.x -p path` (sigs.k8s.io/controller-runtime/tools/setup-envtest) " +
  "and point KUBEBUILDER_ASSETS at that directory; kube-controller-manager is not in envtest's " +
  "archive: put one of the same version beside kube-apiserver";

// `binaries.ts` answers for the control plane; `binaries.ts --node` for the node tier too.
if (require.main === module) {
  const node = process.argv.includes("--node");
  const found = findBinaries();
  const nodeFound = node ? findNodeBinaries() : { missing: [] };
  for (const [name, path] of Object.entries({ ...found, ...nodeFound }))
    if (name !== "missing" && name !== "assetsDir") console.log(`${name}: ${path ?? "-"}`);
  const missing = [...found.missing, ...nodeFound.missing];
  if (missing.length) {
    console.log(`missing: ${missing.join(", ")}`);
    process.exit(1);
  }
}
