// The arithmetic: a pod's requests and limits as the scheduler and the ResourceQuota plugin compute
// them, and what a pod is charged in a quota.
import fc from "fast-check";
import {
  isBestEffort,
  isExtendedResource,
  isPodQuotaResource,
  limitRangeDefaults,
  podResources,
  quotaUsage,
  type PodResources,
  type ResourceList,
} from "../../../capabilities/resource-quota/resources";
import { podCount } from "../../../capabilities/resource-quota/workload";
import type { KubeObject } from "../../../lib/objects/pod";
import { podTemplateOf } from "../../../lib/workload-kinds/built-in";
import { formatQuantity } from "../../../lib/objects/quantity";
import type { V1LimitRange } from "@kubernetes/client-node";

type Res = { requests?: Record<string, unknown>; limits?: Record<string, unknown> };
const c = (name: string, resources: Res = {}, extra: Record<string, unknown> = {}) => ({
  name,
  image: "busybox",
  resources,
  ...extra,
});
const pod = (spec: Record<string, unknown>): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p", namespace: "ns" },
  spec,
});
const resourcesOf = (obj: KubeObject, limitRanges: V1LimitRange[] = []): PodResources =>
  podResources(podTemplateOf(obj)!, limitRangeDefaults(limitRanges));
/** A ResourceList as canonical strings, for readable expectations. */
const show = (list: ResourceList) =>
  Object.fromEntries([...list].map(([k, q]) => [k, formatQuantity(q)]));

describe("pod requests and limits", () => {
  it("sums containers exactly: 100m + 200m = 300m, 0.5Gi + 512Mi = 1Gi", () => {
    const r = resourcesOf(
      pod({
        containers: [
          c("a", { requests: { cpu: "100m", memory: "0.5Gi" } }),
          c("b", { requests: { cpu: "200m", memory: "512Mi" } }),
        ],
      }),
    );
    expect(show(r.requests)).toEqual({ cpu: "300m", memory: "1Gi" });
  });

  it("takes the max of the containers' sum and each init container", () => {
    const r = resourcesOf(
      pod({
        initContainers: [c("migrate", { requests: { cpu: "2", memory: "256Mi" } })],
        containers: [
          c("a", { requests: { cpu: "500m", memory: "1Gi" } }),
          c("b", { requests: { cpu: "500m" } }),
        ],
      }),
    );
    expect(show(r.requests)).toEqual({ cpu: "2", memory: "1Gi" });
  });

  it("adds restartable init containers (sidecars) and counts them beside later init containers", () => {
    const r = resourcesOf(
      pod({
        initContainers: [
          c("setup", { requests: { cpu: "1500m" } }), // before the sidecar: runs alone
          c("proxy", { requests: { cpu: "500m" } }, { restartPolicy: "Always" }),
          c("warmup", { requests: { cpu: "1200m" } }), // runs beside the proxy: 1.7
        ],
        containers: [c("main", { requests: { cpu: "1" } })],
      }),
    );
    // containers 1 + sidecar 0.5 = 1.5; init peak max(1.5, 0.5, 1.2 + 0.5) = 1.7
    expect(show(r.requests)).toEqual({ cpu: "1700m" });
  });

  it("a sidecar alone raises the sum even when no init container is bigger", () => {
    const r = resourcesOf(
      pod({
        initContainers: [c("log", { requests: { memory: "64Mi" } }, { restartPolicy: "Always" })],
        containers: [c("main", { requests: { memory: "1Gi" } })],
      }),
    );
    expect(show(r.requests)).toEqual({ memory: "1088Mi" });
  });

  it("adds pod overhead to requests, and to limits only where a limit is set", () => {
    const r = resourcesOf(
      pod({
        overhead: { cpu: "250m", memory: "120Mi" },
        containers: [c("a", { requests: { cpu: "1", memory: "1Gi" }, limits: { cpu: "2" } })],
      }),
    );
    expect(show(r.requests)).toEqual({ cpu: "1250m", memory: "1144Mi" });
    expect(show(r.limits)).toEqual({ cpu: "2250m" });
  });

  it("defaults requests from limits when only limits are given, and remembers it", () => {
    const r = resourcesOf(
      pod({ containers: [c("trainer", { limits: { cpu: "4", memory: "8Gi" } })] }),
    );
    expect(show(r.requests)).toEqual({ cpu: "4", memory: "8Gi" });
    expect(show(r.containers[0].requests)).toEqual(show(r.containers[0].limits));
  });

  it("does not override an explicit request with the limit", () => {
    const r = resourcesOf(
      pod({
        containers: [c("a", { requests: { cpu: "1" }, limits: { cpu: "4", memory: "2Gi" } })],
      }),
    );
    expect(show(r.requests)).toEqual({ cpu: "1", memory: "2Gi" });
  });

  it("ignores ephemeral containers (they have no resources)", () => {
    const r = resourcesOf(
      pod({
        containers: [c("a", { requests: { cpu: "1" } })],
        ephemeralContainers: [c("debug", { requests: { cpu: "8" } })],
      }),
    );
    expect(show(r.requests)).toEqual({ cpu: "1" });
  });

  it("uses pod-level resources for cpu and memory instead of the containers' sum", () => {
    const r = resourcesOf(
      pod({
        resources: { requests: { cpu: "3" }, limits: { memory: "4Gi" } },
        containers: [c("a", { requests: { cpu: "1", memory: "1Gi", "nvidia.com/gpu": "1" } })],
      }),
    );
    expect(show(r.requests)).toEqual({ cpu: "3", memory: "4Gi", "nvidia.com/gpu": "1" });
  });

  it("reports quantities that do not parse with their field, and never throws", () => {
    const r = resourcesOf(
      pod({ containers: [c("a", { requests: { cpu: "lots" }, limits: { memory: "8 GB" } })] }),
    );
    expect(r.errors).toEqual([
      expect.stringContaining('spec.containers[0].resources.requests.cpu: "lots"'),
      expect.stringContaining('spec.containers[0].resources.limits.memory: "8 GB"'),
    ]);
    for (const spec of [
      { containers: "x" },
      { containers: [null, 3, c("a", "x" as unknown as Res)] },
      { initContainers: [{ resources: { requests: [] } }], containers: [] },
      { overhead: "x", resources: 5 },
    ])
      expect(() => resourcesOf(pod(spec))).not.toThrow();
  });

  it("sums any number of containers exactly (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 100_000 }), { maxLength: 20 }), millis => {
        const r = resourcesOf(
          pod({ containers: millis.map((m, i) => c(`c${i}`, { requests: { cpu: `${m}m` } })) }),
        );
        const total = millis.reduce((a, b) => a + b, 0);
        expect(r.requests.get("cpu")?.milli ?? 0n).toBe(BigInt(total));
      }),
    );
  });
});

