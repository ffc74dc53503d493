// Node fit judged per node class (capabilities/resource-quota/node-classes.ts), or on the named
// nodes only, says exactly what judging node by node says, on generated clusters and pods; the
// grouping is made once per node list; and a large cluster of a few instance types makes a few
// classes.
import fc from "fast-check";
import type { V1Node, V1PodSpec, V1Taint, V1Toleration } from "@kubernetes/client-node";
import {
  namesOf,
  nodeClasses,
  nodeIdentityMatters,
  singleNodeClasses,
} from "../../../capabilities/resource-quota/node-classes";
import { checkNodeFit, type NodeFitInput } from "../../../capabilities/resource-quota/node-fit";
import { podResources } from "../../../capabilities/resource-quota/resources";

const HOSTNAME = "kubernetes.io/hostname";
const NAMES = Array.from({ length: 20 }, (_, i) => `n${i}`);

const ALLOCATABLES: Record<string, string>[] = [
  { cpu: "4", memory: "16Gi", "ephemeral-storage": "100Gi", pods: "110" },
  { cpu: "4000m", memory: "16384Mi", "ephemeral-storage": "100Gi", pods: "110" }, // same, other units
  { cpu: "16", memory: "8Gi" },
  { cpu: "32", memory: "4Gi" },
  { cpu: "8", memory: "64Gi", "nvidia.com/gpu": "2" },
  { cpu: "2" }, // no memory: not judged on memory
  { cpu: "64", memory: "256Gi", "nvidia.com/gpu": "8", "hugepages-1Gi": "4Gi" },
];
const TAINTS: V1Taint[] = [
  { key: "nvidia.com/gpu", value: "present", effect: "NoSchedule" },
  { key: "dedicated", value: "ml", effect: "NoExecute" },
  { key: "spot", effect: "NoSchedule" },
  { key: "soft", value: "x", effect: "PreferNoSchedule" },
];
const SHARED_LABELS = {
  pool: fc.constantFrom("cpu", "gpu"),
  "topology.kubernetes.io/zone": fc.constantFrom("z1", "z2"),
  generation: fc.constantFrom("2", "4"),
};
const sometimes = <T>(arb: fc.Arbitrary<T>, weight: number, otherwise: T) =>
  fc.oneof({ weight, arbitrary: arb }, { weight: 10 - weight, arbitrary: fc.constant(otherwise) });

// What the nodes of one pool share. A cluster is a few pools, so that nodes often share a
// signature, while the hostname label and the taints' order vary per node.
const poolArb = (allocatables: Record<string, string>[]) =>
  fc.record({
    labels: fc.record(SHARED_LABELS, { requiredKeys: [] }),
    taints: sometimes(fc.subarray(TAINTS, { minLength: 1 }), 3, []),
    unschedulable: fc.constantFrom(undefined, undefined, undefined, false, false, true),
    allocatable: fc.constantFrom(...allocatables),
  });
// A first pool and variants of it that differ in one field at most: what tells classes apart is
// exercised one field at a time.
const poolsArb = (allocatables: Record<string, string>[]) =>
  poolArb(allocatables).chain(base => {
    const other = poolArb(allocatables);
    return fc
      .array(
        fc.oneof(
          fc.constant(base),
          other.map(p => ({ ...base, labels: p.labels })),
          other.map(p => ({ ...base, taints: p.taints })),
          other.map(p => ({ ...base, unschedulable: p.unschedulable })),
          other.map(p => ({ ...base, allocatable: p.allocatable })),
        ),
        { maxLength: 3 },
      )
      .map(variants => [base, ...variants]);
  });
