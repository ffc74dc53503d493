// Exemptions: matching, expiry, the namespace rule, and what the engine does with them, over the
// module's real policies (no Pepr, no cluster: a snapshot holds the Exemptions).
import { policies, validators } from "../../../capabilities";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { answer, mutate, review } from "../../../lib/engine";
import {
  applicableExemptions,
  applyExemptions,
  exemptionsNamespaceOwned,
  nameMatches,
  readExemption,
  selectorMatches,
  subjectOf,
  waives,
  type Exemption,
} from "../../../lib/exemptions";
import type { KubeObject } from "../../../lib/objects/pod";
import { defaultSettings, parseSettings, type Settings } from "../../../lib/settings";

const DAY = 24 * 60 * 60 * 1000;
const inDays = (days: number) => new Date(Date.now() + days * DAY).toISOString();

function exemption(
  spec: Record<string, unknown> = {},
  meta: { name?: string; namespace?: string } = {},
): KubeObject {
  return {
    apiVersion: "admission-guard.dev/v1alpha1",
    kind: "Exemption",
    metadata: {
      name: meta.name ?? "gpu-driver",
      namespace: meta.namespace ?? "admission-guard-exemptions",
    },
    spec: {
      reason: "the NVIDIA driver installer loads kernel modules",
      expires: inDays(30),
      match: { namespaces: ["gpu-operator"], names: ["nvidia-driver*"] },
      // privileged entails allowPrivilegeEscalation: a privileged container needs both waived.
      waive: [
        { capability: "security-context", rules: ["privileged", "allowPrivilegeEscalation"] },
      ],
      ...spec,
    },
  };
}

/** A pod as a DaemonSet's controller sends it: generateName, privileged, labels. */
function driverPod(name = "nvidia-driver-", namespace = "gpu-operator"): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { generateName: name, namespace, labels: { app: "nvidia-driver" } },
    spec: {
      containers: [
        {
          name: "driver",
          image: "nvcr.io/nvidia/driver:550",
          securityContext: { privileged: true },
        },
      ],
    },
  };
}

const namespaces = [
  { apiVersion: "v1", kind: "Namespace", metadata: { name: "gpu-operator" } },
  { apiVersion: "v1", kind: "Namespace", metadata: { name: "admission-guard-exemptions" } },
];

const judge = (
  obj: KubeObject,
  objects: KubeObject[] = [],
  settings: Settings = defaultSettings(),
) =>
  review(
    policies,
    obj,
    { settings, cluster: new SnapshotCluster([...namespaces, ...objects]) },
    validators,
  );

const read = (obj: KubeObject): Exemption => {
  const r = readExemption(obj);
  if (!r.exemption) throw new Error(r.problems.join("; "));
  return r.exemption;
};

