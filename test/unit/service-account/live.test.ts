// LiveCluster's ServiceAccount side: known from the ServiceAccount watch (fed directly here),
// created when a namespace appears or a pod needs one that is missing, once for concurrent pods,
// never on dry run; access reviews cached. The API client is replaced by a recording fake.
const applied: { namespace?: string; name?: string }[] = [];
let applyError: unknown;
let applyDelayMs = 0;
let inFlight = 0;
let maxInFlight = 0;
const reviews: string[] = [];
let reviewAllows = false;
let reviewError: unknown;

jest.mock("kubernetes-fluent-client", () => {
  const actual = jest.requireActual("kubernetes-fluent-client");
  return {
    ...actual,
    K8s: () => ({
      Apply: async (obj: { metadata: { namespace?: string; name?: string } }) => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        if (applyDelayMs) await new Promise(r => setTimeout(r, applyDelayMs));
        inFlight--;
        if (applyError) throw applyError;
        applied.push({ namespace: obj.metadata.namespace, name: obj.metadata.name });
        return obj;
      },
      Create: async (review: { spec: { user: string; resourceAttributes: { name: string } } }) => {
        if (reviewError) throw reviewError;
        reviews.push(`${review.spec.user} ${review.spec.resourceAttributes.name}`);
        return { ...review, status: { allowed: reviewAllows } };
      },
    }),
  };
});

import type { KubernetesObject } from "kubernetes-fluent-client";
import { serviceAccountForNewNamespace } from "../../../capabilities/service-account/rules";
import { checkSecretAccess } from "../../../capabilities/service-account/secret-access";
import { contextFor } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import { podTemplateOf } from "../../../lib/workload-kinds/built-in";
import {
  AccessReviews,
  ANSWER_TTL_MS,
  DENIED_ANSWER_TTL_MS,
  MAX_ANSWERS,
} from "../../../lib/cluster/access-reviews";
import { describeError } from "../../../lib/cluster/api-calls";
import { BACKGROUND_CONCURRENCY, LiveCluster } from "../../../lib/cluster/live";
import { CREATED_GRACE_MS } from "../../../lib/cluster/service-accounts";
import { parseSettings } from "../../../lib/settings";

// The annotation below names "trainer", which an admin allowed.
const settings = parseSettings({ serviceAccount: { allowedNames: ["trainer"] } });
const live = () =>
  new LiveCluster(undefined, {
    serviceAccountFor: ns => serviceAccountForNewNamespace(ns, settings),
  });
const ns = (name: string, createdMsAgo: number, annotations: Record<string, string> = {}) =>
  ({
    apiVersion: "v1",
    kind: "Namespace",
    metadata: {
      name,
      annotations,
      creationTimestamp: new Date(Date.now() - createdMsAgo).toISOString(),
    },
  }) as unknown as KubernetesObject;
const settle = () => new Promise(r => setImmediate(r));
const account = (namespace: string, name: string) =>
  ({
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: {
      namespace,
      name,
      uid: "u-1",
      labels: { a: "b" },
      annotations: { big: "x".repeat(5000) },
    },
    secrets: [{ name: `${name}-token` }],
  }) as unknown as KubernetesObject;
/** A live view whose ServiceAccount watch has listed these accounts. */
const watching = (...accounts: [string, string][]) => {
  const cluster = live();
  for (const [ns, name] of accounts) cluster.accounts.store.apply(account(ns, name), "ADDED");
  cluster.accounts.store.synced = true;
  return cluster;
};

afterEach(() => jest.restoreAllMocks());

beforeEach(() => {
  reviews.length = 0;
  reviewAllows = false;
  reviewError = undefined;
  applied.length = 0;
  applyError = undefined;
  applyDelayMs = 0;
  maxInFlight = 0;
});

