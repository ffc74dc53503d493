// One object must not become tens of thousands of API calls. A pod author chooses
// how many secrets a pod names (35,000 projected sources fit in 1 MB); the secret-access rule asks
// about at most serviceAccount.maxSecretReviews of them per object, a few at a time, never after
// the deadline, and says what it did not check; payload-size counts projected sources.
let reviewDelayMs = 0;
let stall = false;
let failFor: string | undefined;
let inFlight = 0;
let maxInFlight = 0;
const started: { secret: string; at: number }[] = [];

jest.mock("kubernetes-fluent-client", () => {
  const actual = jest.requireActual("kubernetes-fluent-client");
  return {
    ...actual,
    K8s: () => ({
      Create: async (review: { spec: { resourceAttributes: { name: string } } }) => {
        const secret = review.spec.resourceAttributes.name;
        started.push({ secret, at: Date.now() });
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        try {
          if (stall) await new Promise(() => {});
          if (reviewDelayMs) await new Promise(r => setTimeout(r, reviewDelayMs));
          if (secret === failFor) throw new Error("connect ECONNREFUSED");
          return { ...review, status: { allowed: secret.endsWith("-ok") } };
        } finally {
          inFlight--;
        }
      },
    }),
  };
});

import { payloadSizePolicy } from "../../../capabilities/payload-size";
import { serviceAccountPolicy } from "../../../capabilities/service-account";
import {
  AccessReviews,
  MAX_REVIEWS_IN_FLIGHT,
  REVIEWS_PER_REQUEST,
} from "../../../lib/cluster/access-reviews";
import { CallSlots } from "../../../lib/cluster/api-calls";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { review } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import type { RbacEvaluator } from "../../../lib/cluster/rbac";
import { parseSettings, type SettingsInput } from "../../../lib/settings";
import { formatViolation } from "../../../lib/objects/verdict";

const NS = "ml";

beforeEach(() => {
  reviewDelayMs = 0;
  stall = false;
  failFor = undefined;
  inFlight = 0;
  maxInFlight = 0;
  started.length = 0;
});

const names = (n: number, prefix = "s") => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

/** A pod on ServiceAccount "workload" with one projected volume of these secrets. */
const projectedPod = (secrets: string[]): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "fanout", namespace: NS },
  spec: {
    serviceAccountName: "workload",
    containers: [{ name: "c", image: "ghcr.io/a:1" }],
    volumes: [{ name: "all", projected: { sources: secrets.map(name => ({ secret: { name } })) } }],
  },
});

/** A pod whose containers read these secrets through env secretKeyRefs, 1,000 per container. */
const envPod = (secrets: string[]): KubeObject => {
  const containers = [];
  for (let i = 0; i < secrets.length; i += 1000)
    containers.push({
      name: `c${i / 1000}`,
      image: "ghcr.io/a:1",
      env: secrets.slice(i, i + 1000).map((name, j) => ({
        name: `V${j}`,
        valueFrom: { secretKeyRef: { name, key: "k" } },
      })),
    });
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "fanout", namespace: NS },
    spec: { serviceAccountName: "workload", containers },
  };
};

/** A snapshot whose RBAC evaluator counts the secrets it is asked about (nothing allowed). */
function countingCluster() {
  const asked: string[] = [];
  const rbac: RbacEvaluator = (_objects, _ns, _sa, secrets) => {
    asked.push(...secrets);
    return { allowed: new Map(secrets.map(s => [s, false])) };
  };
  const cluster = new SnapshotCluster(
    [
      { kind: "Namespace", metadata: { name: NS } },
      { kind: "ServiceAccount", metadata: { namespace: NS, name: "workload" } },
    ],
    rbac,
  );
  return { asked, cluster };
}

const settings = (serviceAccount: SettingsInput["serviceAccount"] = {}, payload = false) =>
  parseSettings({ serviceAccount, payload: { enabled: payload } });

