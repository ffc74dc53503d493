// In-place resize (pods/resize, Kubernetes 1.33+): the one way a running pod's resources change.
// It reaches the validating webhook as a Pod UPDATE whose object is the whole Pod; the module
// judges what it adds to the quota and whether the pod's own node can give it at all (the kubelet
// leaves a resize past its node's allocatable Infeasible). Why: docs/adr/0029-pod-resize-is-judged.md
import { policies } from "../../../capabilities";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { review } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import { defaultSettings } from "../../../lib/settings";
import { container, node, resourceQuota, type Res } from "./support";

const NS = "serving";
const cluster = () =>
  new SnapshotCluster([
    { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
    // 3 of 4 CPUs used, 1 of them by the pod below.
    resourceQuota(NS, "compute", { "requests.cpu": "4" }, { "requests.cpu": "3" }),
    node("n1", { cpu: "8", memory: "32Gi", pods: "110" }),
    node("big", { cpu: "64", memory: "256Gi", pods: "110" }),
  ] as KubeObject[]);

/** The pod as stored: running on n1. */
const pod = (resources: Res, more: Record<string, unknown> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "server", namespace: NS, uid: "u-1", ...more },
  spec: { nodeName: "n1", containers: [container("server", resources)] },
});

const resize = (cpu: string, from = "1") =>
  review(policies, pod({ requests: { cpu }, limits: { cpu } }), {
    settings: defaultSettings(),
    cluster: cluster(),
    operation: "UPDATE",
    oldObject: pod({ requests: { cpu: from }, limits: { cpu: from } }),
  });

const rules = (r: Awaited<ReturnType<typeof review>>) =>
  r.violations.map(v => `${v.capability}/${v.rule}`);

describe("a pod resized in place", () => {
  it("within the quota and its node: admitted", async () => {
    const r = await resize("2");
    expect(rules(r)).toEqual([]);
    expect(r.allowed).toBe(true);
  });

  it("past the quota: denied for what the resize adds, not for what the pod had", async () => {
    const r = await resize("3");
    expect(r.allowed).toBe(false);
    const v = r.violations.find(x => x.rule === "quota-exceeded")!;
    expect(v.message).toContain(
      "requests.cpu: the resize adds 2 (the pod asked 1), quota compute has 1 of 4 left (3 used)",
    );
  });

  it("past its own node's allocatable (another node would do): denied, naming its node", async () => {
    const r = await review(policies, pod({ requests: { cpu: "12" }, limits: { cpu: "12" } }), {
      settings: defaultSettings(),
      cluster: new SnapshotCluster([
        { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
        node("n1", { cpu: "8", memory: "32Gi", pods: "110" }),
        node("big", { cpu: "64", memory: "256Gi", pods: "110" }),
      ] as KubeObject[]),
      operation: "UPDATE",
      oldObject: pod({ requests: { cpu: "1" }, limits: { cpu: "1" } }),
    });
    expect(rules(r)).toEqual(["resource-quota/node-fit"]);
    expect(r.violations[0].message).toContain('node "n1"');
  });

  it("a shrink, and an update that resizes nothing, are never refused", async () => {
    expect((await resize("1", "3")).allowed).toBe(true);
    // The stored pod already over the quota (admitted earlier): a label added is not judged.
    const over = pod({ requests: { cpu: "9" }, limits: { cpu: "9" } });
    const relabelled = pod(
      { requests: { cpu: "9" }, limits: { cpu: "9" } },
      { labels: { tier: "x" } },
    );
    const r = await review(policies, relabelled, {
      settings: defaultSettings(),
      cluster: cluster(),
      operation: "UPDATE",
      oldObject: over,
    });
    expect(r.violations).toEqual([]);
  });
});

test("the quota denial of a resize says by how much to lower it", async () => {
  const r = await resize("3");
  const v = r.violations.find(x => x.rule === "quota-exceeded")!;
  expect(v.fix).toMatch(/^lower the pod's requests\.cpu to at most 2 \(container "server"/);
  expect(v.fix).toContain(`"requests.cpu":"5"`);
});
