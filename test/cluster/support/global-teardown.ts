// jest globalTeardown of the cluster suite: every control-plane process stopped by PID.
export default async function globalTeardown(): Promise<void> {
  await globalThis.__admissionGuardControlPlane?.stop();
  globalThis.__admissionGuardControlPlane = undefined;
}
