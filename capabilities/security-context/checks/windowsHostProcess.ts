// Baseline: Windows HostProcess containers are forbidden (PSA windowsHostProcess, 1.0).
import {
  ALLOWED,
  asObject,
  fieldsOf,
  forbidden,
  namesOf,
  podField,
  podSecurityContext,
  securityContextOf,
  visitContainers,
  type Obj,
  type PodSecurityCheck,
} from "./helpers";

const hostProcess = (sc: Obj | undefined) => asObject(sc?.windowsOptions)?.hostProcess === true;

export const windowsHostProcess: PodSecurityCheck = {
  id: "windowsHostProcess",
  level: "baseline",
  check(pod) {
    const setters: string[] = [];
    const fields: string[] = [];
    if (hostProcess(podSecurityContext(pod))) {
      setters.push("pod");
      fields.push(podField(pod, "securityContext.windowsOptions.hostProcess"));
    }
    const bad = visitContainers(pod).filter(c => hostProcess(securityContextOf(c)));
    if (bad.length) {
      setters.push(namesOf(bad));
      fields.push(fieldsOf(bad, "securityContext.windowsOptions.hostProcess"));
    }
    if (!setters.length) return ALLOWED;
    return forbidden(
      "hostProcess",
      `${setters.join(" and ")} must not set securityContext.windowsOptions.hostProcess=true`,
      `set ${fields.join(", ")} to false (or remove it)`,
    );
  },
};
