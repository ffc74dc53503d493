// The one gate for what makes no new pod (lib/engine/update-gate.ts needsJudging), and workload UPDATEs
// judged on what they change: a rollout in a namespace whose quota is full still rolls, a
// scale-down or a finalizer removal is never refused, and only what an update adds counts.
import { policies } from "../../../capabilities";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { needsJudging, review, storedVersionOf } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import { defaultSettings } from "../../../lib/settings";

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const NS = "gpu-team";
/** The usual GPU namespace: quota = what the team owns, all of it in use. */
const cluster = () =>
  new SnapshotCluster([
    { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
    {
      apiVersion: "v1",
      kind: "ResourceQuota",
      metadata: { name: "compute", namespace: NS },
      spec: { hard: { "requests.cpu": "2" } },
      status: { hard: { "requests.cpu": "2" }, used: { "requests.cpu": "2" } },
    },
    { kind: "LimitRange", metadata: { name: "none", namespace: "other" } },
    {
      kind: "Node",
      metadata: { name: "n1" },
      status: { allocatable: { cpu: "8", memory: "32Gi", pods: "110" } },
    },
  ] as KubeObject[]);

const deployment = (replicas: number, container: Obj = {}): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "serve", namespace: NS, uid: "d-1" },
  spec: {
    replicas,
    selector: { matchLabels: { app: "serve" } },
    template: {
      metadata: { labels: { app: "serve", "app.kubernetes.io/component": "serve" } },
      spec: {
        containers: [
          {
            name: "serve",
            image: "ghcr.io/org/serve:1",
            resources: { requests: { cpu: "1" } },
            ...container,
          },
        ],
      },
    },
  },
});

/** The ReplicaSet the Deployment controller makes for a new template. */
const replicaSet = (replicas: number): KubeObject => {
  const d = deployment(replicas) as Obj;
  return {
    apiVersion: "apps/v1",
    kind: "ReplicaSet",
    metadata: {
      name: "serve-5cf47bbbfb",
      namespace: NS,
      ownerReferences: [
        { apiVersion: "apps/v1", kind: "Deployment", name: "serve", uid: "d-1", controller: true },
      ],
    },
    spec: { replicas, selector: d.spec.selector, template: d.spec.template },
  };
};

const judge = (
  object: KubeObject,
  operation: "CREATE" | "UPDATE" = "CREATE",
  oldObject?: KubeObject,
) =>
  review(policies, object, {
    settings: defaultSettings(),
    cluster: cluster(),
    operation,
    oldObject,
  });

const PRIVILEGED = { securityContext: { privileged: true } };

/** The object as the API server keeps it once deleted while a finalizer holds it. */
const deleting = (obj: KubeObject, metadata: Obj = {}): KubeObject =>
  ({
    ...obj,
    metadata: {
      finalizers: ["example.com/hold"],
      ...obj.metadata,
      deletionTimestamp: "2026-12-01T00:00:00Z",
      ...metadata,
    },
  }) as unknown as KubeObject;

/** The gate's view of an update from `old` to `object`. */
const gate = (object: KubeObject, old?: KubeObject) => ({
  stored: storedVersionOf(object, old ? "UPDATE" : "CREATE", old, defaultSettings()),
  settings: defaultSettings(),
});