type Pool = ReturnType<typeof poolArb> extends fc.Arbitrary<infer P> ? P : never;
const nodeOf = (pool: Pool, name: string, hostname: string, reversed: boolean): V1Node => ({
  metadata: {
    name,
    labels: {
      ...pool.labels,
      ...(hostname === "none" ? {} : { [HOSTNAME]: hostname === "same" ? name : "h" }),
    },
  },
  spec: {
    unschedulable: pool.unschedulable,
    taints: reversed ? [...pool.taints].reverse() : pool.taints,
  },
  status: { allocatable: pool.allocatable },
});
// Malformed entries: never grouped with well-formed nodes by mistake, never a crash.
const MALFORMED: unknown[] = [
  null,
  "node",
  { metadata: { name: "odd-labels", labels: { pool: 1 } }, status: { allocatable: {} } },
  { metadata: { name: "odd-taint" }, spec: { taints: [{ key: 7, effect: "NoSchedule" }] } },
  { metadata: { name: "no-status" } },
];
// Each well-formed node is named after its place in the list: n0, n1, ...
const clusterArb = (allocatables = ALLOCATABLES): fc.Arbitrary<V1Node[]> =>
  poolsArb(allocatables)
    .chain(pools =>
      fc.array(
        fc.oneof(
          {
            weight: 30,
            arbitrary: fc
              .record({
                pool: fc.constantFrom(...pools),
                hostname: fc.constantFrom("same", "same", "other", "none"),
                reversed: fc.boolean(),
              })
              .map(n => (name: string) => nodeOf(n.pool, name, n.hostname, n.reversed)),
          },
          { weight: 1, arbitrary: fc.constantFrom(...MALFORMED) },
        ),
        { minLength: 1, maxLength: 20 },
      ),
    )
    .map(entries => entries.map((e, i) => (typeof e === "function" ? e(`n${i}`) : (e as V1Node))));
// Nodes each large in one resource only: most pods fit none, and the message names the largest
// node per resource or the closest one.
const LOPSIDED: Record<string, string>[] = [
  { cpu: "16", memory: "8Gi" },
  { cpu: "4", memory: "16Gi" },
  { cpu: "4000m", memory: "16Gi", "nvidia.com/gpu": "1" },
  { cpu: "2", memory: "2Gi" },
];

/** What node fit is asked about a pod spec (of a DaemonSet's template, or of a pod). */
const fitInput = (subject: string, spec: V1PodSpec, daemonSet: boolean): NodeFitInput => ({
  subject,
  spec,
  pod: podResources({ metadata: {}, spec, path: "" }, { requests: new Map(), limits: new Map() }),
  daemonSet,
});

const toleration = fc.constantFrom<V1Toleration>(
  { key: "nvidia.com/gpu", operator: "Exists" },
  { key: "dedicated", operator: "Equal", value: "ml", effect: "NoExecute" },
  { key: "spot", operator: "Exists", effect: "NoSchedule" },
  { key: "node.kubernetes.io/unschedulable", operator: "Exists" },
  { operator: "Exists" },
);
const selectorKey = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...Object.keys(SHARED_LABELS)) },
  { weight: 1, arbitrary: fc.constant(HOSTNAME) },
);
const expression = fc.record({
  key: selectorKey,
  operator: fc.constantFrom("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"),
  values: fc.subarray(["cpu", "gpu", "z1", "2", "3", "n1", "n2", "new"], {
    minLength: 1,
    maxLength: 2,
  }),
});
const nameField = fc.record({
  key: fc.constant("metadata.name"),
  operator: fc.constantFrom("In", "NotIn"),
  values: fc.subarray(NAMES.slice(0, 4), { minLength: 1, maxLength: 2 }),
});
const ask = (values: string[], weight: number) =>
  sometimes(fc.constantFrom<string | undefined>(...values), weight, undefined);

const podArb = fc
  .record({
    cpu: ask(["100m", "3", "6", "12", "20", "100"], 8),
    memory: ask(["1Gi", "10Gi", "20Gi", "100Gi", "300Gi"], 8),
    gpu: ask(["1", "4", "16"], 3),
    other: ask(["1"], 1), // offered by no node
    limitFactor: fc.constantFrom(1, 2, 8),
    nodeSelector: sometimes(
      fc.oneof(
        { weight: 5, arbitrary: fc.record(SHARED_LABELS, { requiredKeys: [] }) },
        { weight: 1, arbitrary: fc.record({ [HOSTNAME]: fc.constantFrom("n1", "h") }) },
      ),
      3,
      undefined,
    ),
    terms: sometimes(
      fc.array(
        fc.record({
          matchExpressions: fc.array(expression, { maxLength: 2 }),
          matchFields: sometimes(
            fc.tuple(nameField).map(f => [...f]),
            2,
            [],
          ),
        }),
        { minLength: 1, maxLength: 2 },
      ),
      3,
      undefined,
    ),
    tolerationPicks: fc.array(toleration, { maxLength: 3 }),
    nodeName: sometimes(fc.constantFrom(...NAMES.slice(0, 4), "absent"), 1, undefined),
    daemonSet: fc.boolean(),
    hostNetwork: fc.boolean(),
  })
  .map((p): NodeFitInput => {
    const requests: Record<string, string> = {};
    const limits: Record<string, string> = {};
    const asks = (resource: string, value: string | undefined) => {
      if (!value) return;
      requests[resource] = value;
      limits[resource] = value.replace(/^\d+/, n => String(Number(n) * p.limitFactor));
    };
    asks("cpu", p.cpu);
    asks("memory", p.memory);
    asks("nvidia.com/gpu", p.gpu);
    asks("example.com/widget", p.other);
    const spec: V1PodSpec = {
      containers: [{ name: "main", image: "x", resources: { requests, limits } }],
      nodeSelector: p.nodeSelector,
      affinity: p.terms && {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: p.terms },
        },
      },
      tolerations: p.tolerationPicks,
      nodeName: p.nodeName,
      hostNetwork: p.hostNetwork,
    };
    return fitInput("Pod ml/train", spec, p.daemonSet);
  });

