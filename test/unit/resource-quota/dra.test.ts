// Devices claimed through DRA (capabilities/resource-quota/dra.ts) through the engine, as `check`
// and the webhook judge them: counted as the claim evaluator counts a claim, one claim per pod for
// a template, × the pods a workload or gang makes at once; node fit against ResourceSlices. The
// fixtures follow the resource.k8s.io API reference (v1beta1 as a 1.32 API server serves it; v1 for
// `exactly` and `firstAvailable`). Parity: the same objects in the live caches (projected as they
// arrive) give the same verdicts as the snapshot.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { policies } from "../../../capabilities";
import { resourceQuotaPolicy } from "../../../capabilities/resource-quota";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { LiveCluster } from "../../../lib/cluster/live";
import {
  claimTemplateAsRead,
  deviceCapacity,
  deviceClassAsRead,
  driverOfSelector,
  sliceAsRead,
} from "../../../lib/objects/dra";
import { DraCaches } from "../../../lib/cluster/dra-live";
import { cacheSynced } from "../../../lib/metrics";
import { valueOf } from "../metrics/support";
import { review } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import { defaultSettings } from "../../../lib/settings";
import { stringify } from "yaml";
import { run, tempTree } from "../cli/check-helpers";

const NS = "ml";
const CLASS = "gpu.example.com";
const DEVICES = `${CLASS}.deviceclass.resource.k8s.io/devices`;
const CLAIMS = "count/resourceclaims.resource.k8s.io";

const namespace: KubeObject = { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } };
const node = (name: string): KubeObject => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: { name, labels: { "kubernetes.io/hostname": name } },
  status: { allocatable: { cpu: "64", memory: "512Gi", pods: "110" } },
});

/** A DeviceClass whose selector is the driver match the reference's examples use. */
const deviceClass = (name = CLASS, expression = `device.driver == "${CLASS}"`): KubeObject => ({
  apiVersion: "resource.k8s.io/v1beta1",
  kind: "DeviceClass",
  metadata: { name },
  spec: { selectors: [{ cel: { expression } }] },
});

/** A v1beta1 ResourceClaimTemplate: `requests` as written in spec.spec.devices.requests. */
const claimTemplate = (
  name: string,
  requests: object[],
  apiVersion = "resource.k8s.io/v1beta1",
) => ({
  apiVersion,
  kind: "ResourceClaimTemplate",
  metadata: { name, namespace: NS },
  spec: { spec: { devices: { requests } } },
});
const exact = (count: number, deviceClassName = CLASS) => ({
  name: "gpus",
  deviceClassName,
  allocationMode: "ExactCount",
  count,
});

/** A ResourceSlice of one node's pool with `devices` devices. */
const slice = (nodeName: string, devices: number, extra: object = {}): KubeObject => ({
  apiVersion: "resource.k8s.io/v1beta1",
  kind: "ResourceSlice",
  metadata: { name: `${nodeName}-${CLASS}-x7k2p` },
  spec: {
    driver: CLASS,
    nodeName,
    pool: { name: nodeName, generation: 1, resourceSliceCount: 1 },
    devices: Array.from({ length: devices }, (_, i) => ({
      name: `gpu-${i}`,
      basic: { attributes: { model: { string: "h100" } }, capacity: { memory: { value: "80Gi" } } },
    })),
    ...extra,
  },
});

const quota = (
  hard: Record<string, string>,
  used: Record<string, string>,
  spec = {},
): KubeObject => ({
  apiVersion: "v1",
  kind: "ResourceQuota",
  metadata: { name: "dra", namespace: NS },
  spec: { hard, ...spec },
  status: { hard, used },
});

const podSpec = (claims: object[]) => ({
  containers: [
    {
      name: "infer",
      image: "ghcr.io/org/infer:1",
      resources: { claims: claims.map(c => ({ name: (c as { name: string }).name })) },
    },
  ],
  resourceClaims: claims,
});
const fromTemplate = (template: string, name = "gpus") => ({
  name,
  resourceClaimTemplateName: template,
});

