// jest globalSetup of the node tier (npm run test:cluster, after test/cluster): one control plane
// with a real node for every file of the run, and the probe images loaded into its containerd. The
// test files reach it through the same state file as the cluster suite (test/cluster/support/cluster.ts).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { startControlPlane } from "../../cluster/support/control-plane";
import { STATE_ENV } from "../../cluster/support/global-setup";
import { buildShapes } from "./shapes";
import { SEED_IMAGES } from "./workloads";

export default async function globalSetup(): Promise<void> {
  const started = Date.now();
  const plane = await startControlPlane({ node: true });
  globalThis.__admissionGuardControlPlane = plane;
  try {
    const images = buildShapes(join(plane.dir, "images"), SEED_IMAGES);
    for (const image of images) await plane.runningNode!.importImage(image.archive);
  } catch (e) {
    await plane.stop();
    throw e;
  }
  const statePath = join(plane.dir, "state.json");
  writeFileSync(statePath, JSON.stringify(plane), { mode: 0o600 });
  process.env[STATE_ENV] = statePath;
  console.log(
    `\ncontrol plane and node ${plane.node!.name} up in ${((Date.now() - started) / 1000).toFixed(1)} s: ${plane.server}`,
  );
}