// Pods that name their nodes, as DaemonSet pods do (metadata.name In in every required term) or
// with spec.nodeName; now and then a term without such a field (then nodes are judged one by one).
const NAMED = [...NAMES.slice(0, 6), "absent", "odd-labels", "renamed", ""];
const namingTerm = fc.record({
  matchExpressions: sometimes(fc.array(expression, { minLength: 1, maxLength: 2 }), 4, []),
  matchFields: fc
    .tuple(
      fc.record({
        key: fc.constant("metadata.name"),
        operator: fc.constant("In"),
        values: fc.subarray(NAMED, { minLength: 0, maxLength: 3 }),
      }),
      sometimes(
        fc.tuple(nameField).map(f => [...f]),
        2,
        [],
      ),
    )
    .map(([named, more]) => [...more, named]),
});
const namedPodArb = fc
  .record({
    input: podArb,
    nodeName: sometimes(fc.constantFrom(...NAMED), 3, undefined),
    terms: fc.array(
      fc.oneof({ weight: 8, arbitrary: namingTerm }, { weight: 1, arbitrary: fc.constant({}) }),
      { minLength: 1, maxLength: 3 },
    ),
  })
  .map(({ input, nodeName, terms }): NodeFitInput => {
    const affinity = {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms },
      },
    };
    return { ...input, spec: { ...input.spec, nodeName, affinity } };
  });
// Malformed lists repeat names: nodes renamed n0..n3 by their place, the same object repeated.
const repeatedNamesArb = fc
  .tuple(clusterArb(), fc.boolean())
  .map(([nodes, repeat]) =>
    repeat
      ? nodes.map((n, i) =>
          n && typeof n === "object" ? { ...n, metadata: { ...n.metadata, name: `n${i % 4}` } } : n,
        )
      : [...nodes, ...nodes.slice(0, 2)],
  );

/** Node fit as judged by default says exactly what judging node by node says. */
const agreesWithPerNode = (
  clusters: fc.Arbitrary<V1Node[]>,
  pods: fc.Arbitrary<NodeFitInput>,
  numRuns: number,
) =>
  fc.assert(
    fc.property(clusters, pods, (nodes, input) => {
      expect(checkNodeFit(nodes, input)).toEqual(checkNodeFit(nodes, input, singleNodeClasses));
    }),
    { numRuns },
  );

describe("node fit on the nodes a pod names", () => {
  it("says exactly what judging node by node says", () => {
    agreesWithPerNode(fc.oneof(clusterArb(), repeatedNamesArb), namedPodArb, 3000);
  });

  it("names the same largest and closest nodes when no named node fits", () => {
    agreesWithPerNode(clusterArb(LOPSIDED), namedPodArb, 1000);
  });

  it("takes the names from spec.nodeName or from every required term", () => {
    const terms = (...nodeSelectorTerms: Record<string, unknown>[]): V1PodSpec => ({
      containers: [],
      affinity: {
        nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms } },
      },
    });
    const byName = (operator: string, values: string[]) => ({
      matchFields: [{ key: "metadata.name", operator, values }],
    });
    expect(namesOf({ containers: [], nodeName: "a" })).toEqual(["a"]);
    expect(namesOf({ ...terms(byName("In", ["b"])), nodeName: "a" })).toEqual(["a"]);
    expect(namesOf(terms(byName("In", ["a"]), byName("In", ["b", "c"])))).toEqual(["a", "b", "c"]);
    expect(namesOf(terms(byName("In", ["a"]), byName("NotIn", ["b"])))).toBeUndefined();
    expect(namesOf(terms(byName("In", ["a"]), {}))).toBeUndefined();
    expect(namesOf(terms())).toBeUndefined();
    expect(namesOf({ containers: [], nodeName: "" })).toBeUndefined();
  });
});

