// jest globalSetup of the cluster suite: one control plane for every file of the run (bring-up
// costs seconds; each file uses namespaces of its own). Its address and admin credentials reach
// the test files through the state file named by CLUSTER_TEST_STATE.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { startControlPlane, type ControlPlane } from "./control-plane";

export const STATE_ENV = "CLUSTER_TEST_STATE";

declare global {
  var __admissionGuardControlPlane: ControlPlane | undefined;
}

export default async function globalSetup(): Promise<void> {
  const started = Date.now();
  const plane = await startControlPlane();
  globalThis.__admissionGuardControlPlane = plane;
  const statePath = join(plane.dir, "state.json");
  // JSON leaves the stop() function out: the test files get the data only.
  writeFileSync(statePath, JSON.stringify(plane), { mode: 0o600 });
  process.env[STATE_ENV] = statePath;
  console.log(
    `\ncontrol plane up in ${((Date.now() - started) / 1000).toFixed(1)} s: ${plane.server} (pids ${plane.pids.join(", ")})`,
  );
}
