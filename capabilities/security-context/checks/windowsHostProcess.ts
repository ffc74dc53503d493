// Baseline: Windows HostProcess containers are forbidden (PSA windowsHostProcess, 1.0).
import { ALLOWED, asObject, badSetters, forbidden, type Obj, podSecurityCheck } from "./helpers";

const hostProcess = (sc: Obj | undefined) => asObject(sc?.windowsOptions)?.hostProcess === true;

export const windowsHostProcess = podSecurityCheck({
  id: "windowsHostProcess",
  level: "baseline",
  versions: [
    {
      since: 0,
      check(pod) {
        const bad = badSetters(pod, hostProcess, "securityContext.windowsOptions.hostProcess");
        if (!bad) return ALLOWED;
        return forbidden(
          "hostProcess",
          `${bad.who} must not set securityContext.windowsOptions.hostProcess=true`,
          `set ${bad.fields} to false (or remove it)`,
        );
      },
    },
  ],
});
