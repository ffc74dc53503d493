// Baseline: the SELinux type is limited to the container types, and user and role may not be set
// (PSA seLinuxOptions; the type list of policy 1.31, which added container_engine_t).
import {
  ALLOWED,
  asObject,
  asString,
  badSetters,
  forbidden,
  joinQuote,
  pluralize,
  podSecurityContext,
  securityContextOf,
  sortedUnique,
  visitContainers,
  type Obj,
  type PodSecurityCheck,
} from "./helpers";

export const SELINUX_TYPES = new Set([
  "",
  "container_t",
  "container_init_t",
  "container_kvm_t",
  "container_engine_t",
]);

export const seLinuxOptions: PodSecurityCheck = {
  id: "seLinuxOptions",
  level: "baseline",
  check(pod) {
    const badTypes: string[] = [];
    let setUser = false;
    let setRole = false;
    const valid = (opts: Obj) => {
      let ok = true;
      const type = asString(opts.type);
      if (!SELINUX_TYPES.has(type)) {
        ok = false;
        badTypes.push(type);
      }
      if (asString(opts.user)) {
        ok = false;
        setUser = true;
      }
      if (asString(opts.role)) {
        ok = false;
        setRole = true;
      }
      return ok;
    };
    const podOpts = asObject(podSecurityContext(pod)?.seLinuxOptions);
    const bad = badSetters(
      pod,
      podOpts !== undefined && !valid(podOpts),
      visitContainers(pod).filter(c => {
        const opts = asObject(securityContextOf(c)?.seLinuxOptions);
        return opts ? !valid(opts) : false;
      }),
      "securityContext.seLinuxOptions",
    );
    if (!bad) return ALLOWED;
    const data: string[] = [];
    const types = sortedUnique(badTypes);
    if (types.length) data.push(`${pluralize("type", "types", types.length)} ${joinQuote(types)}`);
    if (setUser) data.push("user may not be set");
    if (setRole) data.push("role may not be set");
    return forbidden(
      "seLinuxOptions",
      `${bad.who} set forbidden securityContext.seLinuxOptions: ${data.join("; ")}`,
      `in ${bad.fields} remove user and role and set type to one of ${joinQuote([...SELINUX_TYPES].filter(Boolean))} (or leave it empty)`,
    );
  },
};
