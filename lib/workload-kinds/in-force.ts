// The workload kinds judged beyond the built-in controllers: the platform's own (workloads.kinds)
// and the ML kinds of the table that workloads.builtInKinds keeps. Each is one more webhook binding,
// which Pepr filters on every request (docs/bench.md), so a platform without an operator may drop it.
import { kindName, type WorkloadKindSpec } from "./kind-spec";
import type { WorkloadsSettings } from "./schema";
import { BUILT_IN_KINDS } from "./table";

const memo = new WeakMap<object, readonly WorkloadKindSpec[]>();

/** The kinds in force for these settings: the platform's first (they replace a built-in of the same group and kind). */
export function kindsInForce(workloads: WorkloadsSettings): readonly WorkloadKindSpec[] {
  let kinds = memo.get(workloads);
  if (kinds) return kinds;
  const platform = workloads.kinds;
  const kept = new Set<string>(workloads.builtInKinds);
  const builtIn = BUILT_IN_KINDS.filter(
    b => kept.has(kindName(b)) && !platform.some(p => kindName(p) === kindName(b)),
  );
  kinds = [...platform, ...builtIn];
  memo.set(workloads, kinds);
  return kinds;
}
