// jest globalSetup of the node tier (npm run test:cluster, after test/cluster): one control plane
// with a real node for every file of the run, a registry on loopback serving the probe images
// (which containerd pulls over plain HTTP, and the module reads image configs from), and the
// seeds' images loaded into containerd under their own names too. The test files reach all of it
// through the same state file as the cluster suite (test/cluster/support/cluster.ts).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { startControlPlane } from "../../cluster/support/control-plane";
import { STATE_ENV } from "../../cluster/support/global-setup";
import { TestRegistry } from "../../support/registry";
import { buildShapes, repositoryOf, rowRepository } from "./shapes";
import { ML_SHAPE_IMAGES, SEED_IMAGES } from "./workloads";

declare global {
  var __admissionGuardNodeRegistry: TestRegistry | undefined;
}

export default async function globalSetup(): Promise<void> {
  const started = Date.now();
  const plane = await startControlPlane({ node: true });
  globalThis.__admissionGuardControlPlane = plane;
  const registry = new TestRegistry();
  globalThis.__admissionGuardNodeRegistry = registry;
  try {
    await registry.start();
    plane.runningNode!.trustPlainHttp(registry.host);
    const { shapes, variants, rows } = buildShapes(join(plane.dir, "images"), [
      ...SEED_IMAGES,
      ...Object.values(ML_SHAPE_IMAGES),
    ]);
    for (const [shape, image] of shapes) registry.putBuilt(repositoryOf(shape), "1", image);
    for (const [row, image] of rows) registry.putBuilt(rowRepository(row), "1", image);
    for (const image of variants) {
      await plane.runningNode!.importImage(image.archive);
      for (const tag of image.tags) {
        const colon = tag.lastIndexOf(":");
        registry.putBuilt(tag.slice(0, colon), tag.slice(colon + 1), image);
      }
    }
  } catch (e) {
    await registry.stop();
    await plane.stop();
    throw e;
  }
  plane.node!.registry = registry.host;
  const statePath = join(plane.dir, "state.json");
  writeFileSync(statePath, JSON.stringify(plane), { mode: 0o600 });
  process.env[STATE_ENV] = statePath;
  console.log(
    `\ncontrol plane and node ${plane.node!.name} up in ${((Date.now() - started) / 1000).toFixed(1)} s: ${plane.server}, registry ${registry.host}`,
  );
}