describe("matching", () => {
  it.each([
    ["nvidia-driver-*", "nvidia-driver-x7k2p", true],
    ["nvidia-driver-*", "nvidia-driver-", true],
    ["nvidia-driver-*", "nvidia-drive", false],
    ["*-driver", "nvidia-driver", true],
    ["*-driver", "nvidia-driver-x", false],
    ["a*b*c", "a-b-c", true],
    ["a*b*c", "abc", true],
    ["a*b*c", "acb", false],
    ["ab*ba", "aba", false],
    ["*", "anything", true],
    ["exact", "exact", true],
    ["exact", "exactly", false],
    ["a.b", "axb", false],
  ])("name %s against %s: %s", (pattern, name, expected) => {
    expect(nameMatches(pattern, name)).toBe(expected);
  });

  it("label selectors hold every term, as the API server reads them", () => {
    const labels = { app: "nvidia-driver", tier: "system" };
    expect(selectorMatches({ matchLabels: { app: "nvidia-driver" } }, labels)).toBe(true);
    expect(selectorMatches({ matchLabels: { app: "other" } }, labels)).toBe(false);
    const expr = (operator: string, values?: string[]) => ({
      matchExpressions: [{ key: "tier", operator, values }],
    });
    expect(selectorMatches(expr("In", ["system", "x"]), labels)).toBe(true);
    expect(selectorMatches(expr("In", ["x"]), labels)).toBe(false);
    expect(selectorMatches(expr("NotIn", ["x"]), labels)).toBe(true);
    expect(selectorMatches(expr("NotIn", ["system"]), labels)).toBe(false);
    expect(selectorMatches(expr("NotIn", ["system"]), {})).toBe(true);
    expect(selectorMatches(expr("Exists"), labels)).toBe(true);
    expect(selectorMatches(expr("Exists"), {})).toBe(false);
    expect(selectorMatches(expr("DoesNotExist"), labels)).toBe(false);
    // An operator the API does not have matches nothing: never waive by mistake.
    expect(selectorMatches(expr("Matches", ["system"]), labels)).toBe(false);
    expect(selectorMatches({}, labels)).toBe(true);
  });

  it("a workload is matched by its name and its pods' labels; a controller's pod by generateName", () => {
    const ds: KubeObject = {
      apiVersion: "apps/v1",
      kind: "DaemonSet",
      metadata: { name: "nvidia-driver", namespace: "gpu-operator", labels: { owner: "x" } },
      spec: {
        template: { metadata: { labels: { app: "nvidia-driver" } }, spec: { containers: [] } },
      },
    };
    expect(subjectOf(ds, "gpu-operator")).toEqual({
      namespace: "gpu-operator",
      name: "nvidia-driver",
      labels: { app: "nvidia-driver" },
    });
    expect(subjectOf(driverPod(), "gpu-operator").name).toBe("nvidia-driver-");
  });

  it("only Exemptions in the exemptions namespace count; expired ones are told apart", () => {
    const here = exemption();
    const elsewhere = exemption({}, { name: "self-granted", namespace: "gpu-operator" });
    const expired = exemption({ expires: inDays(-1) }, { name: "old" });
    const otherGroup = { ...exemption({}, { name: "uds" }), apiVersion: "uds.dev/v1alpha1" };
    const found = applicableExemptions(
      driverPod(),
      "gpu-operator",
      [here, elsewhere, expired, otherGroup],
      defaultSettings(),
    );
    expect(found.active.map(e => e.id)).toEqual(["admission-guard-exemptions/gpu-driver"]);
    expect(found.expired.map(e => e.id)).toEqual(["admission-guard-exemptions/old"]);
    const off = parseSettings({ exemptions: { enabled: false } });
    expect(applicableExemptions(driverPod(), "gpu-operator", [here], off).active).toEqual([]);
    // Another namespace, another name, a selector that does not hold: no match.
    expect(
      applicableExemptions(
        driverPod("x", "gpu-operator"),
        "gpu-operator",
        [here],
        defaultSettings(),
      ).active,
    ).toEqual([]);
    expect(
      applicableExemptions(driverPod(undefined, "ml"), "ml", [here], defaultSettings()).active,
    ).toEqual([]);
    const bySelector = exemption({
      match: { namespaces: ["gpu-operator"], selector: { matchLabels: { app: "other" } } },
    });
    expect(
      applicableExemptions(driverPod(), "gpu-operator", [bySelector], defaultSettings()).active,
    ).toEqual([]);
  });

  it("waives the rules named, every rule when none are, and never the module's own errors", () => {
    const some = read(exemption());
    expect(waives(some, "security-context", "privileged")).toBe(true);
    expect(waives(some, "security-context", "runAsNonRoot")).toBe(false);
    expect(waives(some, "image-registry", "privileged")).toBe(false);
    const all = read(exemption({ waive: [{ capability: "security-context" }] }));
    expect(waives(all, "security-context", "runAsNonRoot")).toBe(true);
    expect(waives(all, "security-context", "internal-error")).toBe(false);
    expect(waives(all, "security-context", "malformed-object")).toBe(false);
    const own = read(exemption({ waive: [{ capability: "exemptions" }] }));
    expect(waives(own, "exemptions", "exemption-namespace")).toBe(false);
    const v = (rule: string) => ({ capability: "security-context", rule, message: "m", fix: "f" });
    const split = applyExemptions([v("privileged"), v("runAsNonRoot")], {
      active: [some],
      expired: [],
    });
    expect(split.standing.map(x => x.rule)).toEqual(["runAsNonRoot"]);
    expect(split.waived.map(x => x.violation.rule)).toEqual(["privileged"]);
  });
});