describe("node fit per class", () => {
  it("says exactly what judging node by node says", () => {
    agreesWithPerNode(clusterArb(), podArb, 3000);
  });

  it("names the same largest and closest nodes when no node fits", () => {
    agreesWithPerNode(clusterArb(LOPSIDED), podArb, 1000);
  });

  it("says the same after nodes change, whether the classes or name index are kept or made again", () => {
    // The updates a watched node list sees: a status heartbeat, a new hostname, a new name, a new
    // allocatable, a cordon, a node gone.
    const edits = ["heartbeat", "hostname", "rename", "allocatable", "cordon", "remove"] as const;
    const edit = (node: V1Node, how: (typeof edits)[number]): V1Node[] => {
      if (!node || typeof node !== "object") return [node];
      const meta = node.metadata ?? {};
      switch (how) {
        case "heartbeat":
          return [{ ...node, status: { ...node.status, conditions: [] } }];
        case "hostname":
          return [
            { ...node, metadata: { ...meta, labels: { ...meta.labels, [HOSTNAME]: "new" } } },
          ];
        case "rename":
          return [{ ...node, metadata: { ...meta, name: "renamed" } }];
        case "allocatable":
          return [{ ...node, status: { allocatable: { cpu: "1", memory: "1Gi" } } }];
        case "cordon":
          return [{ ...node, spec: { ...node.spec, unschedulable: !node.spec?.unschedulable } }];
        case "remove":
          return [];
      }
    };
    const editsArb = fc.array(fc.tuple(fc.nat(19), fc.constantFrom(...edits)), { maxLength: 3 });
    fc.assert(
      fc.property(
        clusterArb(),
        editsArb,
        fc.oneof(podArb, namedPodArb),
        (nodes, changes, input) => {
          const after = nodes.map(n => [n]);
          for (const [i, how] of changes)
            after[i % nodes.length] = edit(nodes[i % nodes.length], how);
          // The list before: its classes (and its name index, for a pod naming nodes) kept or not.
          nodeClasses(nodes);
          checkNodeFit(nodes, input);
          const changed = after.flat();
          expect(checkNodeFit(changed, input)).toEqual(
            checkNodeFit(changed, input, singleNodeClasses),
          );
        },
      ),
      { numRuns: 1500 },
    );
  });

  it("names DaemonSet nodes in list order across classes, the rest counted", () => {
    const node = (name: string, memory: string): V1Node => ({
      metadata: { name, labels: { [HOSTNAME]: name } },
      status: { allocatable: { cpu: "8", memory } },
    });
    // small-* cannot allocate 20Gi; mid-* cannot either; big-* can: two failing classes, interleaved.
    const nodes = [
      node("big-0", "64Gi"),
      ...Array.from({ length: 4 }, (_, i) => [
        node(`small-${i}`, "8Gi"),
        node(`mid-${i}`, "16Gi"),
      ]).flat(),
    ];
    const spec: V1PodSpec = {
      containers: [{ name: "agent", image: "x", resources: { requests: { memory: "20Gi" } } }],
    };
    const input = fitInput("DaemonSet ops/agent", spec, true);
    expect(nodeClasses(nodes).classes).toHaveLength(3);
    const [violation] = checkNodeFit(nodes, input).violations;
    expect(violation.message).toContain(
      'would stay Pending on 8 of 9 eligible nodes, which cannot allocate its requests: node "small-0" (memory: asks 20Gi, 8Gi allocatable), ' +
        'node "mid-0" (memory: asks 20Gi, 16Gi allocatable), node "small-1" (memory: asks 20Gi, 8Gi allocatable), ' +
        'node "mid-1" (memory: asks 20Gi, 16Gi allocatable), node "small-2" (memory: asks 20Gi, 8Gi allocatable) and 3 more (9 of 9 nodes are candidates)',
    );
    expect(checkNodeFit(nodes, input)).toEqual(checkNodeFit(nodes, input, singleNodeClasses));
  });
});

