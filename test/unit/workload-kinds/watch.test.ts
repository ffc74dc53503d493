// The watcher's watches of the ML kinds: a kind whose CRD is not served is probed again later,
// never watched (a Pepr Watch binding on it would stop the watcher); a served one is watched once;
// a probe that fails is said once. And the module's RBAC lets it list and watch every kind.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { WorkloadKindWatches } from "../../../lib/reports/workload-kind-watch";
import type { KubeObject } from "../../../lib/objects/pod";
import { groupOf, pluralOf, type WorkloadKindSpec } from "../../../lib/workload-kinds/kind-spec";
import { BUILT_IN_KINDS } from "../../../lib/workload-kinds/table";

const kind = (k: string): WorkloadKindSpec => BUILT_IN_KINDS.find(x => x.kind === k)!;

describe("WorkloadKindWatches", () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it("watches a served kind once, probes an absent one every interval until it is served", async () => {
    const served = new Set(["PyTorchJob"]);
    const probes: string[] = [];
    const watched: string[] = [];
    const seen: string[] = [];
    const watches = new WorkloadKindWatches({
      kinds: [kind("PyTorchJob"), kind("RayCluster")],
      probeEveryMs: 60_000,
      probe: async spec => (probes.push(spec.kind), served.has(spec.kind)),
      watch: (spec, onObject) => {
        watched.push(spec.kind);
        onObject({ kind: spec.kind, metadata: { name: "x" } } as KubeObject, "ADDED");
      },
      onObject: (obj, phase) => seen.push(`${phase} ${obj.kind}`),
    });
    watches.start();
    await jest.advanceTimersByTimeAsync(0);
    expect(watched).toEqual(["PyTorchJob"]);
    expect(seen).toEqual(["ADDED PyTorchJob"]);
    expect([...watches.watching]).toEqual(["pytorchjobs.kubeflow.org"]);
    expect(probes.sort()).toEqual(["PyTorchJob", "RayCluster"]);
    // RayCluster's CRD is installed later: watched at the next probe, PyTorchJob never probed again.
    served.add("RayCluster");
    await jest.advanceTimersByTimeAsync(60_000);
    expect(watched).toEqual(["PyTorchJob", "RayCluster"]);
    expect(probes.filter(p => p === "PyTorchJob")).toHaveLength(1);
    watches.stop();
  });

  it("a probe that fails (forbidden, unreachable) is logged once and tried again; stop ends the probing", async () => {
    const warnings: string[] = [];
    let probes = 0;
    const watches = new WorkloadKindWatches({
      kinds: [kind("JobSet")],
      probeEveryMs: 1000,
      probe: async () => {
        probes++;
        throw Object.assign(new Error("forbidden"), { status: 403 });
      },
      watch: () => {
        throw new Error("never watched");
      },
      onObject: () => undefined,
      log: { info: () => undefined, warn: (_o, m) => warnings.push(m) },
    });
    watches.start();
    await jest.advanceTimersByTimeAsync(3500);
    expect(probes).toBe(4);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain("package.json pepr.rbac");
    watches.stop();
    await jest.advanceTimersByTimeAsync(10_000);
    expect(probes).toBe(4);
  });
});

test("package.json pepr.rbac grants list and watch on every ML kind of the table", () => {
  const pkg = JSON.parse(readFileSync(join(__dirname, "../../../package.json"), "utf8"));
  const rules = pkg.pepr.rbac as { apiGroups: string[]; resources: string[]; verbs: string[] }[];
  const may = (group: string, resource: string, verb: string) =>
    rules.some(
      r => r.apiGroups.includes(group) && r.resources.includes(resource) && r.verbs.includes(verb),
    );
  const missing = BUILT_IN_KINDS.flatMap(k =>
    ["list", "watch"]
      .filter(verb => !may(groupOf(k.apiVersion), pluralOf(k), verb))
      .map(verb => `${verb} ${pluralOf(k)}.${groupOf(k.apiVersion)}`),
  );
  expect(missing).toEqual([]);
});