const pod = (claims: object[]): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "infer", namespace: NS },
  spec: podSpec(claims),
});
const deployment = (replicas: number, claims: object[]): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "infer", namespace: NS },
  spec: {
    replicas,
    selector: { matchLabels: { app: "infer" } },
    template: { metadata: { labels: { app: "infer" } }, spec: podSpec(claims) },
  },
});

const base = (...objects: KubeObject[]) => [namespace, node("node-a"), deviceClass(), ...objects];
const judge = (obj: KubeObject, objects: KubeObject[], more = {}) =>
  review(policies, obj, {
    settings: defaultSettings(),
    cluster: new SnapshotCluster(objects),
    ...more,
  });
const quotaDenials = (r: Awaited<ReturnType<typeof judge>>) =>
  r.violations.filter(v => v.capability === "resource-quota");

describe("quota: a claim counted as the claim evaluator counts it", () => {
  it("ExactCount: a pod whose template asks 2 devices, 2 of 3 used: denied with the numbers and both fixes", async () => {
    const r = await judge(
      pod([fromTemplate("two-gpus")]),
      base(claimTemplate("two-gpus", [exact(2)]), quota({ [DEVICES]: "3" }, { [DEVICES]: "2" })),
    );
    expect(r.allowed).toBe(false);
    const [v] = quotaDenials(r);
    expect(v.rule).toBe("quota-exceeded");
    expect(v.message).toBe(
      `Pod ml/infer exceeds the namespace quota with the ResourceClaims its pods get: ${DEVICES}: pod asks 2 (ResourceClaimTemplate two-gpus asks 2 (request gpus: 2 of class ${CLASS})), quota dra has 1 of 3 left (2 used)`,
    );
    expect(v.fix).toContain(
      `ask fewer devices of class ${CLASS} in ResourceClaimTemplate two-gpus (spec.spec.devices.requests[].count)`,
    );
    expect(v.fix).toContain(
      `kubectl patch resourcequota dra -n ml --type merge -p '{"spec":{"hard":{"${DEVICES}":"4"}}}'`,
    );
  });

  it("ExactCount within the quota: allowed, and count defaults to 1", async () => {
    const r = await judge(
      pod([fromTemplate("one-gpu")]),
      base(
        claimTemplate("one-gpu", [{ name: "gpu", deviceClassName: CLASS }]),
        quota({ [DEVICES]: "3", [CLAIMS]: "5" }, { [DEVICES]: "2", [CLAIMS]: "4" }),
      ),
    );
    expect(quotaDenials(r)).toEqual([]);
    expect(r.allowed).toBe(true);
  });

  it("All counts 32 devices, the most an allocation holds", async () => {
    const r = await judge(
      pod([fromTemplate("all-gpus")]),
      base(
        claimTemplate("all-gpus", [
          { name: "gpus", deviceClassName: CLASS, allocationMode: "All" },
        ]),
        quota({ [DEVICES]: "40" }, { [DEVICES]: "9" }),
      ),
    );
    expect(quotaDenials(r)[0].message).toContain(
      `${DEVICES}: pod asks 32 (ResourceClaimTemplate all-gpus asks 32 (request gpus: All of class ${CLASS}, counted as 32))`,
    );
    const fits = await judge(
      pod([fromTemplate("all-gpus")]),
      base(
        claimTemplate("all-gpus", [
          { name: "gpus", deviceClassName: CLASS, allocationMode: "All" },
        ]),
        quota({ [DEVICES]: "40" }, { [DEVICES]: "8" }),
      ),
    );
    expect(fits.allowed).toBe(true);
  });

  it("firstAvailable (v1): each class charged its largest alternative; `exactly` read too", async () => {
    const SMALL = "small-gpu.example.com";
    const template = claimTemplate(
      "flexible",
      [
        {
          name: "gpu",
          firstAvailable: [
            { name: "big", deviceClassName: CLASS, allocationMode: "ExactCount", count: 1 },
            { name: "two-small", deviceClassName: SMALL, allocationMode: "ExactCount", count: 2 },
            { name: "four-small", deviceClassName: SMALL, allocationMode: "ExactCount", count: 4 },
          ],
        },
        { name: "nic", exactly: { deviceClassName: CLASS, count: 1 } },
      ],
      "resource.k8s.io/v1",
    );
    const smallDevices = `${SMALL}.deviceclass.resource.k8s.io/devices`;
    const r = await judge(
      pod([fromTemplate("flexible")]),
      base(
        template,
        quota({ [DEVICES]: "2", [smallDevices]: "3" }, { [DEVICES]: "0", [smallDevices]: "0" }),
      ),
    );
    const [v] = quotaDenials(r);
    // class gpu: 1 (firstAvailable) + 1 (exactly) = 2 fits 2; small: the larger of 2 and 4 = 4 > 3.
    expect(v.message).not.toMatch(new RegExp(`(: |; )${DEVICES.replace(/\./g, "\\.")}`));
    expect(v.message).toContain(`${smallDevices}: pod asks 4`);
    expect(v.message).toContain(`firstAvailable, its largest alternative of class ${SMALL}: 4`);
    // One device less of class gpu and it is short too: it asks exactly 2.
    const tighter = await judge(
      pod([fromTemplate("flexible")]),
      base(template, quota({ [DEVICES]: "1" }, { [DEVICES]: "0" })),
    );
    expect(quotaDenials(tighter)[0].message).toContain(`: ${DEVICES}: pod asks 2 (`);
  });

  it("a shared claim (resourceClaimName) exists already and counts in the quota's usage: nothing added", async () => {
    const r = await judge(
      pod([{ name: "gpus", resourceClaimName: "shared-gpus" }]),
      base(quota({ [DEVICES]: "2", [CLAIMS]: "1" }, { [DEVICES]: "2", [CLAIMS]: "1" })),
    );
    expect(r.allowed).toBe(true);
    expect(r.warnings.join("\n")).not.toContain("DRA");
  });

  it("a template the cluster view does not have: not counted, a warning, never a denial", async () => {
    const full = quota({ [DEVICES]: "1" }, { [DEVICES]: "1" });
    // The snapshot holds no ResourceClaimTemplate at all: not known.
    const unknown = await judge(pod([fromTemplate("two-gpus")]), base(full));
    expect(unknown.allowed).toBe(true);
    expect(unknown.warnings.join("\n")).toContain(
      "DRA devices not checked for Pod ml/infer (quota, node fit): ResourceClaimTemplate two-gpus (spec.resourceClaims[0]) is not in the cluster snapshot",
    );
    // It holds others: this one does not exist (yet).
    const missing = await judge(
      pod([fromTemplate("two-gpus")]),
      base(full, claimTemplate("other", [exact(1)])),
    );
    expect(missing.allowed).toBe(true);
    expect(missing.warnings.join("\n")).toContain(
      "ResourceClaimTemplate two-gpus (spec.resourceClaims[0]) does not exist in namespace ml (yet)",
    );
  });

  it("a Deployment: one claim per pod × replicas, with the replicas that fit", async () => {
    const objects = base(
      claimTemplate("two-gpus", [exact(2)]),
      quota({ [DEVICES]: "3", [CLAIMS]: "10" }, { [DEVICES]: "0", [CLAIMS]: "0" }),
    );
    const r = await judge(deployment(2, [fromTemplate("two-gpus")]), objects);
    const [v] = quotaDenials(r);
    expect(v.message).toContain(
      `${DEVICES}: Deployment asks 4 (2 replicas × 2; ResourceClaimTemplate two-gpus asks 2 (request gpus: 2 of class ${CLASS})), quota dra has 3 of 3 left (0 used)`,
    );
    expect(v.message).not.toContain(CLAIMS);
    expect(v.fix).toMatch(/^lower spec\.replicas from 2 to at most 1; or /);
    expect((await judge(deployment(1, [fromTemplate("two-gpus")]), objects)).allowed).toBe(true);
  });

  it("count/resourceclaims: every template entry is one claim per pod", async () => {
    const objects = base(
      claimTemplate("one-gpu", [exact(1)]),
      quota({ [CLAIMS]: "5" }, { [CLAIMS]: "0" }),
    );
    const r = await judge(
      deployment(3, [fromTemplate("one-gpu", "a"), fromTemplate("one-gpu", "b")]),
      objects,
    );
    expect(quotaDenials(r)[0].message).toContain(`${CLAIMS}: Deployment asks 6 (3 replicas × 2;`);
  });

  it("a quota with scopes never counts claims (the evaluator matches no scope)", async () => {
    const r = await judge(
      pod([fromTemplate("two-gpus")]),
      base(
        claimTemplate("two-gpus", [exact(2)]),
        quota({ [DEVICES]: "1" }, { [DEVICES]: "1" }, { scopes: ["NotBestEffort"] }),
      ),
    );
    expect(quotaDenials(r)).toEqual([]);
  });

  it("on UPDATE only what it adds: 2 → 3 replicas adds 2 devices", async () => {
    const objects = base(
      claimTemplate("two-gpus", [exact(2)]),
      quota({ [DEVICES]: "5" }, { [DEVICES]: "4" }),
    );
    const r = await judge(deployment(3, [fromTemplate("two-gpus")]), objects, {
      operation: "UPDATE",
      oldObject: deployment(2, [fromTemplate("two-gpus")]),
    });
    expect(quotaDenials(r)[0].message).toContain(
      `${DEVICES}: the update adds 2 (now 3 replicas × 2;`,
    );
    const same = await judge(deployment(2, [fromTemplate("two-gpus")]), objects, {
      operation: "UPDATE",
      oldObject: deployment(2, [fromTemplate("two-gpus")]),
    });
    expect(same.allowed).toBe(true);
  });
});