describe("secret access asks about at most maxSecretReviews secrets per object", () => {
  it("a pod with 35,000 projected secret sources: 32 asked, the rest said not checked, with the fix", async () => {
    const { asked, cluster } = countingCluster();
    const r = await review([serviceAccountPolicy], projectedPod(names(35_000)), {
      settings: settings(),
      cluster,
    });
    expect(asked).toHaveLength(32);
    expect(new Set(asked).size).toBe(32);
    const note = r.warnings.find(w => w.includes("of the 35,000 secrets"));
    expect(note).toBe(
      "admission-guard/service-account: not checked whether ServiceAccount ml/workload may get 34,968 of the 35,000 secrets named by Pod ml/fanout: at most 32 are checked per object. Fix: keep the values in fewer Secrets (one Secret holds many keys, read with one envFrom secretRef or one secret volume); admins: serviceAccount.maxSecretReviews (env ADMISSION_GUARD_SERVICE_ACCOUNT_MAX_SECRET_REVIEWS)",
    );
    // The 32 it did ask about are judged as before, in one finding with one grant.
    const finding = r.violations.find(v => v.rule === "secret-access")!;
    expect(finding.message).toMatch(/may not get secrets "s-0" \(projected volume "all"\), /);
    expect(finding.fix.match(/--resource-name=/g)).toHaveLength(32);
    // Every message stays short whatever the pod names.
    for (const line of [...r.warnings, ...r.violations.map(formatViolation)])
      expect(line.length).toBeLessThan(16_000);
  });

  it("a pod with 5,000 distinct env secretKeyRefs: the setting's cap, not one more", async () => {
    const { asked, cluster } = countingCluster();
    const r = await review([serviceAccountPolicy], envPod(names(5000)), {
      settings: settings({ maxSecretReviews: 10 }),
      cluster,
    });
    expect(asked).toHaveLength(10);
    expect(r.warnings.join("\n")).toContain(
      "may get 4,990 of the 5,000 secrets named by Pod ml/fanout: at most 10 are checked per object",
    );
  });

  it("a pod under the cap is checked whole, with no not-checked note", async () => {
    const { asked, cluster } = countingCluster();
    const r = await review([serviceAccountPolicy], projectedPod(names(32)), {
      settings: settings(),
      cluster,
    });
    expect(asked).toHaveLength(32);
    expect(r.warnings.join("\n")).not.toMatch(/not checked/);
  });

  it("the roles of a workload share one cap: a secret asked by one role counts once", async () => {
    const { asked, cluster } = countingCluster();
    const template = (secrets: string[]) => ({
      spec: {
        serviceAccountName: "workload",
        containers: [
          {
            name: "pytorch",
            image: "ghcr.io/a:1",
            envFrom: secrets.map(name => ({ secretRef: { name } })),
          },
        ],
      },
    });
    const job: KubeObject = {
      apiVersion: "kubeflow.org/v1",
      kind: "PyTorchJob",
      metadata: { name: "llama", namespace: NS },
      spec: {
        pytorchReplicaSpecs: {
          // 20 secrets each, 10 of them shared: 30 distinct, under the cap of 32...
          Master: { replicas: 1, template: template(names(20, "m")) },
          Worker: { replicas: 4, template: template([...names(10, "m"), ...names(10, "w")]) },
          // ...and 20 more here, of which only 2 fit.
          Evaluator: { replicas: 1, template: template(names(20, "e")) },
        },
      },
    };
    const r = await review([serviceAccountPolicy], job, { settings: settings(), cluster });
    expect(new Set(asked).size).toBe(32);
    expect([...new Set(asked)].filter(s => s.startsWith("e-"))).toEqual(["e-0", "e-1"]);
    expect(r.warnings.join("\n")).toContain("may get 18 of the 20 secrets named by the pods of");
  });

  it("names at most three places per secret, whatever the number of references", async () => {
    const { cluster } = countingCluster();
    const pod: KubeObject = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "fanout", namespace: NS },
      spec: {
        serviceAccountName: "workload",
        containers: [{ name: "c", image: "ghcr.io/a:1" }],
        volumes: Array.from({ length: 5000 }, (_, i) => ({
          name: `v${i}`,
          secret: { secretName: "one" },
        })),
      },
    };
    const r = await review([serviceAccountPolicy], pod, { settings: settings(), cluster });
    const finding = r.violations.find(v => v.rule === "secret-access")!;
    expect(finding.message).toMatch(/secret "one" \(volume "v0"; volume "v1"; volume "v2"; …\)$/);
  });
});