describe("needsJudging", () => {
  it("a controller's workload, and updates that change no spec (a finalizer removed) are not judged", () => {
    const d = deployment(2);
    expect(needsJudging(d, gate(d))).toBe(true);
    expect(needsJudging(replicaSet(1), gate(replicaSet(1)))).toBe(false);
    const relabelled = { ...d, metadata: { ...d.metadata, labels: { team: "a" } } };
    expect(needsJudging(relabelled, gate(relabelled, d))).toBe(false);
    const unfinalized = deleting(d, { finalizers: [] });
    expect(needsJudging(unfinalized, gate(unfinalized, deleting(d)))).toBe(false);
    expect(needsJudging(deployment(3), gate(deployment(3), d))).toBe(true);
  });

  it("a deletionTimestamp is no pass: what a deleted object's update changes besides metadata is judged", () => {
    // A finalizer holds the object; its author deletes it, then edits it.
    const d = deleting(deployment(2));
    const scaled = deleting(deployment(3));
    expect(needsJudging(scaled, gate(scaled, d))).toBe(true);
    const reimaged = deleting(deployment(2, { image: "evil.example/miner:1" }));
    expect(needsJudging(reimaged, gate(reimaged, d))).toBe(true);
    const pod = (image: string): KubeObject =>
      deleting({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "p", namespace: NS },
        spec: { containers: [{ name: "a", image }] },
      });
    const newImage = pod("evil.example/miner:1");
    expect(needsJudging(newImage, gate(newImage, pod("ghcr.io/org/a:1")))).toBe(true);
    const podUnfinalized = deleting(pod("ghcr.io/org/a:1"), { finalizers: [] });
    expect(needsJudging(podUnfinalized, gate(podUnfinalized, pod("ghcr.io/org/a:1")))).toBe(false);
    // Other kinds (a ConfigMap the payload rules read): its data, not its metadata.
    const cm = (data: Obj, more: Obj = {}): KubeObject =>
      deleting(
        { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c", namespace: NS }, data },
        more,
      );
    const stored = cm({ a: "1" }, { finalizers: ["x"] });
    const refilled = cm({ a: "1".repeat(10) }, { finalizers: ["x"] });
    expect(needsJudging(refilled, gate(refilled, stored))).toBe(true);
    const cmUnfinalized = cm({ a: "1" }, { finalizers: [] });
    expect(needsJudging(cmUnfinalized, gate(cmUnfinalized, stored))).toBe(false);
  });

  it("a controller's word counts only from a controller: a pod author's own ownerReferences make nothing skip", () => {
    const rs = replicaSet(1);
    const asUser = (user: string) => ({ ...gate(rs), user });
    // Kubernetes' controllers: as their ServiceAccounts, or kube-controller-manager itself.
    expect(
      needsJudging(rs, asUser("system:serviceaccount:kube-system:deployment-controller")),
    ).toBe(false);
    expect(needsJudging(rs, asUser("system:kube-controller-manager"))).toBe(false);
    // Anyone else who writes `controller: true` is judged.
    for (const user of [
      "alice@example.com",
      "system:serviceaccount:team-a:ci",
      "system:serviceaccount:kube-systemx:evil",
      "system:node:n1",
      "",
    ])
      expect(needsJudging(rs, asUser(user))).toBe(true);
    // No request user (check, the reports' scan): the controller must be a kind the module judges.
    const ownedBy = (kind: string, apiVersion = "v1"): KubeObject => ({
      ...rs,
      metadata: {
        ...rs.metadata,
        ownerReferences: [{ apiVersion, kind, name: "x", uid: "u", controller: true }],
      },
    });
    expect(needsJudging(ownedBy("ConfigMap"), gate(rs))).toBe(true);
    expect(needsJudging(ownedBy("Deployment", "apps/v1"), gate(rs))).toBe(false);
    expect(needsJudging(ownedBy("Deployment", "example.com/v1"), gate(rs))).toBe(true);
  });

  it("an operator an admin names in workloads.controllerUsers is taken at its word, as itself or by prefix", () => {
    const rs = replicaSet(1);
    const settings = defaultSettings();
    settings.workloads.controllerUsers = [
      "system:serviceaccount:argo-rollouts:*",
      "system:serviceaccount:kserve:kserve-controller-manager",
    ];
    const asUser = (user: string) => ({ ...gate(rs), settings, user });
    expect(needsJudging(rs, asUser("system:serviceaccount:argo-rollouts:argo-rollouts"))).toBe(
      false,
    );
    expect(needsJudging(rs, asUser("system:serviceaccount:kserve:kserve-controller-manager"))).toBe(
      false,
    );
    // Exact names stay exact; other namespaces' accounts are judged.
    expect(needsJudging(rs, asUser("system:serviceaccount:kserve:other"))).toBe(true);
    expect(needsJudging(rs, asUser("system:serviceaccount:argo-rollouts-x:evil"))).toBe(true);
    // Without the setting the same operator is judged.
    expect(
      needsJudging(rs, { ...gate(rs), user: "system:serviceaccount:argo-rollouts:argo-rollouts" }),
    ).toBe(true);
  });

  it("a Pod update is judged only when a container changes: an image, an ephemeral container", () => {
    const pod = (spec: Obj): KubeObject => ({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "p", namespace: NS },
      spec: { containers: [{ name: "a", image: "ghcr.io/org/a:1" }], ...spec },
    });
    const stored = pod({});
    const tolerated = pod({ tolerations: [{ operator: "Exists" }] });
    expect(needsJudging(tolerated, gate(tolerated, stored))).toBe(false);
    const newImage = pod({ containers: [{ name: "a", image: "ghcr.io/org/a:2" }] });
    expect(needsJudging(newImage, gate(newImage, stored))).toBe(true);
  });
});