describe("reading an Exemption", () => {
  it.each([
    [{ reason: "" }, "spec.reason is required"],
    [{ reason: undefined }, "spec.reason is required"],
    [{ expires: undefined }, "spec.expires is required"],
    [{ expires: "next tuesday" }, 'spec.expires "next tuesday" is not an RFC 3339 time'],
    [{ expires: "2027" }, "is not an RFC 3339 time"],
    [{ match: { namespaces: [] } }, "spec.match.namespaces is required"],
    [{ match: { namespaces: ["a"], names: "x" } }, "spec.match.names must be a list"],
    [
      {
        match: {
          namespaces: ["a"],
          selector: { matchExpressions: [{ key: "k", operator: "Like" }] },
        },
      },
      "needs a key and an operator",
    ],
    [
      {
        match: {
          namespaces: ["a"],
          selector: { matchExpressions: [{ key: "k", operator: "In" }] },
        },
      },
      "In needs values",
    ],
    [{ waive: [] }, "spec.waive is required"],
    [{ waive: [{ rules: ["x"] }] }, "spec.waive[0].capability is required"],
    [
      { waive: [{ capability: "labels", rules: [] }] },
      "spec.waive[0].rules must be a non-empty list",
    ],
  ])("%j: %s", (spec, problem) => {
    const r = readExemption(exemption(spec));
    expect(r.exemption).toBeUndefined();
    expect(r.problems.join("\n")).toContain(problem);
  });

  it("reads a well-formed one", () => {
    expect(read(exemption())).toMatchObject({
      id: "admission-guard-exemptions/gpu-driver",
      namespaces: ["gpu-operator"],
      names: ["nvidia-driver*"],
      waive: [
        { capability: "security-context", rules: ["privileged", "allowPrivilegeEscalation"] },
      ],
    });
  });
});