describe("a gang: every role's claims × its pods at once", () => {
  const template = (gpus: string) => ({
    metadata: { labels: { app: "llama" } },
    spec: podSpec([fromTemplate(gpus)]),
  });
  const pytorchJob = (workers: number): KubeObject => ({
    apiVersion: "kubeflow.org/v1",
    kind: "PyTorchJob",
    metadata: { name: "llama", namespace: NS },
    spec: {
      pytorchReplicaSpecs: {
        Master: { replicas: 1, template: template("one-gpu") },
        Worker: { replicas: workers, template: template("two-gpus") },
      },
    },
  });
  const objects = base(
    claimTemplate("one-gpu", [exact(1)]),
    claimTemplate("two-gpus", [exact(2)]),
    quota({ [DEVICES]: "6" }, { [DEVICES]: "0" }),
  );

  it("1 master × 1 + 3 workers × 2 = 7 devices over 6: denied with the per-role breakdown", async () => {
    const r = await judge(pytorchJob(3), objects);
    expect(r.allowed).toBe(false);
    const [v] = quotaDenials(r);
    expect(v.message).toContain(
      "PyTorchJob ml/llama exceeds the namespace quota with the ResourceClaims its pods get as a whole (its pods start together)",
    );
    expect(v.message).toContain(
      `${DEVICES}: its pods ask 7 at once (Master: 1 × 1, Worker: 3 × 2;`,
    );
    expect(v.fix).toContain("lower spec.pytorchReplicaSpecs.Worker.replicas from 3 to at most 2");
    expect(v.fix).toContain("kueue.x-k8s.io/queue-name");
  });

  it("2 workers fit", async () => {
    expect(quotaDenials(await judge(pytorchJob(2), objects))).toEqual([]);
  });
});