describe("node classes", () => {
  const instanceTypes: Record<string, string>[] = [
    { type: "m5.2xlarge", cpu: "7910m", memory: "30Gi" },
    { type: "r5.4xlarge", cpu: "15890m", memory: "250Gi" },
    { type: "p3.8xlarge", cpu: "31850m", memory: "230Gi", "nvidia.com/gpu": "4" },
  ];
  const cluster = (size: number, zones = ["eu-west-1a"]): V1Node[] =>
    Array.from({ length: size }, (_, i) => {
      const { type, ...allocatable } = instanceTypes[i % instanceTypes.length];
      const name = `node-${i}`;
      return {
        metadata: {
          name,
          labels: {
            [HOSTNAME]: name,
            "node.kubernetes.io/instance-type": type,
            "topology.kubernetes.io/zone": zones[i % zones.length],
          },
        },
        spec: type.startsWith("p3")
          ? { taints: [{ key: "nvidia.com/gpu", value: "present", effect: "NoSchedule" }] }
          : {},
        status: { allocatable },
      };
    });

  it("groups 10,000 nodes of 3 instance types into 3 classes, members in list order", () => {
    const { classes, total } = nodeClasses(cluster(10_000));
    expect(total).toBe(10_000);
    expect(classes).toHaveLength(3);
    expect(classes.map(c => c.names.length)).toEqual([3334, 3333, 3333]);
    expect(classes.map(c => c.node.name)).toEqual(["node-0", "node-1", "node-2"]);
    expect(classes[1].names.slice(0, 3)).toEqual(["node-1", "node-4", "node-7"]);
    expect(classes[1].positions.slice(0, 3)).toEqual([1, 4, 7]);
  });

  it("keeps apart what the scheduler tells apart: zones, taints, cordon, allocatable", () => {
    expect(nodeClasses(cluster(12, ["a", "b"])).classes).toHaveLength(6);
    const [plain, ...others] = cluster(1);
    const labelEntries = Object.entries({ ...plain.metadata!.labels, [HOSTNAME]: "other" });
    const variants: V1Node[] = [
      plain,
      { ...plain, spec: { unschedulable: true } },
      { ...plain, spec: { taints: [{ key: "k", effect: "NoExecute" }] } },
      { ...plain, status: { allocatable: { cpu: "7910m", memory: "31Gi" } } },
    ];
    expect(others).toEqual([]);
    expect(nodeClasses(variants).classes).toHaveLength(4);
    // Alike: a PreferNoSchedule taint, taints, labels and allocatable in another order, the same
    // quantity in other units, another hostname.
    const taints: V1Taint[] = [
      { key: "a", effect: "NoSchedule" },
      { key: "b", value: "1", effect: "NoExecute" },
    ];
    const alike: V1Node[] = [
      { ...plain, spec: { taints } },
      { ...plain, spec: { taints: [...taints].reverse() } },
      { ...plain, spec: { taints: [...taints, { key: "c", effect: "PreferNoSchedule" }] } },
      {
        ...plain,
        spec: { taints },
        status: { allocatable: { memory: `${30 * 1024}Mi`, cpu: "7.91" } },
      },
      {
        ...plain,
        metadata: { name: "other", labels: Object.fromEntries(labelEntries.reverse()) },
        spec: { taints },
      },
    ];
    expect(nodeClasses(alike).classes).toHaveLength(1);
    expect(nodeClasses(alike).classes[0].names).toEqual([...Array(4).fill("node-0"), "other"]);
  });

  it("makes a node with malformed labels or taints a class of its own", () => {
    const odd = { metadata: { name: "odd", labels: { pool: 1 } } } as unknown as V1Node;
    const oddTaint = {
      metadata: { name: "t" },
      spec: { taints: [{ key: 7, effect: "NoSchedule" }] },
    };
    const nodes = [odd, odd, oddTaint, oddTaint] as V1Node[];
    expect(nodeClasses(nodes).classes).toHaveLength(4);
    expect(nodeClasses([null, "x", ...nodes] as V1Node[]).total).toBe(4);
  });

  it("is made once per node list, and again for a new list", () => {
    const nodes = cluster(30);
    const first = nodeClasses(nodes);
    expect(nodeClasses(nodes)).toBe(first);
    const changed = [...nodes.slice(0, 29), { ...nodes[29], spec: { unschedulable: true } }];
    const regrouped = nodeClasses(changed);
    expect(regrouped).not.toBe(first);
    expect(regrouped.classes).toHaveLength(4);
    expect(regrouped.classes[3]).toMatchObject({ names: ["node-29"], positions: [29] });
    expect(singleNodeClasses(nodes).classes).toHaveLength(30);
  });

  it("keeps the classes of the last list when only status or hostnames changed", () => {
    const nodes = cluster(30);
    const first = nodeClasses(nodes);
    const heartbeat = nodes.map(n => ({ ...n, status: { ...n.status, conditions: [] } }));
    expect(nodeClasses(heartbeat)).toBe(first);
    const renamedHost = heartbeat.map(n => ({
      ...n,
      metadata: { ...n.metadata, labels: { ...n.metadata?.labels, [HOSTNAME]: "x" } },
    }));
    expect(nodeClasses(renamedHost)).toBe(first);
    const renamed = [
      { ...nodes[0], metadata: { ...nodes[0].metadata, name: "other" } },
      ...nodes.slice(1),
    ];
    expect(nodeClasses(renamed)).not.toBe(first);
    expect(nodeClasses(renamed).classes[0].names.slice(0, 2)).toEqual(["other", "node-3"]);
    expect(nodeClasses(nodes.slice(1))).not.toBe(nodeClasses(renamed));
  });

  it("judges a DaemonSet pod on 10,000 nodes on its own node, without reading the others", () => {
    let reads = 0; // of a node's spec: what the filters read of every node they judge
    const nodes = cluster(10_000).map(({ spec, ...rest }) =>
      Object.defineProperty(rest, "spec", { enumerable: true, get: () => (reads++, spec) }),
    ) as V1Node[];
    nodes[1].spec!.unschedulable = true; // unschedulable for pods that do not tolerate it
    const spec: V1PodSpec = {
      containers: [{ name: "agent", image: "x", resources: { requests: { memory: "40Gi" } } }],
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [
              { matchFields: [{ key: "metadata.name", operator: "In", values: ["node-4242"] }] },
            ],
          },
        },
      },
    };
    const input = fitInput("DaemonSet kube-system/agent", spec, true);
    checkNodeFit(nodes, input); // indexes the list by name, once
    reads = 0;
    const { violations } = checkNodeFit(nodes, input);
    expect(reads).toBeGreaterThan(0);
    expect(reads).toBeLessThan(10);
    expect(violations[0].message).toContain(
      'on 1 of 1 eligible nodes, which cannot allocate its requests: node "node-4242" (memory: asks 40Gi, 30Gi allocatable) (1 of 10000 nodes are candidates; excluded: 9999 by nodeSelector/affinity)',
    );
    expect(checkNodeFit(nodes, input)).toEqual(checkNodeFit(nodes, input, singleNodeClasses));
    // A pod that does not tolerate the cordon: the cordoned node counts as unschedulable.
    const plain = { ...input, daemonSet: false };
    reads = 0;
    expect(checkNodeFit(nodes, plain).violations[0].message).toContain(
      "(1 of 10000 nodes are candidates; excluded: 9998 by nodeSelector/affinity, 1 by unschedulable)",
    );
    expect(reads).toBeLessThan(10);
    expect(checkNodeFit(nodes, plain)).toEqual(checkNodeFit(nodes, plain, singleNodeClasses));
    // Bound by spec.nodeName: the same, every other node left out by nodeName.
    const bound = { ...input, spec: { ...spec, affinity: undefined, nodeName: "node-4242" } };
    reads = 0;
    expect(checkNodeFit(nodes, bound).violations[0].message).toContain(
      "(1 of 10000 nodes are candidates; excluded: 9999 by nodeName)",
    );
    expect(reads).toBeLessThan(10);
  });

  it("judges node by node when node identity matters to the pod", () => {
    const spec = (extra: Partial<V1PodSpec>): V1PodSpec => ({ containers: [], ...extra });
    const required = (term: Record<string, unknown>): Partial<V1PodSpec> => ({
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [term] },
        },
      },
    });
    expect(nodeIdentityMatters(spec({ nodeName: "node-1" }))).toBe(true);
    expect(nodeIdentityMatters(spec({ nodeSelector: { [HOSTNAME]: "node-1" } }))).toBe(true);
    expect(
      nodeIdentityMatters(
        spec(required({ matchFields: [{ key: "metadata.name", operator: "In", values: ["a"] }] })),
      ),
    ).toBe(true);
    expect(
      nodeIdentityMatters(
        spec(required({ matchExpressions: [{ key: HOSTNAME, operator: "Exists" }] })),
      ),
    ).toBe(true);
    expect(nodeIdentityMatters(spec({}))).toBe(false);
    expect(
      nodeIdentityMatters(spec({ nodeSelector: { "topology.kubernetes.io/zone": "a" } })),
    ).toBe(false);
    expect(
      nodeIdentityMatters(
        spec(required({ matchExpressions: [{ key: "pool", operator: "In", values: ["gpu"] }] })),
      ),
    ).toBe(false);
  });
});
