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

export const HOW_TO_GET_THEM =
  "get them with `setup-envtest use 1.32.x -p path` (sigs.k8s.io/controller-runtime/tools/setup-envtest) " +
  "and point KUBEBUILDER_ASSETS at that directory; kube-controller-manager is not in envtest's " +
  "archive: put one of the same version beside kube-apiserver";

if (require.main === module) {
  const found = findBinaries();
  for (const [name, path] of Object.entries(found))
    if (name !== "missing" && name !== "assetsDir") console.log(`${name}: ${path ?? "-"}`);
  if (found.missing.length) {
    console.log(`missing: ${found.missing.join(", ")}`);
    process.exit(1);
  }
}