describe("the engine with Exemptions", () => {
  it("denies a privileged driver pod, and says an Exemption is the way out and who grants it", async () => {
    const r = await judge(driverPod());
    expect(r.allowed).toBe(false);
    expect(r.violations.map(v => `${v.capability}/${v.rule}`)).toContain(
      "security-context/privileged",
    );
    expect(r.warnings.join("\n")).not.toContain("waived");
    const way = (
      await answer(
        { object: structuredClone(driverPod()), operation: "CREATE", dryRun: false },
        { settings: defaultSettings(), cluster: new SnapshotCluster(namespaces), policies },
        policies,
      )
    ).denials.at(-1);
    expect(way).toContain("security-context/privileged");
    expect(way).toContain("whoever may write Exemptions in namespace admission-guard-exemptions");
  });

  it("admits it with an Exemption, with a warning naming the Exemption, and counts it", async () => {
    const r = await judge(driverPod(), [exemption()]);
    expect(r.allowed).toBe(true);
    expect(r.violations.filter(v => v.rule === "privileged")).toEqual([]);
    expect(r.waived.map(w => [w.violation.rule, w.exemption])).toEqual([
      ["privileged", "admission-guard-exemptions/gpu-driver"],
      ["allowPrivilegeEscalation", "admission-guard-exemptions/gpu-driver"],
    ]);
    expect(r.warnings).toContainEqual(
      expect.stringMatching(
        /^admission-guard\/security-context: privileged waived by Exemption admission-guard-exemptions\/gpu-driver until .* \(the NVIDIA driver installer loads kernel modules\)/,
      ),
    );
    const a = await answer(
      { object: structuredClone(driverPod()), operation: "CREATE", dryRun: false },
      {
        settings: defaultSettings(),
        cluster: new SnapshotCluster([...namespaces, exemption()]),
        policies,
      },
      policies,
    );
    expect(a.events).toContainEqual({
      capability: "security-context",
      outcome: "exempted",
      rule: "privileged",
      exemption: "admission-guard-exemptions/gpu-driver",
    });
  });

  it("does not count an Exemption its author wrote next to the workload", async () => {
    const r = await judge(driverPod(), [exemption({}, { namespace: "gpu-operator" })]);
    expect(r.allowed).toBe(false);
    expect(r.waived).toEqual([]);
  });

  it("stops counting an expired Exemption, and says so", async () => {
    const r = await judge(driverPod(), [exemption({ expires: inDays(-1) })]);
    expect(r.allowed).toBe(false);
    expect(r.warnings).toContainEqual(
      expect.stringContaining("Exemption admission-guard-exemptions/gpu-driver expired at"),
    );
    expect(r.warnings.join("\n")).toContain(
      "no longer waives security-context/privileged, security-context/allowPrivilegeEscalation",
    );
  });

  it("waives only the rules named: another violation still denies", async () => {
    const pod = driverPod();
    (pod.spec as { hostNetwork?: boolean }).hostNetwork = true;
    const r = await judge(pod, [exemption()]);
    expect(r.allowed).toBe(false);
    expect(r.violations.map(v => v.rule)).toEqual(["hostNamespaces"]);
  });

  it("a whole capability waived: its fixes are skipped too, the pod stays as written", async () => {
    const whole = exemption({ waive: [{ capability: "security-context" }] });
    const pod = driverPod();
    const deps = {
      settings: defaultSettings(),
      cluster: new SnapshotCluster([...namespaces, whole]),
      policies,
    };
    const fixed = await mutate({ object: pod, operation: "CREATE", dryRun: false }, deps, policies);
    expect(fixed.changes.filter(c => c.capability === "security-context")).toEqual([]);
    expect(fixed.changes.length).toBeGreaterThan(0); // the other capabilities still fix it
    expect(pod.spec).not.toHaveProperty("securityContext");
    const r = await judge(driverPod(), [whole]);
    expect(r.allowed).toBe(true);
    // Without the Exemption the same pod gets its securityContext filled.
    const plain = driverPod();
    await mutate(
      { object: plain, operation: "CREATE", dryRun: false },
      { ...deps, cluster: new SnapshotCluster(namespaces) },
      policies,
    );
    expect(plain.spec).toHaveProperty("securityContext.runAsNonRoot", true);
  });

  it("never waives what the API server enforces anyway (a full quota), and does not offer it", async () => {
    const quota = {
      apiVersion: "v1",
      kind: "ResourceQuota",
      metadata: { name: "gpus", namespace: "gpu-operator" },
      spec: { hard: { "requests.cpu": "1" } },
      status: { hard: { "requests.cpu": "1" }, used: { "requests.cpu": "1" } },
    };
    const limits = {
      apiVersion: "v1",
      kind: "LimitRange",
      metadata: { name: "l", namespace: "gpu-operator" },
      spec: { limits: [] },
    };
    const pod = driverPod();
    const spec = pod.spec as { containers: Record<string, unknown>[] };
    spec.containers[0].securityContext = {};
    spec.containers[0].resources = { requests: { cpu: "1" }, limits: { cpu: "1" } };
    const whole = exemption({ waive: [{ capability: "resource-quota" }] });
    const r = await judge(pod, [quota, limits, whole]);
    expect(r.allowed).toBe(false);
    expect(r.violations.map(v => v.rule)).toEqual(["quota-exceeded"]);
    expect(r.waived).toEqual([]);
    expect(r.denials).toHaveLength(1); // no way out offered: only the quota's fix
  });

  it("a DaemonSet and its pods are covered by one Exemption", async () => {
    const ds: KubeObject = {
      apiVersion: "apps/v1",
      kind: "DaemonSet",
      metadata: { name: "nvidia-driver", namespace: "gpu-operator" },
      spec: {
        selector: { matchLabels: { app: "nvidia-driver" } },
        template: { metadata: { labels: { app: "nvidia-driver" } }, spec: driverPod().spec },
      },
    };
    expect((await judge(ds)).allowed).toBe(false);
    expect((await judge(ds, [exemption()])).allowed).toBe(true);
  });
});