describe("node fit against the nodes' ResourceSlices", () => {
  const fourGpus = claimTemplate("four-gpus", [exact(4)]);

  it("4 devices per pod, nodes with 2 each: denied, naming the largest node", async () => {
    const r = await judge(
      pod([fromTemplate("four-gpus")]),
      base(fourGpus, slice("node-a", 2), slice("node-b", 2)),
    );
    const fit = r.violations.filter(v => v.rule === "node-fit");
    expect(fit).toHaveLength(1);
    expect(fit[0].message).toBe(
      `Pod ml/infer fits no node: each pod's ResourceClaims ask 4 devices of DRA driver ${CLASS} on one node (ResourceClaimTemplate four-gpus request gpus: 4 of class ${CLASS}); the most any node's ResourceSlices offer is 2 (node node-a, 2 nodes with any)`,
    );
    expect(fit[0].fix).toContain("ask at most 2 devices of driver gpu.example.com per pod");
  });

  it("a node's pool over two slices counts whole; an older generation does not", async () => {
    const split = [
      slice("node-a", 2, { pool: { name: "node-a", generation: 2, resourceSliceCount: 2 } }),
      {
        ...slice("node-a", 2, { pool: { name: "node-a", generation: 2, resourceSliceCount: 2 } }),
        metadata: { name: "node-a-2" },
      },
      {
        ...slice("node-a", 8, { pool: { name: "node-a", generation: 1, resourceSliceCount: 1 } }),
        metadata: { name: "node-a-old" },
      },
    ];
    const r = await judge(pod([fromTemplate("four-gpus")]), base(fourGpus, ...split));
    expect(r.violations.filter(v => v.rule === "node-fit")).toEqual([]);
    expect(deviceCapacity(split.map(sliceAsRead)).get(CLASS)).toEqual({
      most: 4,
      node: "node-a",
      nodes: 1,
      shared: false,
    });
  });

  it("devices several nodes reach (allNodes, nodeSelector): not checked, a warning", async () => {
    const network = slice("", 8, {
      nodeName: undefined,
      allNodes: true,
      pool: { name: "fabric", generation: 1, resourceSliceCount: 1 },
    });
    const r = await judge(
      pod([fromTemplate("four-gpus")]),
      base(fourGpus, slice("node-a", 2), network),
    );
    expect(r.violations.filter(v => v.rule === "node-fit")).toEqual([]);
    expect(r.warnings.join("\n")).toContain(
      `node fit not checked for the DRA devices of Pod ml/infer: driver ${CLASS} offers devices that several nodes reach (not node-local)`,
    );
  });

  it("a class whose CEL selects by more than the driver: not checked, never denied", async () => {
    const r = await judge(pod([fromTemplate("four-gpus")]), [
      namespace,
      node("node-a"),
      deviceClass(
        CLASS,
        `device.driver == "${CLASS}" && device.attributes["${CLASS}"].model == "h100"`,
      ),
      fourGpus,
      slice("node-a", 2),
    ]);
    expect(r.violations.filter(v => v.rule === "node-fit")).toEqual([]);
    expect(r.warnings.join("\n")).toContain(
      `DeviceClass ${CLASS} selects devices by more than their driver (its CEL selectors are not evaluated here)`,
    );
  });

  it("no ResourceSlice in the snapshot: not checked, a warning", async () => {
    const r = await judge(pod([fromTemplate("four-gpus")]), base(fourGpus));
    expect(r.allowed).toBe(true);
    expect(r.warnings.join("\n")).toContain("the cluster snapshot holds no ResourceSlice");
  });

  it("a role of a gang: its one pod against the slices", async () => {
    const job: KubeObject = {
      apiVersion: "kubeflow.org/v1",
      kind: "PyTorchJob",
      metadata: { name: "llama", namespace: NS },
      spec: {
        pytorchReplicaSpecs: {
          Worker: { replicas: 2, template: { spec: podSpec([fromTemplate("four-gpus")]) } },
        },
      },
    };
    const r = await judge(job, base(fourGpus, slice("node-a", 2)));
    expect(r.violations.find(v => v.rule === "node-fit")?.message).toMatch(
      /^PyTorchJob ml\/llama \(role Worker\) fits no node: each pod's ResourceClaims ask 4 devices/,
    );
  });
});

