// The seams of whole-gang capacity that the end-to-end cases in gang-capacity.test.ts only reach
// through a denial: the search behind "lower X to at most N" (gang-capacity-bounds.ts) and what
// counts as a gang that grows on UPDATE (gang-capacity-demand.ts).
import type { V1PodSpec } from "@kubernetes/client-node";
import fc from "fast-check";
import { largest } from "../../../capabilities/resource-quota/gang-capacity-bounds";
import {
  grows,
  type CapacityDemand,
} from "../../../capabilities/resource-quota/gang-capacity-demand";
import { limitRangeDefaults, podResources } from "../../../capabilities/resource-quota/resources";
import { container } from "./support";

describe("largest: the most a field may be and the gang still fit", () => {
  it("is the last value a monotone test holds for, as a linear scan finds it", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -5, max: 50 }),
        fc.integer({ min: 0, max: 60 }),
        fc.integer({ min: -10, max: 120 }),
        (lo, span, line) => {
          const hi = lo + span;
          const ok = (x: number) => x <= line;
          let scan = lo - 1;
          for (let x = lo; x <= hi && ok(x); x++) scan = x;
          expect(largest(lo, hi, ok)).toBe(scan);
        },
      ),
    );
  });

  it("asks the test about log2 of the range times, not once per value", () => {
    let asked = 0;
    const fits = largest(1, 1_000_000, x => (asked++, x <= 777_777));
    expect(fits).toBe(777_777);
    expect(asked).toBeLessThanOrEqual(22);
  });
});

type Gang = Omit<CapacityDemand, "subject">;
const spec = (gpus: string, extra: Partial<V1PodSpec> = {}): V1PodSpec => ({
  containers: [container("train", { limits: { "nvidia.com/gpu": gpus } })],
  ...extra,
});
const gang = (workers: number, podSpec: V1PodSpec = spec("8"), needs = workers): Gang => ({
  roles: [
    {
      spec: podSpec,
      pod: podResources(
        { metadata: {}, spec: podSpec, path: "spec.template" },
        limitRangeDefaults(undefined),
      ),
      parts: [{ name: "Worker", pods: workers, min: workers, field: "", path: "spec.template" }],
    },
  ],
  needs,
  why: "its pods start together",
});

describe("grows: whether an UPDATE's gang is judged again", () => {
  it("a new gang (nothing stored), more pods or a larger minimum grow", () => {
    expect(grows(gang(4), undefined)).toBe(true);
    expect(grows(gang(5), gang(4))).toBe(true);
    expect(grows(gang(4, spec("8"), 4), gang(4, spec("8"), 3))).toBe(true);
  });

  it("the same gang, or fewer pods, does not", () => {
    expect(grows(gang(4), gang(4))).toBe(false);
    expect(grows(gang(3), gang(4))).toBe(false);
  });

  it("pods that ask more, or may go to other nodes, do, though their count is the same", () => {
    expect(grows(gang(4, spec("4")), gang(4, spec("8")))).toBe(true);
    const elsewhere = spec("8", { nodeSelector: { pool: "b" } });
    expect(grows(gang(4, elsewhere), gang(4))).toBe(true);
    expect(grows(gang(4, spec("8", { tolerations: [{ key: "gpu" }] })), gang(4))).toBe(true);
  });
});