describe("LiveCluster: ServiceAccounts", () => {
  it("creates the dedicated ServiceAccount of a namespace that just appeared, not of old ones", async () => {
    const cluster = live();
    cluster.namespaces.apply(
      ns("fresh", 1000, { "admission-guard.dev/service-account": "trainer" }),
      "ADDED",
    );
    cluster.namespaces.apply(ns("old", 24 * 3600_000), "ADDED");
    cluster.namespaces.apply(ns("kube-system", 1000), "ADDED");
    cluster.namespaces.apply(ns("fresh2", 1000), "MODIFIED");
    await settle();
    expect(applied).toEqual([{ namespace: "fresh", name: "trainer" }]);
    expect(cluster.serviceAccount("fresh", "trainer")).toBeTruthy();
  });

  it("remembers a created ServiceAccount, and forgets it when its namespace is deleted", async () => {
    const cluster = live();
    expect(await cluster.ensureServiceAccount("ml", "workload", false)).toEqual({
      state: "created",
    });
    expect(await cluster.ensureServiceAccount("ml", "workload", false)).toEqual({
      state: "exists",
    });
    expect(applied).toHaveLength(1);
    cluster.namespaces.apply(ns("ml", 1000), "DELETED");
    expect(cluster.serviceAccount("ml", "workload")).toBeUndefined();
    expect(await cluster.ensureServiceAccount("ml", "workload", false)).toEqual({
      state: "created",
    });
    expect(applied).toHaveLength(2);
  });

  it("creates nothing on dry run, and reports a failure with its reason", async () => {
    const cluster = live();
    expect(await cluster.ensureServiceAccount("ml", "workload", true)).toEqual({
      state: "would-create",
    });
    expect(applied).toEqual([]);
    applyError = new Error('serviceaccounts is forbidden: User "x" cannot patch');
    expect(await cluster.ensureServiceAccount("ml", "workload", false)).toEqual({
      state: "failed",
      reason: 'serviceaccounts is forbidden: User "x" cannot patch',
    });
    expect(cluster.serviceAccount("ml", "workload")).toBeUndefined();
  });

  it("knows accounts from the watch: a deleted one is missing at once and created again by the next pod", async () => {
    const cluster = watching(["team-b", "workload"]);
    expect(cluster.serviceAccount("team-b", "workload")).toBeTruthy();
    expect(await cluster.ensureServiceAccount("team-b", "workload", false)).toEqual({
      state: "exists",
    });
    expect(applied).toEqual([]);
    cluster.accounts.store.apply(account("team-b", "workload"), "DELETED");
    expect(cluster.serviceAccount("team-b", "workload")).toBeNull();
    expect(await cluster.ensureServiceAccount("team-b", "workload", false)).toEqual({
      state: "created",
    });
    expect(applied).toEqual([{ namespace: "team-b", name: "workload" }]);
  });

  it("says unknown before the watch has listed, and missing after", () => {
    const cluster = live();
    expect(cluster.serviceAccount("ml", "workload")).toBeUndefined();
    cluster.accounts.store.synced = true;
    expect(cluster.serviceAccount("ml", "workload")).toBeNull();
  });

  it("keeps only the names of the accounts it watches", () => {
    const cluster = watching(["ml", "workload"]);
    expect(cluster.accounts.store.items.get("ml/workload")).toEqual({
      metadata: { namespace: "ml", name: "workload" },
    });
  });

  it("pods admitted at once in a namespace whose account is missing share one create", async () => {
    const cluster = watching();
    applyDelayMs = 20;
    const results = await Promise.all(
      Array.from({ length: 5 }, () => cluster.ensureServiceAccount("team-b", "workload", false)),
    );
    expect(results).toEqual(Array(5).fill({ state: "created" }));
    expect(applied).toHaveLength(1);
    // Until the watch shows it, the create counts.
    expect(await cluster.ensureServiceAccount("team-b", "workload", false)).toEqual({
      state: "exists",
    });
    expect(applied).toHaveLength(1);
  });

  it("a create the watch never confirms counts only for a short while", async () => {
    const cluster = watching();
    await cluster.ensureServiceAccount("ml", "workload", false);
    expect(cluster.serviceAccount("ml", "workload")).toBeTruthy();
    const now = Date.now();
    jest.spyOn(Date, "now").mockReturnValue(now + CREATED_GRACE_MS + 1);
    expect(cluster.serviceAccount("ml", "workload")).toBeNull();
  });

  it("a dry run never creates, also when the account is missing from the watch", async () => {
    const cluster = watching();
    expect(await cluster.ensureServiceAccount("ml", "workload", true)).toEqual({
      state: "would-create",
    });
    expect(applied).toEqual([]);
  });

  it("reuses an access review's 'allowed' for a while, but asks again soon after a 'not allowed'", async () => {
    const cluster = live();
    const now = Date.now();
    const clock = jest.spyOn(Date, "now").mockReturnValue(now);
    const ask = async () => (await cluster.secretAccess("ml", "workload", ["s"]))?.allowed.get("s");
    expect(await ask()).toBe(false);
    expect(await ask()).toBe(false);
    expect(reviews).toHaveLength(1);
    // The denial told the user to grant access; they did.
    reviewAllows = true;
    clock.mockReturnValue(now + DENIED_ANSWER_TTL_MS + 1);
    expect(await ask()).toBe(true);
    expect(reviews).toHaveLength(2);
    clock.mockReturnValue(now + DENIED_ANSWER_TTL_MS + ANSWER_TTL_MS);
    expect(await ask()).toBe(true);
    expect(reviews).toHaveLength(2);
  });

  it("keeps at most MAX_ANSWERS access answers, the oldest dropped first", async () => {
    const cache = new AccessReviews();
    const secrets = Array.from({ length: MAX_ANSWERS + 50 }, (_, i) => `s-${i}`);
    for (let i = 0; i < secrets.length; i += 500)
      await cache.secretAccess("ml", "workload", secrets.slice(i, i + 500));
    expect(cache.size).toBe(MAX_ANSWERS);
    // The newest is still answered from memory, the oldest asked again.
    const asked = reviews.length;
    await cache.secretAccess("ml", "workload", [secrets[secrets.length - 1]]);
    expect(reviews.length).toBe(asked);
    await cache.secretAccess("ml", "workload", [secrets[0]]);
    expect(reviews.length).toBe(asked + 1);
  });

  it("creates the ServiceAccounts of a burst of new namespaces a few at a time", async () => {
    const cluster = live();
    applyDelayMs = 20;
    for (let i = 0; i < 30; i++) cluster.namespaces.apply(ns(`burst-${i}`, 1000), "ADDED");
    await new Promise(r => setTimeout(r, 20 * 30));
    expect(applied).toHaveLength(30);
    expect(maxInFlight).toBeGreaterThan(1);
    expect(maxInFlight).toBeLessThanOrEqual(BACKGROUND_CONCURRENCY);
  });

  it("says why, from the failed response the API client throws (not [object Object])", async () => {
    const message =
      'serviceaccounts "workload" is forbidden: User "system:serviceaccount:pepr-system:pepr-x" cannot create resource "serviceaccounts" in API group "" in the namespace "ml"';
    applyError = {
      ok: false,
      status: 403,
      statusText: "Forbidden",
      data: { kind: "Status", apiVersion: "v1", status: "Failure", reason: "Forbidden", message },
    };
    expect(await live().ensureServiceAccount("ml", "workload", false)).toEqual({
      state: "failed",
      reason: `HTTP 403 Forbidden: ${message}`,
    });
  });
});

