// jest globalTeardown of the node tier: the registry, then the node and the control plane.
import stopControlPlane from "../../cluster/support/global-teardown";

export default async function globalTeardown(): Promise<void> {
  await globalThis.__admissionGuardNodeRegistry?.stop();
  globalThis.__admissionGuardNodeRegistry = undefined;
  await stopControlPlane();
}