describe("the exemptions capability judges Exemptions as they are written", () => {
  const problems = async (obj: KubeObject, objects: KubeObject[] = []) => {
    const r = await judge(obj, objects);
    return {
      allowed: r.allowed,
      rules: r.violations.map(v => v.rule),
      text: r.violations.map(v => `${v.message} Fix: ${v.fix}`).join("\n"),
    };
  };

  it("admits a well-formed one in the exemptions namespace", async () => {
    expect(await problems(exemption())).toEqual({ allowed: true, rules: [], text: "" });
  });

  it("refuses one outside the exemptions namespace, saying who grants them", async () => {
    const r = await problems(exemption({}, { namespace: "gpu-operator" }));
    expect(r.allowed).toBe(false);
    expect(r.rules).toEqual(["exemption-namespace"]);
    // No Exemption waives the Exemptions' own rules: the denial offers none.
    const denied = await judge(exemption({}, { namespace: "gpu-operator" }));
    expect(denied.denials).toHaveLength(1);
    expect(denied.denials[0]).toMatch(/^admission-guard\/exemptions: /);
    expect(r.text).toContain("is not in namespace admission-guard-exemptions");
    expect(r.text).toContain("never a workload's author");
  });

  it("refuses it there even when the namespace's mode label is off", async () => {
    const offNs = {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: "team", labels: { "admission-guard.dev/mode": "off" } },
    };
    const r = await problems(exemption({}, { namespace: "team" }), [offNs]);
    expect(r.allowed).toBe(false);
  });

  it("refuses unknown capabilities and rules, naming the known ones", async () => {
    const r = await problems(
      exemption({
        waive: [
          { capability: "securty-context" },
          { capability: "security-context", rules: ["privileged", "priviledged"] },
          { capability: "exemptions" },
        ],
      }),
    );
    expect(r.rules).toEqual(["unknown-rule", "unknown-rule", "unknown-rule"]);
    expect(r.text).toContain('"securty-context" is no capability of this module');
    expect(r.text).toContain("use one of image-registry, shared-memory, security-context");
    expect(r.text).toContain('names "priviledged", not rules of security-context');
    expect(r.text).not.toContain("internal-error");
  });

  it("refuses a rule no Exemption may waive, saying why and what to do instead", async () => {
    const r = await problems(
      exemption({
        waive: [{ capability: "resource-quota", rules: ["quota-exceeded", "node-fit"] }],
      }),
    );
    expect(r.rules).toEqual(["not-waivable"]);
    expect(r.text).toContain(
      "names resource-quota/quota-exceeded, which no Exemption waives: the API server's ResourceQuota admission refuses the pod anyway",
    );
    expect(r.text).toContain("an admin raises the quota");
  });

  it("refuses an expiry in the past or beyond the maximum lifetime", async () => {
    expect((await problems(exemption({ expires: inDays(-1) }))).text).toContain("is in the past");
    const far = await problems(exemption({ expires: inDays(91) }));
    expect(far.rules).toEqual(["expiry"]);
    expect(far.text).toContain("more than exemptions.maxLifetimeDays (90) days away");
    expect((await problems(exemption({ expires: inDays(89) }))).allowed).toBe(true);
  });

  it("refuses a missing reason", async () => {
    const r = await problems(exemption({ reason: "  " }));
    expect(r.rules).toEqual(["invalid-exemption"]);
    expect(r.text).toContain("spec.reason is required");
  });

  it("holding in every mode does not make it act on Pods: a Pod in a namespace that is off is not handled", async () => {
    const offNs = {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: "gpu-operator", labels: { "admission-guard.dev/mode": "off" } },
    };
    const r = await review(policies, driverPod(), {
      settings: defaultSettings(),
      cluster: new SnapshotCluster([offNs]),
    });
    expect(r.handled).toBe(false);
    expect(r.allowed).toBe(true);
  });

  it("leaves another group's Exemption alone", async () => {
    const uds = { ...exemption({}, { namespace: "gpu-operator" }), apiVersion: "uds.dev/v1alpha1" };
    expect((await judge(uds)).violations).toEqual([]);
  });
});