describe("access reviews: bounded concurrency and one deadline", () => {
  it(`at most ${REVIEWS_PER_REQUEST} reviews in flight for one question`, async () => {
    reviewDelayMs = 5;
    const answer = await new AccessReviews().secretAccess(NS, "workload", names(32, "a"));
    expect(started).toHaveLength(32);
    expect(answer?.allowed.size).toBe(32);
    expect(maxInFlight).toBe(REVIEWS_PER_REQUEST);
  });

  it(`at most ${MAX_REVIEWS_IN_FLIGHT} in flight in the process, however many questions at once`, async () => {
    reviewDelayMs = 5;
    const reviews = new AccessReviews();
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) => reviews.secretAccess(NS, `sa-${i}`, names(8, "b"))),
    );
    expect(started).toHaveLength(96);
    expect(answers.every(a => a?.allowed.size === 8)).toBe(true);
    expect(maxInFlight).toBe(MAX_REVIEWS_IN_FLIGHT);
  });

  it("starts no review after the deadline and answers by it, leaving the rest unanswered", async () => {
    stall = true; // an API server that never answers
    const deadline = Date.now() + 150;
    const begun = Date.now();
    const answer = await new AccessReviews().secretAccess(NS, "workload", names(32, "c"), deadline);
    expect(Date.now() - begun).toBeLessThan(1000);
    expect(answer?.allowed.size).toBe(0);
    // The first few started at once; none after the deadline (they all wait on the stalled ones).
    expect(started.length).toBeLessThanOrEqual(REVIEWS_PER_REQUEST);
    expect(started.every(s => s.at <= deadline)).toBe(true);
  });

  it("a failed review leaves only its own secret unanswered", async () => {
    failFor = "d-3";
    const answer = await new AccessReviews().secretAccess(NS, "workload", [
      ...names(6, "d"),
      "d-ok",
    ]);
    expect([...answer!.allowed.keys()].sort()).toEqual(
      ["d-0", "d-1", "d-2", "d-4", "d-5", "d-ok"].sort(),
    );
    expect(answer!.allowed.get("d-ok")).toBe(true);
  });

  it("a waiter for a process-wide slot gives up at its deadline", async () => {
    const slots = new CallSlots(1);
    const held = await slots.acquire(Date.now() + 1000);
    expect(held).toBeDefined();
    const begun = Date.now();
    expect(await slots.acquire(Date.now() + 50)).toBeUndefined();
    expect(Date.now() - begun).toBeGreaterThanOrEqual(40);
    const next = slots.acquire(Date.now() + 1000);
    held!();
    held!(); // a second release frees nothing more
    const got = await next;
    expect(got).toBeDefined();
    expect(slots.inFlight).toBe(1);
    got!();
    expect(slots.inFlight).toBe(0);
  });
});

describe("payload-size counts projected volume sources", () => {
  const run = (obj: KubeObject, payload: SettingsInput["payload"] = {}, old?: KubeObject) =>
    review([payloadSizePolicy], obj, {
      settings: parseSettings({ payload }),
      cluster: new SnapshotCluster([{ kind: "Namespace", metadata: { name: NS } }]),
      ...(old ? { operation: "UPDATE" as const, oldObject: old } : {}),
    });

  it("denies a pod with 35,000 projected sources, with the numbers and the fix", async () => {
    const r = await run(projectedPod(names(35_000)));
    expect(r.allowed).toBe(false);
    const v = r.violations.find(x => x.rule === "too-many-projected-sources")!;
    expect(formatViolation(v)).toBe(
      'admission-guard/payload-size: spec.volumes has 35,000 projected volume sources, over the limit of 1,000; biggest: volume "all" 35,000 sources. Fix: keep the values in fewer Secrets and ConfigMaps (one holds many keys, projected by one source with items) in spec.volumes[].projected.sources. Admins: payload.maxProjectedSources (env ADMISSION_GUARD_PAYLOAD_MAX_PROJECTED_SOURCES)',
    );
  });

  it("counts every kind of source, across volumes, and names the biggest volumes", async () => {
    const sources = (n: number) =>
      Array.from(
        { length: n },
        (_, i) =>
          [
            { secret: { name: `s${i}` } },
            { configMap: { name: `c${i}` } },
            { serviceAccountToken: { path: `t${i}` } },
            { downwardAPI: { items: [] } },
            { clusterTrustBundle: { path: `b${i}` } },
          ][i % 5],
      );
    const pod = projectedPod([]);
    (pod.spec as { volumes: unknown[] }).volumes = [
      { name: "a", projected: { sources: sources(6) } },
      { name: "b", projected: { sources: sources(5) } },
      { name: "c", emptyDir: {} },
    ];
    expect((await run(pod, { maxProjectedSources: 11 })).allowed).toBe(true);
    const r = await run(pod, { maxProjectedSources: 10 });
    expect(r.violations[0].message).toBe(
      'spec.volumes has 11 projected volume sources, over the limit of 10; biggest: volume "a" 6 sources, volume "b" 5 sources',
    );
    expect((await run(pod, { maxProjectedSources: 0 })).allowed).toBe(true);
  });

  it("an UPDATE of a workload is refused only when it adds projected sources", async () => {
    const deploy = (secrets: string[]): KubeObject => ({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "web", namespace: NS },
      spec: { template: { spec: projectedPod(secrets).spec as object } },
    });
    // Other secrets, as many: the spec changed, the count did not grow.
    const limits = { maxProjectedSources: 10 };
    const r = await run(deploy(names(20, "x")), limits, deploy(names(20)));
    expect(r.allowed).toBe(true);
    // Found in the stored version already: not said again (the engine drops it).
    expect(r.violations).toEqual([]);
    expect((await run(deploy(names(21)), limits, deploy(names(20)))).allowed).toBe(false);
  });
});
