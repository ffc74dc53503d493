// What Pepr's copy of a request costs a hostile pod, before and after lib/pepr/clone.ts: ramda's
// clone (quadratic in alike entries) against the linear clone, on pods of N alike projected
// sources (the shape payload-size denies only after Pepr has copied it). p50 of 3 runs each.
//
//   npx tsx bench/pepr-clone.ts
import { createRequire } from "node:module";
import { linearClone } from "../lib/pepr/clone";

const ramda = createRequire(require.resolve("pepr"))("ramda") as { clone: (v: unknown) => unknown };
const linear = linearClone(ramda.clone);

const ms = (f: () => unknown) => {
  const runs = [0, 1, 2].map(() => {
    const start = process.hrtime.bigint();
    f();
    return Number(process.hrtime.bigint() - start) / 1e6;
  });
  return runs.sort((a, b) => a - b)[1];
};

console.log("| alike entries | ramda clone ms | linear clone ms | ratio |\n|--:|--:|--:|--:|");
for (const n of [1_000, 5_000, 20_000, 35_000]) {
  const sources = Array.from({ length: n }, (_, i) => ({ secret: { name: `s${i}` } }));
  const pod = { spec: { volumes: [{ name: "v", projected: { sources } }] } };
  const before = ms(() => ramda.clone(pod));
  const after = ms(() => linear(pod));
  console.log(
    `| ${n} | ${before.toFixed(0)} | ${after.toFixed(1)} | ${(before / after).toFixed(0)} |`,
  );
}