describe("every capability lists its rules", () => {
  it("each policy names the rules it may report, and no two policies share a name", () => {
    const names = policies.map(p => p.name);
    expect(new Set(names).size).toBe(names.length);
    for (const p of policies) expect(p.rules.length).toBeGreaterThan(0);
  });
});

describe("an Exemption holds in use, not only at write", () => {
  const written = (daysAgo: number, expiresInDays: number, how: "managed" | "created") => {
    const e = exemption({ expires: inDays(expiresInDays) });
    const at = new Date(Date.now() - daysAgo * DAY).toISOString();
    e.metadata = {
      ...e.metadata,
      ...(how === "managed"
        ? {
            creationTimestamp: new Date(Date.now() - 400 * DAY).toISOString(),
            managedFields: [
              {
                manager: "kubectl",
                operation: "Apply",
                time: new Date(Date.now() - 300 * DAY).toISOString(),
              },
              { manager: "kubectl", operation: "Update", time: at },
            ],
          }
        : { creationTimestamp: at }),
    } as unknown as KubeObject["metadata"];
    return e;
  };
  const settings = defaultSettings(); // maxLifetimeDays 90

  it("one written 100 days ago with an expiry a year out no longer counts, and says why", async () => {
    const found = applicableExemptions(
      driverPod(),
      "gpu-operator",
      [written(100, 365, "created")],
      settings,
    );
    expect(found.active).toEqual([]);
    expect(found.expired).toHaveLength(1);
    expect(found.expired[0]).toMatchObject({ capped: true });
    const r = await review(policies, driverPod(), {
      settings,
      cluster: new SnapshotCluster([written(100, 365, "created")]),
    });
    expect(r.allowed).toBe(false);
    expect(r.warnings).toContainEqual(
      expect.stringMatching(
        /Exemption admission-guard-exemptions\/gpu-driver expired at .* \(exemptions\.maxLifetimeDays after it was last written, before its spec\.expires\)/,
      ),
    );
  });

  it("a renewal (its latest managedFields time) counts again, until maxLifetimeDays after it", () => {
    const renewed = written(10, 365, "managed");
    const found = applicableExemptions(driverPod(), "gpu-operator", [renewed], settings);
    expect(found.active).toHaveLength(1);
    const until = Date.parse(found.active[0].expires);
    expect(Math.round((until - (Date.now() - 10 * DAY)) / DAY)).toBe(90);
  });

  it("within both limits it counts until its own expires", () => {
    // One object for both reads: two calls of written() would see two different clocks.
    const recent = written(1, 30, "created");
    const found = applicableExemptions(driverPod(), "gpu-operator", [recent], settings);
    expect(found.active[0].capped).toBeUndefined();
    expect(found.active[0].expires).toBe(readExemption(recent).exemption?.expires);
  });
});

describe("exemptions.namespace must be one the webhook sees", () => {
  it.each([["kube-system"], ["pepr-system"]])("%s is refused at start-up, named", ns => {
    expect(() => parseSettings({ exemptions: { namespace: ns } })).toThrow(
      `exemptions.namespace: "${ns}" is a namespace the webhook never sees (a system namespace)`,
    );
  });

  it("an ignored namespace is refused too", () => {
    expect(() =>
      parseSettings({ ignoredNamespaces: ["platform"], exemptions: { namespace: "platform" } }),
    ).toThrow('"platform" is a namespace the webhook never sees (in ignoredNamespaces)');
  });
});