describe("projections (what the caches keep)", () => {
  it("driver selectors are read exactly, anything else is not", () => {
    expect(driverOfSelector(`device.driver == "gpu.example.com"`)).toBe("gpu.example.com");
    expect(driverOfSelector(` 'gpu.example.com' == device.driver `)).toBe("gpu.example.com");
    expect(driverOfSelector(`device.driver != "gpu.example.com"`)).toBeUndefined();
    expect(driverOfSelector(`device.driver == "a" || true`)).toBeUndefined();
    expect(deviceClassAsRead(deviceClass()).driver).toBe(CLASS);
    expect(deviceClassAsRead({ metadata: { name: "any" }, spec: {} }).driver).toBeUndefined();
  });

  it("a namespace admin's template of 10,000 requests keeps the 32 the API server allows, alternatives 8", () => {
    const many = claimTemplateAsRead(
      claimTemplate(
        "t",
        Array.from({ length: 10_000 }, () => exact(1)),
      ),
    );
    expect(many.requests).toHaveLength(32);
    const alternatives = claimTemplateAsRead(
      claimTemplate("t", [
        { name: "any", firstAvailable: Array.from({ length: 1_000 }, () => exact(1)) },
      ]),
    );
    expect(alternatives.requests[0].firstAvailable).toHaveLength(8);
    // A selector too long to be a driver's name is not read (nor matched by a regex).
    expect(driverOfSelector(`device.driver == "${"a".repeat(5_000)}"`)).toBeUndefined();
  });

  it("a template keeps its requests only; bad input gives no request, not a crash", () => {
    expect(claimTemplateAsRead(claimTemplate("t", [exact(3)]))).toEqual({
      apiVersion: "resource.k8s.io/v1beta1",
      kind: "ResourceClaimTemplate",
      metadata: { name: "t", namespace: NS },
      requests: [
        {
          name: "gpus",
          field: "spec.spec.devices.requests[0]",
          exactly: { deviceClassName: CLASS, mode: "ExactCount", devices: 3 },
        },
      ],
    });
    expect(
      claimTemplateAsRead({ spec: { spec: { devices: { requests: "x" } } } }).requests,
    ).toEqual([]);
    expect(claimTemplateAsRead(null).requests).toEqual([]);
  });

  it("a slice keeps driver, pool, node and a device count", () => {
    expect(sliceAsRead(slice("node-a", 3))).toEqual({
      apiVersion: "resource.k8s.io/v1beta1",
      kind: "ResourceSlice",
      metadata: { name: `node-a-${CLASS}-x7k2p` },
      driver: CLASS,
      pool: "node-a",
      generation: 1,
      node: "node-a",
      devices: 3,
    });
  });
});

