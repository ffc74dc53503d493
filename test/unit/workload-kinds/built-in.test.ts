// Kubernetes' own workload kinds are listed once (lib/workload-kinds/table.ts BUILT_IN_WORKLOADS):
// the kinds the webhook binds, the objects judged as workloads, where their pod templates are read,
// what the watcher lists and what `check` validates all follow that one list.
import { schemaProblems } from "../../../cli/schema";
import { templateKinds } from "../../../lib/engine/routes";
import { BUILT_IN_WATCHED } from "../../../lib/reports/scan-watches";
import { defaultSettings } from "../../../lib/settings";
import { isWorkload, podTemplateOf, WORKLOAD_KINDS } from "../../../lib/workload-kinds/built-in";
import { apiVersionOf } from "../../../lib/workload-kinds/kind-spec";
import { BUILT_IN_WORKLOADS } from "../../../lib/workload-kinds/table";

const template = {
  metadata: { labels: { app: "a" } },
  spec: { containers: [{ name: "c", image: "busybox" }] },
};
const manifestOf = (k: (typeof BUILT_IN_WORKLOADS)[number]) => ({
  apiVersion: apiVersionOf(k),
  kind: k.kind,
  metadata: { name: "w", namespace: "ns" },
  spec:
    k.kind === "CronJob"
      ? { schedule: "* * * * *", jobTemplate: { spec: { template } } }
      : // A ReplicationController's selector is a map of labels.
        {
          selector:
            k.kind === "ReplicationController" ? { app: "a" } : { matchLabels: { app: "a" } },
          template,
        },
});

describe("the built-in workload kinds, one list", () => {
  it("are Kubernetes' seven, at the group and version the API server serves", () => {
    expect(BUILT_IN_WORKLOADS.map(k => `${k.kind} ${apiVersionOf(k)}`)).toEqual([
      "Deployment apps/v1",
      "StatefulSet apps/v1",
      "DaemonSet apps/v1",
      "ReplicaSet apps/v1",
      "ReplicationController v1",
      "Job batch/v1",
      "CronJob batch/v1",
    ]);
    expect(WORKLOAD_KINDS).toEqual(BUILT_IN_WORKLOADS.map(k => k.kind));
  });

  it.each(BUILT_IN_WORKLOADS.map(k => [k.kind, k] as const))(
    "%s: bound by the webhook, judged as a workload, its template found, validated by check",
    (_, k) => {
      expect(templateKinds(defaultSettings().workloads)).toContainEqual({
        group: k.group,
        version: k.version,
        kind: k.kind,
      });
      const manifest = manifestOf(k);
      expect(isWorkload(manifest)).toBe(true);
      expect(podTemplateOf(manifest)?.spec.containers[0].name).toBe("c");
      expect(schemaProblems(manifest)).toEqual([]);
      // check judges a kind it knows: a field Kubernetes does not have is named.
      expect(schemaProblems({ ...manifest, spec: { ...manifest.spec, bogus: 1 } })).toEqual([
        expect.stringContaining("spec.bogus: unknown field"),
      ]);
    },
  );

  // Pre-existing choice, kept: ReplicaSets are judged through their Deployment (scan-watches.ts).
  it("are what the watcher lists, but ReplicaSets and ReplicationControllers", () => {
    expect(BUILT_IN_WATCHED.map(w => `${w.kind} ${w.apiVersion}`)).toEqual([
      "Pod v1",
      ...BUILT_IN_WORKLOADS.filter(
        k => !["ReplicaSet", "ReplicationController"].includes(k.kind),
      ).map(k => `${k.kind} ${apiVersionOf(k)}`),
    ]);
  });
});