describe("the Exemptions namespace counts only as the install's own", () => {
  const UUID = "4473f691-a31f-4e7a-acc9-f7166d266bae";
  const ns = (labels: Record<string, string>) => ({
    name: "admission-guard-exemptions",
    labels,
    annotations: {},
  });
  it("owned: the install's label with this module's uuid", () => {
    expect(exemptionsNamespaceOwned(ns({ "admission-guard.dev/owned-by": UUID }), UUID)).toBe(true);
  });
  it.each([
    ["created by a tenant first (no label)", ns({})],
    ["labelled for another install", ns({ "admission-guard.dev/owned-by": "another-uuid" })],
    ["labelled with an empty value", ns({ "admission-guard.dev/owned-by": "" })],
    ["not known (not in the cache)", undefined],
  ])("not owned: %s", (_, namespace) => {
    expect(exemptionsNamespaceOwned(namespace, UUID)).toBe(false);
  });
  it("no uuid never owns", () => {
    expect(exemptionsNamespaceOwned(ns({ "admission-guard.dev/owned-by": "" }), "")).toBe(false);
  });
});

describe("an Exemption where it would not count is refused as it is written", () => {
  const UUID = "4473f691-a31f-4e7a-acc9-f7166d266bae";
  const OWNED_BY = "admission-guard.dev/owned-by";
  const exemptionsNs = (labels: Record<string, string>): KubeObject => ({
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: "admission-guard-exemptions", labels },
  });
  /** As `check` judges: a snapshot that knows the module's uuid. */
  const judgeOwned = (obj: KubeObject, objects: KubeObject[]) =>
    review(
      policies,
      obj,
      {
        settings: defaultSettings(),
        cluster: new SnapshotCluster([namespaces[0], ...objects], undefined, undefined, UUID),
      },
      validators,
    );

  it("in the exemptions namespace without the install's label: refused, naming the label, its value and the admin's command", async () => {
    const r = await judgeOwned(exemption(), [exemptionsNs({})]);
    expect(r.allowed).toBe(false);
    expect(r.violations.map(v => v.rule)).toEqual(["namespace-not-owned"]);
    expect(r.denials[0]).toMatch(
      /^admission-guard\/exemptions: Exemption admission-guard-exemptions\/gpu-driver would waive nothing: namespace admission-guard-exemptions lacks the label admission-guard.dev\/owned-by=4473f691-a31f-4e7a-acc9-f7166d266bae .*\(it has no such label\)/,
    );
    expect(r.denials[0]).toContain(
      `Fix: a cluster admin first checks who may write there (kubectl get rolebindings,roles -n admission-guard-exemptions`,
    );
    expect(r.denials[0]).toContain(
      `kubectl label namespace admission-guard-exemptions ${OWNED_BY}=${UUID}`,
    );
  });

  it("labelled for another install: refused, saying which value it has", async () => {
    const r = await judgeOwned(exemption(), [exemptionsNs({ [OWNED_BY]: "another-uuid" })]);
    expect(r.allowed).toBe(false);
    expect(r.denials[0]).toContain(`(it has ${OWNED_BY}=another-uuid)`);
  });

  it("in the install's own namespace: admitted, and it waives", async () => {
    const owned = exemptionsNs({ [OWNED_BY]: UUID });
    expect((await judgeOwned(exemption(), [owned])).allowed).toBe(true);
    expect((await judgeOwned(driverPod(), [owned, exemption()])).allowed).toBe(true);
  });

  it("check waives nothing where the webhook would not: an Exemption in a namespace not owned", async () => {
    const squatted = exemptionsNs({});
    expect((await judgeOwned(driverPod(), [squatted, exemption()])).allowed).toBe(false);
    // A snapshot that lacks the namespace does not know: its Exemptions count (docs/check.md).
    expect((await judgeOwned(driverPod(), [exemption()])).allowed).toBe(true);
  });

  it("a namespace not known, or no uuid to judge by, is not refused for it", async () => {
    expect((await judgeOwned(exemption(), [])).allowed).toBe(true);
    expect((await judge(exemption(), [])).allowed).toBe(true);
  });

  it("elsewhere: refused for the namespace alone, not also for its ownership", async () => {
    const r = await judgeOwned(exemption({}, { namespace: "gpu-operator" }), [exemptionsNs({})]);
    expect(r.violations.map(v => v.rule)).toEqual(["exemption-namespace"]);
  });
});