describe("LimitRange defaults", () => {
  const lr = (name: string, item: Record<string, unknown>): V1LimitRange => ({
    metadata: { name, namespace: "ns" },
    spec: { limits: [{ type: "Container", ...item }] },
  });

  it("fills missing limits from default and missing requests from defaultRequest", () => {
    const r = resourcesOf(pod({ containers: [c("a", { requests: { cpu: "2" } })] }), [
      lr("defaults", {
        default: { cpu: "4", memory: "1Gi" },
        defaultRequest: { cpu: "100m", memory: "256Mi" },
      }),
    ]);
    expect(show(r.requests)).toEqual({ cpu: "2", memory: "256Mi" });
    expect(show(r.limits)).toEqual({ cpu: "4", memory: "1Gi" });
  });

  it("applies the API's defaulting first: a request copied from the container's limit wins over defaultRequest", () => {
    const r = resourcesOf(pod({ containers: [c("a", { limits: { memory: "2Gi" } })] }), [
      lr("defaults", { defaultRequest: { memory: "256Mi" } }),
    ]);
    expect(show(r.requests)).toEqual({ memory: "2Gi" });
  });

  it("defaults the LimitRange itself like the API server (max → default → defaultRequest; min → defaultRequest)", () => {
    const d = limitRangeDefaults([lr("x", { max: { cpu: "2" }, min: { memory: "64Mi" } })]);
    expect(show(d.limits)).toEqual({ cpu: "2" });
    expect(show(d.requests)).toEqual({ cpu: "2", memory: "64Mi" });
  });

  it("takes each resource from the first LimitRange by name; ignores non-Container items and junk", () => {
    const d = limitRangeDefaults([
      lr("b", { defaultRequest: { cpu: "300m", memory: "1Gi" } }),
      lr("a", { defaultRequest: { cpu: "100m" } }),
      { metadata: { name: "pod" }, spec: { limits: [{ type: "Pod", max: { cpu: "64" } }] } },
      { metadata: { name: "junk" }, spec: { limits: "x" } } as unknown as V1LimitRange,
      lr("bad", { defaultRequest: { cpu: "lots" } }),
    ]);
    expect(show(d.requests)).toEqual({ cpu: "100m", memory: "1Gi" });
  });
});

