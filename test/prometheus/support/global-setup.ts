// jest globalSetup of the Prometheus tier: without Debian's prometheus binary the tier cannot run,
// and says how to get it before any test starts (not one timeout per test).
import { prometheusBinary, prometheusVersion } from "./prometheus";

export default function globalSetup(): void {
  const binary = prometheusBinary();
  console.log(`\n${prometheusVersion(binary)} (${binary})`);
}