describe("the stored version the rules compare with", () => {
  const settings = defaultSettings();
  it("exists only on an UPDATE whose stored object is of the same kind", () => {
    const d = deployment(2);
    expect(storedVersionOf(d, "CREATE", deployment(1), settings)).toBeUndefined();
    expect(storedVersionOf(d, "UPDATE", undefined, settings)).toBeUndefined();
    expect(storedVersionOf(d, "UPDATE", replicaSet(1), settings)).toBeUndefined();
    expect(storedVersionOf(d, "UPDATE", deployment(1), settings)?.object.spec).toMatchObject({
      replicas: 1,
    });
  });

  it("finds the stored template at the target's place, without touching the request's object", () => {
    const old = deployment(1, { image: "ghcr.io/org/serve:0" }) as Obj;
    delete old.spec.template.metadata;
    const stored = storedVersionOf(deployment(2), "UPDATE", old as KubeObject, settings)!;
    const at = stored.templateAt("spec.template");
    expect(at?.spec.containers[0].image).toBe("ghcr.io/org/serve:0");
    expect(stored.templateAt("")).toBeUndefined();
    expect(stored.targets).toHaveLength(1);
    expect(old.spec.template.metadata).toBeUndefined();
  });

  it("says whether a Pod update adds ephemeral containers (kubectl debug)", () => {
    const pod = (ephemeral: number): KubeObject => ({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "p", namespace: NS },
      spec: {
        containers: [{ name: "a", image: "ghcr.io/org/a:1" }],
        ephemeralContainers: Array.from({ length: ephemeral }, (_, i) => ({
          name: `debugger-${i}`,
          image: "busybox",
        })),
      },
    });
    expect(storedVersionOf(pod(1), "UPDATE", pod(0), settings)?.addsEphemeralContainers).toBe(true);
    expect(storedVersionOf(pod(1), "UPDATE", pod(1), settings)?.addsEphemeralContainers).toBe(
      false,
    );
    expect(storedVersionOf(pod(2), "UPDATE", pod(1), settings)?.addsEphemeralContainers).toBe(true);
  });
});

describe("a rolling update in a namespace whose quota is full", () => {
  it("the Deployment controller's new ReplicaSet is admitted: its pods are judged as they are created", async () => {
    const r = await judge(replicaSet(1));
    expect(r.allowed).toBe(true);
    expect(r.violations).toEqual([]);
  });

  it("a privileged ReplicaSet whose author wrote a controller ownerReference is denied", async () => {
    const forged = replicaSet(1) as Obj;
    forged.spec.template.spec.containers[0].securityContext = { privileged: true };
    const r = await review(policies, forged, {
      settings: defaultSettings(),
      cluster: cluster(),
      operation: "CREATE",
      user: "alice@example.com",
    });
    expect(r.allowed).toBe(false);
    expect(r.violations.map(v => `${v.capability}/${v.rule}`)).toContain(
      "security-context/privileged",
    );
    // The Deployment controller's own is still admitted (its pods are judged as they are created).
    const byController = await review(policies, forged, {
      settings: defaultSettings(),
      cluster: cluster(),
      operation: "CREATE",
      user: "system:serviceaccount:kube-system:deployment-controller",
    });
    expect(byController.allowed).toBe(true);
  });

  it("Kubernetes' own verdict stays for each new pod: it is over the quota until an old one goes", async () => {
    const pod: KubeObject = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { generateName: "serve-5cf47bbbfb-", namespace: NS },
      spec: (replicaSet(1).spec as Obj).template.spec,
    };
    const r = await judge(pod);
    expect(r.violations.map(v => `${v.capability}/${v.rule}`)).toContain(
      "resource-quota/quota-exceeded",
    );
  });
});

describe("workload updates are judged on what they add", () => {
  it("a scale-down of a Deployment that breaks a rule added since is admitted", async () => {
    const stored = deployment(3, PRIVILEGED);
    const r = await judge(deployment(1, PRIVILEGED), "UPDATE", stored);
    expect(r.allowed).toBe(true);
  });

  it("a finalizer removal while it is deleted is admitted", async () => {
    const stored = {
      ...deployment(2, PRIVILEGED),
      metadata: { ...deployment(2).metadata, finalizers: ["foregroundDeletion"] },
    };
    const deleting = {
      ...deployment(2, PRIVILEGED),
      metadata: {
        ...deployment(2).metadata,
        deletionTimestamp: "2026-12-01T00:00:00Z",
        finalizers: [],
      },
    } as unknown as KubeObject;
    expect((await judge(deleting, "UPDATE", stored)).allowed).toBe(true);
  });

  it("a new template that adds a violation on a Deployment being deleted is denied for it", async () => {
    const stored = deleting(deployment(2));
    const r = await judge(deleting(deployment(2, PRIVILEGED)), "UPDATE", stored);
    expect(r.allowed).toBe(false);
    expect(r.violations.map(v => `${v.capability}/${v.rule}`)).toContain(
      "security-context/privileged",
    );
  });

  it("a scale-up over the quota is denied for the quota only: what the stored one had is not held against it", async () => {
    const r = await judge(deployment(3, PRIVILEGED), "UPDATE", deployment(2, PRIVILEGED));
    expect(r.allowed).toBe(false);
    expect(r.violations.map(v => `${v.capability}/${v.rule}`)).toEqual([
      "resource-quota/quota-exceeded",
    ]);
  });

  it("a new template that adds a violation is denied for it", async () => {
    const r = await judge(deployment(2, PRIVILEGED), "UPDATE", deployment(2));
    expect(r.violations.map(v => `${v.capability}/${v.rule}`)).toContain(
      "security-context/privileged",
    );
  });

  it("the same Deployment created anew is judged in full", async () => {
    const r = await judge(deployment(2, PRIVILEGED));
    expect(r.violations.map(v => `${v.capability}/${v.rule}`)).toEqual(
      expect.arrayContaining(["security-context/privileged", "resource-quota/quota-exceeded"]),
    );
  });
});
