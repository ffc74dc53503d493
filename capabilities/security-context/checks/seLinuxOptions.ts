// Baseline: the SELinux type is limited to the container types, and user and role may not be set
// (PSA seLinuxOptions, 1.0; policy 1.31 added container_engine_t to the types).
import {
  ALLOWED,
  asObject,
  asString,
  badSetters,
  forbidden,
  joinQuote,
  pluralize,
  sortedUnique,
  type Obj,
  podSecurityCheck,
  type CheckResult,
} from "./helpers";
import type { PodTemplateRef } from "../../../lib/objects/pod";

const SELINUX_TYPES_1_0 = ["", "container_t", "container_init_t", "container_kvm_t"];
/** The types of the newest policy. */
export const SELINUX_TYPES = new Set([...SELINUX_TYPES_1_0, "container_engine_t"]);

function allowedTypesOnly(pod: PodTemplateRef, allowedTypes: ReadonlySet<string>): CheckResult {
  const badTypes: string[] = [];
  let setUser = false;
  let setRole = false;
  const valid = (opts: Obj) => {
    let ok = true;
    const type = asString(opts.type);
    if (!allowedTypes.has(type)) {
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
  const bad = badSetters(
    pod,
    sc => {
      const opts = asObject(sc?.seLinuxOptions);
      return opts ? !valid(opts) : false;
    },
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
    `in ${bad.fields} remove user and role and set type to one of ${joinQuote([...allowedTypes].filter(Boolean))} (or leave it empty)`,
  );
}

const SELINUX_TYPES_1_0_SET = new Set(SELINUX_TYPES_1_0);

export const seLinuxOptions = podSecurityCheck({
  id: "seLinuxOptions",
  level: "baseline",
  versions: [
    { since: 0, check: pod => allowedTypesOnly(pod, SELINUX_TYPES_1_0_SET) },
    { since: 31, check: pod => allowedTypesOnly(pod, SELINUX_TYPES) },
  ],
});