describe("parity: the live caches and the snapshot answer alike", () => {
  const objects = base(
    claimTemplate("two-gpus", [exact(2)]),
    claimTemplate("four-gpus", [exact(4)]),
    quota({ [DEVICES]: "3" }, { [DEVICES]: "0" }),
    slice("node-a", 2),
  );
  const live = () => {
    const cluster = new LiveCluster(undefined, { dra: { probe: async () => false } });
    const feed = (
      store: { apply: (o: never, p: string) => void; synced: boolean },
      kind: string,
    ) => {
      for (const o of objects.filter(x => x.kind === kind))
        store.apply(structuredClone(o) as never, "ADDED");
      store.synced = true;
    };
    feed(cluster.namespaces as never, "Namespace");
    feed(cluster.quotas as never, "ResourceQuota");
    feed(cluster.limitRangeStore as never, "LimitRange");
    feed(cluster.nodeStore as never, "Node");
    cluster.dra.watch("v1beta1");
    feed(cluster.dra.templates as never, "ResourceClaimTemplate");
    feed(cluster.dra.classes as never, "DeviceClass");
    feed(cluster.dra.slices as never, "ResourceSlice");
    return cluster;
  };
  const cases: [string, KubeObject][] = [
    ["a Deployment over the device quota", deployment(2, [fromTemplate("two-gpus")])],
    ["a Pod within it", pod([fromTemplate("one-gpu-missing")])],
    ["a Pod that fits no node", pod([fromTemplate("four-gpus")])],
    ["a Pod with a shared claim", pod([{ name: "gpus", resourceClaimName: "shared" }])],
  ];
  it.each(cases)("%s", async (_name, obj) => {
    const settings = defaultSettings();
    const fromLive = await review([resourceQuotaPolicy], obj, { settings, cluster: live() });
    const fromSnapshot = await review([resourceQuotaPolicy], obj, {
      settings,
      cluster: new SnapshotCluster(objects),
    });
    expect(fromLive.allowed).toBe(fromSnapshot.allowed);
    expect(fromLive.denials).toEqual(fromSnapshot.denials);
    // Only the "not known" wording of a missing source differs (cache vs snapshot): none here.
    expect(fromLive.warnings).toEqual(fromSnapshot.warnings);
  });
});