describe("secret access with the live view", () => {
  const pod: KubeObject = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "trainer", namespace: "ml" },
    spec: {
      serviceAccountName: "workload",
      containers: [{ name: "c", envFrom: [{ secretRef: { name: "config" } }] }],
    },
  };
  const check = (cluster: LiveCluster) =>
    checkSecretAccess(
      pod,
      { object: pod, template: podTemplateOf(pod)!, isTemplate: false },
      contextFor(pod, { settings, cluster }),
    );

  it("an access review that fails is a warning that the API server gave no answer, never a denial", async () => {
    reviewError = new Error("connect ECONNREFUSED");
    const findings = await check(live());
    expect(findings.violations).toEqual([]);
    expect(findings.warnings).toEqual([
      'admission-guard/service-account: not checked whether ServiceAccount ml/workload may get secret(s) "config" (the API server gave no answer in time)',
    ]);
  });

  it("a review that says no is the secret-access finding for the pod's ServiceAccount", async () => {
    const findings = await check(live());
    expect(reviews).toEqual(["system:serviceaccount:ml:workload config"]);
    expect(findings.warnings).toEqual([]);
    expect(findings.violations.map(v => [v.rule, v.severity])).toEqual([["secret-access", "warn"]]);
  });
});

describe("describeError", () => {
  it("names the cause of a transport failure, the client's or an Error's", () => {
    const refused = Object.assign(new TypeError("fetch failed"), {
      cause: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:6443"), {
        code: "ECONNREFUSED",
      }),
    });
    expect(describeError(refused)).toBe(
      "fetch failed: ECONNREFUSED connect ECONNREFUSED 127.0.0.1:6443",
    );
    // The client catches the transport error and throws a response carrying it in `e`.
    expect(describeError({ ok: false, status: 400, statusText: "fetch failed", e: refused })).toBe(
      describeError(refused),
    );
  });

  it("leaves out the response headers a failed watch list carries in its message", () => {
    const listFailed = new Error(
      'list failed: 403 Forbidden [["audit-id","9cc2b7c2"],["cache-control","no-cache, private"],["content-length","345"]]',
    );
    expect(describeError(listFailed)).toBe("list failed: 403 Forbidden");
  });

  it("keeps a text body short and says something for anything else", () => {
    const page = "<html>" + "x".repeat(2000) + "</html>";
    const said = describeError({ status: 502, statusText: "Bad Gateway", data: page });
    expect(said.startsWith("HTTP 502 Bad Gateway: <html>xxx")).toBe(true);
    expect(said.length).toBeLessThan(600);
    expect(describeError({ status: 500 })).toBe("HTTP 500");
    expect(describeError("boom")).toBe("boom");
    expect(describeError(undefined)).toBe("undefined");
  });
});