describe("quota usage of a pod", () => {
  it("charges requests under bare and requests. names, limits under limits., pods and count/pods", () => {
    const r = resourcesOf(
      pod({
        containers: [
          c("a", {
            requests: {
              cpu: "1",
              memory: "1Gi",
              "ephemeral-storage": "2Gi",
              "hugepages-2Mi": "64Mi",
            },
            limits: { cpu: "2", memory: "2Gi", "nvidia.com/gpu": "2" },
          }),
        ],
      }),
    );
    expect(show(quotaUsage(r.requests, r.limits))).toEqual({
      pods: "1",
      "count/pods": "1",
      cpu: "1",
      "requests.cpu": "1",
      "limits.cpu": "2",
      memory: "1Gi",
      "requests.memory": "1Gi",
      "limits.memory": "2Gi",
      "ephemeral-storage": "2Gi",
      "requests.ephemeral-storage": "2Gi",
      "hugepages-2Mi": "64Mi",
      "requests.hugepages-2Mi": "64Mi",
      "requests.nvidia.com/gpu": "2",
    });
  });

  it.each([
    ["nvidia.com/gpu", true],
    ["amd.com/gpu", true],
    ["example.com/foo", true],
    ["kubernetes.io/something", false],
    ["cpu", false],
    ["requests.nvidia.com/gpu", false],
    ["hugepages-2Mi", false],
  ])("extended resource %p: %p", (name, expected) => {
    expect(isExtendedResource(name)).toBe(expected);
  });

  it.each([
    ["requests.cpu", true],
    ["limits.memory", true],
    ["ephemeral-storage", true],
    ["count/pods", true],
    ["requests.nvidia.com/gpu", true],
    ["requests.hugepages-1Gi", true],
    ["limits.nvidia.com/gpu", false], // the API does not allow it; the plugin ignores it
    ["services", false],
    ["requests.storage", false],
    ["count/deployments.apps", false],
  ])("the pod evaluator tracks %p: %p", (name, expected) => {
    expect(isPodQuotaResource(name)).toBe(expected);
  });

  it("BestEffort: no container requests or limits any cpu or memory above zero", () => {
    const be = (spec: Record<string, unknown>) => {
      const obj = pod(spec);
      return isBestEffort(resourcesOf(obj), podTemplateOf(obj)!.spec);
    };
    expect(be({ containers: [c("a")] })).toBe(true);
    expect(be({ containers: [c("a", { requests: { cpu: "0" } })] })).toBe(true);
    expect(be({ containers: [c("a", { limits: { "nvidia.com/gpu": "1" } })] })).toBe(true);
    expect(be({ containers: [c("a", { limits: { memory: "1Gi" } })] })).toBe(false);
    expect(
      be({ initContainers: [c("i", { requests: { cpu: "1m" } })], containers: [c("a")] }),
    ).toBe(false);
    expect(be({ resources: { requests: { cpu: "1" } }, containers: [c("a")] })).toBe(false);
  });
});

describe("pods a workload runs at once", () => {
  it.each([
    [{ kind: "Pod" }, 1],
    [{ kind: "Deployment", spec: {} }, 1],
    [{ kind: "Deployment", spec: { replicas: 3 } }, 3],
    [{ kind: "StatefulSet", spec: { replicas: 0 } }, 0],
    [{ kind: "ReplicaSet", spec: { replicas: "3" } }, 1], // malformed: the default
    [{ kind: "ReplicationController", spec: { replicas: 2 } }, 2],
    [{ kind: "Job", spec: {} }, 1],
    [{ kind: "Job", spec: { parallelism: 4 } }, 4],
    [{ kind: "Job", spec: { parallelism: 4, completions: 2 } }, 2],
    [{ kind: "Job", spec: { parallelism: 2, completions: 10 } }, 2],
    [{ kind: "Job", spec: { parallelism: 4, suspend: true } }, 0],
    [{ kind: "CronJob", spec: { jobTemplate: { spec: { parallelism: 3 } } } }, 3],
    [{ kind: "CronJob", spec: {} }, 1],
  ])("%j → %p", (obj, pods) => {
    expect(podCount(obj as KubeObject)?.pods).toBe(pods);
  });

  it("a DaemonSet has no fixed count (node fit only)", () => {
    expect(podCount({ kind: "DaemonSet", spec: {} })).toBeUndefined();
  });
});