describe("the live caches when the API server serves no DRA", () => {
  it("404 on every version: not known (no denial, no cache), probed again later", async () => {
    jest.useFakeTimers();
    try {
      const asked: string[] = [];
      const dra = new DraCaches(undefined, {
        probe: async v => (asked.push(v), false),
        probeEveryMs: 1000,
      });
      dra.start();
      await jest.advanceTimersByTimeAsync(10);
      expect(asked).toEqual(["v1", "v1beta2", "v1beta1"]);
      expect(dra.resourceClaimTemplate(NS, "x")).toBeUndefined();
      expect(dra.deviceCapacity()).toBeUndefined();
      await jest.advanceTimersByTimeAsync(1000);
      expect(asked).toHaveLength(6);
      dra.stop();
      await jest.advanceTimersByTimeAsync(5000);
      expect(asked).toHaveLength(6);
    } finally {
      jest.useRealTimers();
    }
  });

  it("the newest version served is watched: its three stores started, and on /metrics from then on", async () => {
    const started: string[] = [];
    const dra = new DraCaches(undefined, {
      probe: async v => v === "v1beta1",
      startStore: async store =>
        void started.push(String((store as unknown as { what: string }).what)),
    });
    const DRA_CACHES = ["resourceclaimtemplates", "deviceclasses", "resourceslices"];
    const synced = () => Promise.all(DRA_CACHES.map(cache => valueOf(cacheSynced, { cache })));
    // The test before probed a cluster without DRA: no cache of it on /metrics, none failing.
    expect(await synced()).toEqual([undefined, undefined, undefined]);
    dra.start();
    await new Promise(done => setImmediate(done));
    expect(dra.version).toBe("v1beta1");
    expect(started).toEqual([
      "resourceclaimtemplates.resource.k8s.io",
      "deviceclasses.resource.k8s.io",
      "resourceslices.resource.k8s.io",
    ]);
    // Served, not listed yet (the stores' start is a stand-in here): each says so.
    expect(await synced()).toEqual([0, 0, 0]);
    dra.classes!.synced = true;
    expect(await valueOf(cacheSynced, { cache: "deviceclasses" })).toBe(1);
    dra.stop();
  });
});

describe("check: templates applied with the manifests count, unless the snapshot has the kind", () => {
  const manifests = [
    claimTemplate("two-gpus", [exact(2)]),
    deployment(2, [fromTemplate("two-gpus")]),
  ];
  const snapshot = (more: KubeObject[] = []) =>
    [namespace, quota({ [DEVICES]: "3" }, { [DEVICES]: "0" }), ...more]
      .map(o => stringify(o))
      .join("---\n");
  const check = (cluster: string) => {
    const dir = tempTree({
      "app.yaml": manifests.map(o => stringify(o)).join("---\n"),
      "cluster.yaml": cluster,
    });
    return run(["check", "app.yaml", "--cluster", "cluster.yaml", "-o", "json"], {
      cwd: dir,
      policies: [resourceQuotaPolicy],
    });
  };

  it("the template in the file: the Deployment is denied with the numbers", async () => {
    const r = await check(snapshot());
    expect(r.stderr).toBe("");
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(`${DEVICES}: Deployment asks 4 (2 replicas × 2;`);
  });

  it("a snapshot with templates (not this one): the cluster's word counts, not checked", async () => {
    const r = await check(snapshot([claimTemplate("other", [exact(1)])]));
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(
      "ResourceClaimTemplate two-gpus (spec.template.spec.resourceClaims[0]) does not exist in namespace ml (yet)",
    );
  });
});

test("package.json pepr.rbac grants list and watch on the DRA kinds the caches read", () => {
  const pkg = JSON.parse(readFileSync(join(__dirname, "../../../package.json"), "utf8"));
  const rules = pkg.pepr.rbac as { apiGroups: string[]; resources: string[]; verbs: string[] }[];
  for (const resource of ["resourceclaimtemplates", "deviceclasses", "resourceslices"])
    for (const verb of ["list", "watch"])
      expect(
        rules.some(
          r =>
            r.apiGroups.includes("resource.k8s.io") &&
            r.resources.includes(resource) &&
            r.verbs.includes(verb),
        ),
      ).toBe(true);
});
