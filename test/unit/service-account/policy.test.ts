import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { defaultPod } from "../../support/admission";
import { labelsPolicy } from "../../../capabilities/labels";
import { serviceAccountPolicy } from "../../../capabilities/service-account";
import {
  dedicatedServiceAccount,
  moveOffDefault,
  serviceAccountForNewNamespace,
} from "../../../capabilities/service-account/rules";
import {
  grantCommands,
  secretReferences,
} from "../../../capabilities/service-account/secret-access";
import { SnapshotCluster, type EnsureResult } from "../../../lib/cluster/view";
import { answer, contextFor, mutate, review } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import { podTemplateOf } from "../../../lib/workload-kinds/built-in";
import { parseSettings, type SettingsInput } from "../../../lib/settings";
import * as fc from "fast-check";

const NS = "llama-index";
// The token volume and mount exactly as the API server's ServiceAccount plugin injects them (the
// e2e harness's imitation of it), with its random kube-api-access-xxxxx name.
const injected = defaultPod({ kind: "Pod", spec: { containers: [{ name: "c" }] } }, NS).spec as {
  volumes: { name: string }[];
  containers: { volumeMounts: { name: string }[] }[];
};
const TOKEN_VOLUME = injected.volumes.find(v => v.name.startsWith("kube-api-access-"))!;
const TOKEN_MOUNT = injected.containers[0].volumeMounts.find(m => m.name === TOKEN_VOLUME.name)!;

/** Seed 000's trainer pod as the webhook receives it: defaulted by the ServiceAccount plugin. */
const seedPod = (spec: Record<string, unknown> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "llamaindex-trainer-xxxx", namespace: NS },
  spec: {
    serviceAccountName: "default",
    serviceAccount: "default",
    containers: [
      {
        name: "trainer",
        image: "ghcr.io/run-llama/llama-index:latest",
        envFrom: [{ secretRef: { name: "llama-index-config" } }],
        volumeMounts: [{ name: "data", mountPath: "/data" }, TOKEN_MOUNT],
      },
    ],
    initContainers: [{ name: "setup", image: "busybox", volumeMounts: [TOKEN_MOUNT] }],
    volumes: [{ name: "data", emptyDir: {} }, TOKEN_VOLUME],
    ...spec,
  },
});

const namespace = (
  annotations: Record<string, string> = {},
  labels: Record<string, string> = {},
) => ({
  kind: "Namespace",
  metadata: { name: NS, annotations, labels },
});
const saObject = (name: string) => ({ kind: "ServiceAccount", metadata: { namespace: NS, name } });
const secretReader = (sa: string, names?: string[]) => [
  {
    kind: "Role",
    metadata: { namespace: NS, name: "reader" },
    rules: [
      {
        verbs: ["get"],
        apiGroups: [""],
        resources: ["secrets"],
        ...(names ? { resourceNames: names } : {}),
      },
    ],
  },
  {
    kind: "RoleBinding",
    metadata: { namespace: NS, name: "reader" },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "reader" },
    subjects: [{ kind: "ServiceAccount", name: sa, namespace: NS }],
  },
];
const settings = (serviceAccount: SettingsInput["serviceAccount"] = {}) =>
  parseSettings({ serviceAccount });
const policies = [serviceAccountPolicy];
const containersOf = (obj: KubeObject) =>
  (podTemplateOf(obj)!.spec.containers ?? []).concat(podTemplateOf(obj)!.spec.initContainers ?? []);

describe("service-account: move pods off default", () => {
  it("moves the seed 000 pod to the dedicated ServiceAccount and drops the injected token", async () => {
    const r = await review(policies, seedPod(), {
      settings: settings(),
      cluster: new SnapshotCluster([namespace()]),
    });
    const spec = podTemplateOf(r.object)!.spec;
    expect(spec.serviceAccountName).toBe("workload");
    expect(spec.serviceAccount).toBe("workload");
    expect(spec.automountServiceAccountToken).toBe(false);
    expect(spec.volumes?.map(v => v.name)).toEqual(["data"]);
    for (const c of containersOf(r.object))
      expect(c.volumeMounts?.map(m => m.name)).not.toContain(TOKEN_MOUNT.name);
    expect(spec.containers[0].volumeMounts).toEqual([{ name: "data", mountPath: "/data" }]);
    expect(r.changes.map(c => c.rule)).toEqual([
      "dedicated-service-account",
      "no-token",
      "no-token",
    ]);
    // Offline, what the webhook would do: the account is created first, and said so in the change.
    expect(r.changes[0].message).toBe(
      'spec.serviceAccountName="workload" (was default; created ServiceAccount llama-index/workload)',
    );
  });

  it("a pod without serviceAccountName counts as default; no serviceAccount alias is invented", async () => {
    const pod = seedPod();
    delete (pod.spec as Record<string, unknown>).serviceAccountName;
    delete (pod.spec as Record<string, unknown>).serviceAccount;
    const r = await review(policies, pod, {
      settings: settings(),
      cluster: new SnapshotCluster([]),
    });
    const spec = podTemplateOf(r.object)!.spec;
    expect(spec.serviceAccountName).toBe("workload");
    expect("serviceAccount" in spec).toBe(false);
  });

  it("the namespace annotation names the ServiceAccount an admin allowed; an invalid one falls back with a warning", async () => {
    const named = await review(policies, seedPod(), {
      settings: settings({ allowedNames: ["llamaindex-*"] }),
      cluster: new SnapshotCluster([
        namespace({ "admission-guard.dev/service-account": "llamaindex-trainer" }),
      ]),
    });
    expect(podTemplateOf(named.object)!.spec.serviceAccountName).toBe("llamaindex-trainer");
    const invalid = await review(policies, seedPod(), {
      settings: settings(),
      cluster: new SnapshotCluster([
        namespace({ "admission-guard.dev/service-account": "Not_OK" }),
      ]),
    });
    expect(podTemplateOf(invalid.object)!.spec.serviceAccountName).toBe("workload");
    expect(invalid.warnings.join("\n")).toMatch(
      /"Not_OK", which is not a valid ServiceAccount name/,
    );
  });

  it("keeps the token when the pod asked for one, or with keepTokens", async () => {
    for (const [spec, s] of [
      [{ automountServiceAccountToken: true }, settings()],
      [{}, settings({ keepTokens: true })],
    ] as const) {
      const r = await review(policies, seedPod(spec), {
        settings: s,
        cluster: new SnapshotCluster([]),
      });
      const out = podTemplateOf(r.object)!.spec;
      expect(out.serviceAccountName).toBe("workload");
      expect(out.volumes?.map(v => v.name)).toContain(TOKEN_VOLUME.name);
      expect(out.containers[0].volumeMounts).toContainEqual(TOKEN_MOUNT);
      // The ServiceAccount change only: nothing of the token is touched.
      expect(r.changes.map(c => c.rule)).toEqual(["dedicated-service-account"]);
    }
  });

  it("leaves a pod that chose its ServiceAccount, and a user's own kube-api-access-like volume without a token", async () => {
    const chosen = seedPod({ serviceAccountName: "trainer", serviceAccount: "trainer" });
    const before = JSON.stringify(chosen.spec);
    const r = await review(policies, chosen, {
      settings: settings(),
      cluster: new SnapshotCluster([]),
    });
    expect(JSON.stringify(r.object.spec)).toBe(before);

    const own = seedPod({
      volumes: [{ name: "kube-api-access-abcde", configMap: { name: "x" } }],
    });
    const r2 = await review(policies, own, {
      settings: settings(),
      cluster: new SnapshotCluster([]),
    });
    expect(podTemplateOf(r2.object)!.spec.volumes).toEqual([
      { name: "kube-api-access-abcde", configMap: { name: "x" } },
    ]);
  });

  it("does nothing with mutation off, in system namespaces, or when the dedicated name is default", async () => {
    for (const [pod, s, cluster] of [
      [seedPod(), settings({ mutate: false }), new SnapshotCluster([])],
      [
        { ...seedPod(), metadata: { name: "p", namespace: "kube-system" } },
        settings(),
        new SnapshotCluster([]),
      ],
      [seedPod(), settings({ name: "default" }), new SnapshotCluster([])],
    ] as const) {
      const r = await review(policies, pod, { settings: s, cluster });
      expect(podTemplateOf(r.object)!.spec.serviceAccountName).toBe("default");
    }
  });

  it("is idempotent (property: any token/alias/automount combination)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(undefined, "default", "own"),
        fc.constantFrom(undefined, true, false),
        fc.boolean(),
        fc.boolean(),
        async (sa, automount, withToken, keepTokens) => {
          const pod = seedPod({
            serviceAccountName: sa,
            serviceAccount: sa,
            automountServiceAccountToken: automount,
            volumes: withToken ? [TOKEN_VOLUME] : [],
          });
          const s = settings({ keepTokens });
          const ctx = contextFor(pod, { settings: s, cluster: new SnapshotCluster([]) });
          const target = { object: pod, template: podTemplateOf(pod)!, isTemplate: false };
          await moveOffDefault(target, ctx);
          const once = JSON.stringify(pod);
          expect(await moveOffDefault(target, ctx)).toEqual([]);
          expect(JSON.stringify(pod)).toBe(once);
          // An explicit choice is never overridden.
          if (sa === "own") expect(pod.spec).toMatchObject({ serviceAccountName: "own" });
          if (automount === true)
            expect(podTemplateOf(pod)!.spec.automountServiceAccountToken).toBe(true);
        },
      ),
    );
  });

  it("survives malformed specs", async () => {
    const weird = seedPod({
      volumes: "x",
      serviceAccountName: 5,
      containers: [null, { volumeMounts: 3 }],
    });
    const r = await review(policies, weird, {
      settings: settings(),
      cluster: new SnapshotCluster([]),
    });
    expect(r.violations.filter(v => v.rule === "internal-error")).toEqual([]);
  });
});

/** A live-like view whose ensure answers as told and remembers being asked. */
class FakeLive extends SnapshotCluster {
  readonly ensured: string[] = [];
  constructor(
    private readonly answer: EnsureResult,
    objects: KubeObject[] = [],
  ) {
    super(objects);
  }
  override async ensureServiceAccount(ns: string, name: string, dryRun = false) {
    this.ensured.push(`${ns}/${name}${dryRun ? " (dry run)" : ""}`);
    return this.answer;
  }
}

describe("service-account: ensuring the ServiceAccount", () => {
  it("the mutation ensures it before moving the pod; validation finds it and says nothing more", async () => {
    const cluster = new FakeLive({ state: "exists" });
    const r = await review(policies, seedPod(), { settings: settings(), cluster });
    expect(cluster.ensured[0]).toBe("llama-index/workload");
    expect(r.allowed).toBe(true);
    expect(r.warnings.join("\n")).not.toMatch(/will be created/);
  });

  it("a workload's own template (workloads.mutate) keeps its account: its pods are moved when created", async () => {
    const deployment: KubeObject = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "trainer", namespace: NS },
      spec: { template: { metadata: {}, spec: podTemplateOf(seedPod())!.spec } },
    };
    const cluster = new FakeLive({ state: "exists" });
    const s = { ...settings(), workloads: { ...settings().workloads, mutate: true } };
    const fixed = await mutate(
      { object: deployment, operation: "CREATE", dryRun: false },
      { settings: s, cluster, policies },
      policies,
    );
    expect(fixed.changes.filter(c => c.rule === "dedicated-service-account")).toEqual([]);
    expect(podTemplateOf(deployment)!.spec.serviceAccountName).toBe("default");
    // Its pods will be: said as what they will get.
    const r = await review(policies, deployment, { settings: s, cluster });
    expect(r.warnings.join("\n")).toMatch(
      /its pods will get spec\.template\.spec\.serviceAccountName="workload"/,
    );
  });

  it("a dry-run request asks as dry run", async () => {
    const cluster = new FakeLive({ state: "would-create" });
    await review(policies, seedPod(), { settings: settings(), cluster, dryRun: true });
    expect(cluster.ensured).toContain("llama-index/workload (dry run)");
  });

  it("says created in the change when the mutation created it", async () => {
    const r = await review(policies, seedPod(), {
      settings: settings(),
      cluster: new FakeLive({ state: "created" }),
    });
    expect(r.changes[0].message).toMatch(/created ServiceAccount llama-index\/workload/);
  });

  it("when it cannot be created, the pod stays on default and is denied with the reason", async () => {
    const r = await review(policies, seedPod(), {
      settings: settings(),
      cluster: new FakeLive({ state: "failed", reason: "serviceaccounts is forbidden" }),
    });
    expect(podTemplateOf(r.object)!.spec.serviceAccountName).toBe("default");
    expect(podTemplateOf(r.object)!.spec.volumes).toContainEqual(TOKEN_VOLUME);
    expect(r.allowed).toBe(false);
    const v = r.violations.find(x => x.rule === "dedicated-service-account")!;
    expect(v.message).toBe(
      'Pod llama-index/llamaindex-trainer-xxxx runs as ServiceAccount "default", and the dedicated ServiceAccount llama-index/workload could not be created (serviceaccounts is forbidden)',
    );
    expect(v.fix).toMatch(/^kubectl create serviceaccount workload -n llama-index/);
  });

  it("with ensure off, a pod is not moved to a missing ServiceAccount (the API server would refuse it), and is told how to create it", async () => {
    const cluster = new FakeLive({ state: "exists" }, [saObject("other")]);
    const r = await review(policies, seedPod(), { settings: settings({ ensure: false }), cluster });
    expect(cluster.ensured).toEqual([]);
    expect(podTemplateOf(r.object)!.spec.serviceAccountName).toBe("default");
    expect(r.allowed).toBe(true);
    expect(r.warnings).toContain(
      'admission-guard/service-account: Pod llama-index/llamaindex-trainer-xxxx stays on ServiceAccount "default": ServiceAccount llama-index/workload does not exist and serviceAccount.ensure is off. Fix: kubectl create serviceaccount workload -n llama-index',
    );
  });

  it("with ensure off, a pod is moved to a ServiceAccount that exists", async () => {
    const cluster = new FakeLive({ state: "failed", reason: "never asked" }, [
      saObject("workload"),
    ]);
    const r = await review(policies, seedPod(), { settings: settings({ ensure: false }), cluster });
    expect(cluster.ensured).toEqual([]);
    expect(podTemplateOf(r.object)!.spec.serviceAccountName).toBe("workload");
    expect(r.allowed).toBe(true);
  });

  it("a dry run leaves the pod on its account when the dedicated one would have to be created, and says so", async () => {
    const cluster = new FakeLive({ state: "would-create" });
    const r = await review(policies, seedPod(), { settings: settings(), cluster, dryRun: true });
    const spec = podTemplateOf(r.object)!.spec;
    expect(spec.serviceAccountName).toBe("default");
    // Nothing of the move happens: the injected token stays too.
    expect(spec.volumes).toContainEqual(TOKEN_VOLUME);
    expect(spec.automountServiceAccountToken).toBeUndefined();
    expect(r.allowed).toBe(true);
    expect(r.warnings).toContain(
      'admission-guard/service-account: dry run: Pod llama-index/llamaindex-trainer-xxxx would be moved off ServiceAccount "default" to ServiceAccount llama-index/workload, which does not exist yet and would be created by the real request',
    );
  });

  it("a dry run moves the pod when the dedicated ServiceAccount exists", async () => {
    const cluster = new FakeLive({ state: "exists" });
    const r = await review(policies, seedPod(), { settings: settings(), cluster, dryRun: true });
    expect(podTemplateOf(r.object)!.spec.serviceAccountName).toBe("workload");
    expect(r.warnings.join("\n")).not.toMatch(/dry run/);
  });

  it("a workload creates nothing; its check says the ServiceAccount is missing", async () => {
    const deployment: KubeObject = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "trainer", namespace: NS },
      spec: { template: { metadata: {}, spec: podTemplateOf(seedPod())!.spec } },
    };
    const cluster = new FakeLive({ state: "created" }, [saObject("other")]);
    const r = await review(policies, deployment, { settings: settings(), cluster });
    expect(cluster.ensured).toEqual([]);
    expect(r.warnings.join("\n")).toMatch(
      /ServiceAccount llama-index\/workload does not exist yet; it will be created with the first pod of Deployment/,
    );
    expect(r.warnings.join("\n")).toMatch(
      /its pods will get spec\.template\.spec\.serviceAccountName="workload"/,
    );
  });
});

describe("service-account: secret access", () => {
  it("collects every kind of secret reference, in every container", () => {
    const pod = seedPod({
      containers: [
        {
          name: "a",
          env: [
            { name: "X", valueFrom: { secretKeyRef: { name: "s-env", key: "k", optional: true } } },
            { name: "Y", valueFrom: { configMapKeyRef: { name: "cm", key: "k" } } },
            { name: "Z", value: "v" },
          ],
          envFrom: [{ secretRef: { name: "s-envfrom" } }, { configMapRef: { name: "cm" } }],
        },
      ],
      initContainers: [{ name: "i", envFrom: [{ secretRef: { name: "s-env" } }] }],
      volumes: [
        { name: "v1", secret: { secretName: "s-vol" } },
        {
          name: "v2",
          projected: { sources: [{ secret: { name: "s-proj" } }, { configMap: { name: "c" } }] },
        },
        TOKEN_VOLUME,
      ],
    });
    const refs = secretReferences(podTemplateOf(pod)!);
    expect([...refs.keys()].sort()).toEqual(["s-env", "s-envfrom", "s-proj", "s-vol"]);
    expect(refs.get("s-env")).toEqual(['envFrom of init container "i"', 'env of container "a"']);
  });

  it("warns (default) with the ServiceAccount, the secret and the exact grant commands", async () => {
    const r = await review(policies, seedPod(), {
      settings: settings(),
      cluster: new SnapshotCluster([
        namespace(),
        saObject("workload"),
        ...secretReader("someone-else"),
      ]),
    });
    expect(r.allowed).toBe(true);
    const v = r.violations.find(x => x.rule === "secret-access")!;
    expect(v.severity).toBe("warn");
    expect(v.message).toBe(
      'ServiceAccount llama-index/workload of Pod llama-index/llamaindex-trainer-xxxx may not get secret "llama-index-config" (envFrom of container "trainer")',
    );
    expect(v.fix).toBe(
      "kubectl create role workload-secret-reader --verb=get --resource=secrets --resource-name=llama-index-config -n llama-index && kubectl create rolebinding workload-secret-reader --role=workload-secret-reader --serviceaccount=llama-index:workload -n llama-index",
    );
    expect(r.warnings.join("\n")).toMatch(
      /^admission-guard\/service-account: ServiceAccount .* Fix: kubectl create role/m,
    );
  });

  it("denies with secretAccess=enforce; nothing with off", async () => {
    const cluster = new SnapshotCluster([namespace(), saObject("workload"), ...secretReader("x")]);
    const enforce = await review(policies, seedPod(), {
      settings: settings({ secretAccess: "enforce" }),
      cluster,
    });
    expect(enforce.allowed).toBe(false);
    const off = await review(policies, seedPod(), {
      settings: settings({ secretAccess: "off" }),
      cluster,
    });
    expect(off.violations).toEqual([]);
  });

  it("no finding when a binding grants it, even one limited to the secret's name", async () => {
    const r = await review(policies, seedPod(), {
      settings: settings({ secretAccess: "enforce" }),
      cluster: new SnapshotCluster([
        saObject("workload"),
        ...secretReader("workload", ["llama-index-config"]),
      ]),
    });
    expect(r.allowed).toBe(true);
    expect(r.violations).toEqual([]);
    expect(r.warnings.join("\n")).not.toMatch(/secret/);
  });

  it("asks once per pod with the ServiceAccount the pod will run as", async () => {
    const asked: string[][] = [];
    const cluster = new SnapshotCluster([], (_objects, ns, sa, secrets) => {
      asked.push([ns, sa, ...secrets]);
      return { allowed: new Map(secrets.map(s => [s, true])) };
    });
    await review(
      policies,
      seedPod({ volumes: [{ name: "s", secret: { secretName: "llama-index-config" } }] }),
      {
        settings: settings(),
        cluster,
      },
    );
    expect(asked).toEqual([["llama-index", "workload", "llama-index-config"]]);
  });

  it("unknown access is a warning that it was not checked, never a denial", async () => {
    const r = await review(policies, seedPod(), {
      settings: settings({ secretAccess: "enforce" }),
      cluster: new SnapshotCluster([saObject("workload")]),
    });
    expect(r.allowed).toBe(true);
    expect(r.warnings.join("\n")).toMatch(
      /not checked whether ServiceAccount llama-index\/workload may get secret\(s\) "llama-index-config" \(the cluster snapshot holds no Roles or bindings\)/,
    );
  });

  it("lists several secrets in one finding and one grant", () => {
    expect(grantCommands("ns", "sa", ["a", "b"])).toBe(
      "kubectl create role sa-secret-reader --verb=get --resource=secrets --resource-name=a --resource-name=b -n ns && kubectl create rolebinding sa-secret-reader --role=sa-secret-reader --serviceaccount=ns:sa -n ns",
    );
  });
});

describe("service-account: helpers", () => {
  it("dedicatedServiceAccount: annotation, else the setting", () => {
    const allowing = { name: "w", allowedNames: ["trainer"] };
    expect(dedicatedServiceAccount(undefined, allowing)).toEqual({ name: "w" });
    expect(
      dedicatedServiceAccount({ "admission-guard.dev/service-account": " trainer " }, allowing),
    ).toEqual({
      name: "trainer",
    });
  });

  it("serviceAccountForNewNamespace: none for system namespaces, mode off, or ensure off", () => {
    const ns = (name: string, labels: Record<string, string> = {}) => ({
      name,
      labels,
      annotations: {},
    });
    expect(serviceAccountForNewNamespace(ns("ml"), settings())).toBe("workload");
    expect(serviceAccountForNewNamespace(ns("kube-system"), settings())).toBeUndefined();
    expect(
      serviceAccountForNewNamespace(ns("ml", { "admission-guard.dev/mode": "off" }), settings()),
    ).toBeUndefined();
    expect(serviceAccountForNewNamespace(ns("ml"), settings({ ensure: false }))).toBeUndefined();
  });
});

describe("service-account: the example cluster snapshot (examples/cluster/rbac.yaml)", () => {
  const load = (): KubeObject[] =>
    parseYaml(readFileSync(`${__dirname}/../../../examples/cluster/rbac.yaml`, "utf8")).items;

  it("warns that seed 000's pod may not get llama-index-config, and the printed grant fixes it", async () => {
    const pod = seedPod();
    const objects = load();
    const r = await review(policies, pod, {
      settings: settings(),
      cluster: new SnapshotCluster(objects),
    });
    const v = r.violations.find(x => x.rule === "secret-access")!;
    expect(v.message).toMatch(
      /ServiceAccount llama-index\/workload .* may not get secret "llama-index-config"/,
    );
    expect(r.warnings.join("\n")).not.toMatch(/will be created/);

    // Apply what the fix says (the two kubectl commands, as objects) and check again.
    const granted = [
      ...objects,
      {
        kind: "Role",
        metadata: { namespace: NS, name: "workload-secret-reader" },
        rules: [
          {
            apiGroups: [""],
            resources: ["secrets"],
            resourceNames: ["llama-index-config"],
            verbs: ["get"],
          },
        ],
      },
      {
        kind: "RoleBinding",
        metadata: { namespace: NS, name: "workload-secret-reader" },
        roleRef: {
          apiGroup: "rbac.authorization.k8s.io",
          kind: "Role",
          name: "workload-secret-reader",
        },
        subjects: [{ kind: "ServiceAccount", name: "workload", namespace: NS }],
      },
    ];
    expect(v.fix).toMatch(/--resource-name=llama-index-config -n llama-index/);
    const after = await review(policies, pod, {
      settings: settings(),
      cluster: new SnapshotCluster(granted),
    });
    expect(after.violations).toEqual([]);
  });
});

describe("service-account: which ServiceAccount a pod runs as, and which one it is moved to", () => {
  it("the deprecated serviceAccount alias alone is an explicit choice; an empty serviceAccountName is default", async () => {
    const alias = seedPod({ serviceAccountName: undefined, serviceAccount: "trainer" });
    const kept = await review(policies, alias, {
      settings: settings(),
      cluster: new SnapshotCluster([]),
    });
    expect(kept.changes).toEqual([]);
    expect(podTemplateOf(kept.object)!.spec.serviceAccount).toBe("trainer");

    const empty = seedPod({ serviceAccountName: "", serviceAccount: undefined });
    const moved = await review(policies, empty, {
      settings: settings(),
      cluster: new SnapshotCluster([]),
    });
    expect(podTemplateOf(moved.object)!.spec.serviceAccountName).toBe("workload");
  });

  it("the namespace annotation counts only as a DNS subdomain of at most 253 characters", () => {
    const annotated = (name: string) =>
      dedicatedServiceAccount(
        { "admission-guard.dev/service-account": name },
        { name: "workload", allowedNames: ["a*", "team.*"] },
      );
    expect(annotated("a")).toEqual({ name: "a" });
    expect(annotated("team.trainer-1")).toEqual({ name: "team.trainer-1" });
    const longest = "a".repeat(253);
    expect(annotated(longest)).toEqual({ name: longest });
    for (const invalid of ["a".repeat(254), "-trainer", "trainer-", "Trainer"])
      expect(annotated(invalid)).toEqual({
        name: "workload",
        invalidAnnotation: invalid.length > 200 ? expect.stringMatching(/…$/) : invalid,
        refused: "invalid",
      });
  });

  it("a dedicated name of default moves nothing and keeps the token", async () => {
    const cluster = new FakeLive({ state: "created" });
    const r = await review(policies, seedPod(), {
      settings: settings({ name: "default", secretAccess: "off" }),
      cluster,
    });
    expect(r.changes).toEqual([]);
    expect(podTemplateOf(r.object)!.spec.serviceAccountName).toBe("default");
    expect(podTemplateOf(r.object)!.spec.volumes).toContainEqual(TOKEN_VOLUME);
    // Nor is "default" ensured, or denied for missing from a snapshot that lists others.
    expect(cluster.ensured).toEqual([]);
    const listed = await review(policies, seedPod(), {
      settings: settings({ name: "default", ensure: false, secretAccess: "off" }),
      cluster: new SnapshotCluster([saObject("other")]),
    });
    expect(listed.violations.filter(v => v.capability === "service-account")).toEqual([]);
  });
});

describe("service-account: the injected token is dropped, and only it", () => {
  const tokenSource = { serviceAccountToken: { path: "token", audience: "vault" } };

  it("says what it removed: automount, the volume, and its mounts counted over every container", async () => {
    // A sidecar with no volumeMounts at all, next to the two containers that mount the token.
    const pod = seedPod();
    (pod.spec as { containers: unknown[] }).containers.push({ name: "sidecar", image: "busybox" });
    const r = await review(policies, pod, {
      settings: settings(),
      cluster: new FakeLive({ state: "exists" }),
    });
    expect(r.changes.map(c => c.message)).toEqual([
      'spec.serviceAccountName="workload" (was default)',
      "spec.automountServiceAccountToken=false (the pod did not ask for an API token)",
      `removed the injected token volume ${TOKEN_VOLUME.name} from spec.volumes and its 2 mount(s)`,
    ]);
    const spec = podTemplateOf(r.object)!.spec;
    expect(spec.containers[1].volumeMounts).toBeUndefined();
    expect(spec.initContainers![0].volumeMounts).toEqual([]);
  });

  it("a pod that already set automountServiceAccountToken=false only loses the volume; one without the volume only gets automount=false", async () => {
    const off = await review(policies, seedPod({ automountServiceAccountToken: false }), {
      settings: settings(),
      cluster: new FakeLive({ state: "exists" }),
    });
    expect(off.changes.map(c => c.rule)).toEqual(["dedicated-service-account", "no-token"]);
    expect(off.changes[1].message).toMatch(/^removed the injected token volume /);
    expect(podTemplateOf(off.object)!.spec.automountServiceAccountToken).toBe(false);

    const noVolume = await review(
      policies,
      seedPod({ volumes: [{ name: "data", emptyDir: {} }] }),
      {
        settings: settings(),
        cluster: new FakeLive({ state: "exists" }),
      },
    );
    expect(noVolume.changes.map(c => c.message)).toEqual([
      'spec.serviceAccountName="workload" (was default)',
      "spec.automountServiceAccountToken=false (the pod did not ask for an API token)",
    ]);
    expect(podTemplateOf(noVolume.object)!.spec.volumes).toEqual([{ name: "data", emptyDir: {} }]);
  });

  it("leaves the user's own volumes: another name, a longer kube-api-access name, one without a token", async () => {
    const own = [
      { name: "tokens", projected: { sources: [tokenSource] } },
      { name: `my-${TOKEN_VOLUME.name}`, projected: { sources: [tokenSource] } },
      { name: `${TOKEN_VOLUME.name}x`, projected: { sources: [tokenSource] } },
      {
        name: "kube-api-access-abcde",
        projected: { sources: [{ configMap: { name: "kube-root-ca.crt" } }, "x"] },
      },
    ];
    const r = await review(policies, seedPod({ volumes: [null, ...own, TOKEN_VOLUME] }), {
      settings: settings(),
      cluster: new FakeLive({ state: "exists" }),
    });
    expect(r.violations).toEqual([]);
    expect(podTemplateOf(r.object)!.spec.volumes).toEqual([null, ...own]);
    expect(r.changes[2].message).toBe(
      `removed the injected token volume ${TOKEN_VOLUME.name} from spec.volumes and its 2 mount(s)`,
    );
  });
});

describe("service-account: the mutation's outcome follows the ensure result", () => {
  it("changes nothing when the account could not be created: the one violation is the rule's, not a failed fix", async () => {
    const r = await review(policies, seedPod(), {
      settings: settings({ secretAccess: "off" }),
      cluster: new FakeLive({ state: "failed", reason: "forbidden" }),
    });
    expect(r.changes).toEqual([]);
    expect(r.violations.map(v => v.rule)).toEqual(["dedicated-service-account"]);
  });

  it("a workload's own template (workloads.mutate) gets no change at all from this capability", async () => {
    const deployment: KubeObject = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "trainer", namespace: NS },
      spec: { template: { metadata: {}, spec: podTemplateOf(seedPod())!.spec } },
    };
    const s = { ...settings(), workloads: { ...settings().workloads, mutate: true } };
    const cluster = new FakeLive({ state: "exists" });
    const fixed = await mutate(
      { object: deployment, operation: "CREATE", dryRun: false },
      { settings: s, cluster, policies },
      policies,
    );
    expect(fixed.changes).toEqual([]);
    expect(fixed.errors).toEqual([]);
    expect(cluster.ensured).toEqual([]);
  });
});

describe("service-account: a pod that names the dedicated ServiceAccount itself", () => {
  const onDedicated = () => seedPod({ serviceAccountName: "workload", serviceAccount: "workload" });
  const ruleViolations = (r: { violations: { rule: string }[] }) =>
    r.violations.filter(v => v.rule === "dedicated-service-account");

  it("ensure on: nothing when it exists, a warning on a dry run that would create it, a denial when creating failed", async () => {
    const exists = await review(policies, onDedicated(), {
      settings: settings({ secretAccess: "off" }),
      cluster: new FakeLive({ state: "exists" }),
    });
    expect(exists.violations).toEqual([]);
    expect(exists.warnings).toEqual([]);

    const dry = new FakeLive({ state: "would-create" });
    const wouldCreate = await review(policies, onDedicated(), {
      settings: settings({ secretAccess: "off" }),
      cluster: dry,
      dryRun: true,
    });
    expect(dry.ensured).toEqual(["llama-index/workload (dry run)"]);
    expect(wouldCreate.allowed).toBe(true);
    expect(wouldCreate.warnings).toEqual([
      "admission-guard/service-account: ServiceAccount llama-index/workload will be created for Pod llama-index/llamaindex-trainer-xxxx",
    ]);

    const failed = await review(policies, onDedicated(), {
      settings: settings({ secretAccess: "off" }),
      cluster: new FakeLive({ state: "failed", reason: "serviceaccounts is forbidden" }),
    });
    expect(failed.allowed).toBe(false);
    expect(ruleViolations(failed)).toEqual([
      expect.objectContaining({
        message:
          "ServiceAccount llama-index/workload of Pod llama-index/llamaindex-trainer-xxxx does not exist and could not be created (serviceaccounts is forbidden)",
        fix: "kubectl create serviceaccount workload -n llama-index (or give the module's ServiceAccount create/patch on serviceaccounts)",
      }),
    ]);
  });

  it("ensure off: denied when the cluster knows it is missing, not when it cannot know", async () => {
    const missing = await review(policies, onDedicated(), {
      settings: settings({ ensure: false, secretAccess: "off" }),
      cluster: new SnapshotCluster([saObject("other")]),
    });
    expect(missing.allowed).toBe(false);
    expect(ruleViolations(missing)).toEqual([
      expect.objectContaining({
        message:
          "ServiceAccount llama-index/workload of Pod llama-index/llamaindex-trainer-xxxx does not exist (serviceAccount.ensure is off)",
        fix: "kubectl create serviceaccount workload -n llama-index",
      }),
    ]);
    const unknown = await review(policies, onDedicated(), {
      settings: settings({ ensure: false, secretAccess: "off" }),
      cluster: new SnapshotCluster([]),
    });
    expect(unknown.violations).toEqual([]);
  });
});

describe("service-account: a pod that chose its own ServiceAccount is neither ensured nor checked", () => {
  it("asks nothing about its account or the dedicated one, with ensure on or off", async () => {
    const chosen = () => seedPod({ serviceAccountName: "trainer", serviceAccount: "trainer" });
    const cluster = new FakeLive({ state: "failed", reason: "never asked" }, [saObject("other")]);
    for (const s of [
      settings({ secretAccess: "off" }),
      settings({ ensure: false, secretAccess: "off" }),
    ]) {
      const r = await review(policies, chosen(), { settings: s, cluster });
      expect(r.allowed).toBe(true);
      expect(r.violations).toEqual([]);
      expect(r.warnings).toEqual([]);
    }
    expect(cluster.ensured).toEqual([]);
  });
});

describe("service-account: validation of a pod the mutation did not move", () => {
  const validate = (cluster: FakeLive, extra: { dryRun?: boolean } = {}) =>
    answer(
      { object: seedPod(), operation: "CREATE", dryRun: extra.dryRun ?? false },
      { settings: settings({ secretAccess: "off" }), cluster, policies },
      policies,
    );

  it("the account exists now (the mutating webhook did not run): a warning to create the pod again, also on a dry run", async () => {
    for (const dryRun of [false, true]) {
      const a = await validate(new FakeLive({ state: "exists" }), { dryRun });
      expect(a.allowed).toBe(true);
      expect(a.warnings).toEqual([
        'admission-guard/service-account: Pod llama-index/llamaindex-trainer-xxxx stays on ServiceAccount "default": ServiceAccount llama-index/workload was not available when the pod was mutated; create the pod again to use it',
      ]);
    }
  });

  it("an UPDATE of a pod on default ensures nothing and says nothing", async () => {
    const cluster = new FakeLive({ state: "failed", reason: "never asked" });
    const old = seedPod();
    const pod = seedPod();
    (pod.spec as { containers: { image: string }[] }).containers[0].image = "busybox:2";
    const r = await review(policies, pod, {
      settings: settings({ secretAccess: "off" }),
      cluster,
      operation: "UPDATE",
      oldObject: old,
    });
    expect(cluster.ensured).toEqual([]);
    expect(r.violations).toEqual([]);
    expect(r.warnings).toEqual([]);
  });
});

describe("service-account: a workload's template is checked without creating anything", () => {
  const deployment = (spec: Record<string, unknown> = {}): KubeObject => ({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "trainer", namespace: NS },
    spec: { template: { metadata: {}, spec: podTemplateOf(seedPod(spec))!.spec } },
  });
  const missingWarnings = (r: { warnings: string[] }) =>
    r.warnings.filter(w => /does not exist yet/.test(w));

  it("warns only when its pods' account is known to be missing", async () => {
    for (const objects of [[saObject("workload")], []]) {
      const r = await review(policies, deployment(), {
        settings: settings({ secretAccess: "off" }),
        cluster: new SnapshotCluster(objects),
      });
      expect(missingWarnings(r)).toEqual([]);
    }
    const chosen = await review(
      policies,
      deployment({ serviceAccountName: "trainer", serviceAccount: "trainer" }),
      {
        settings: settings({ secretAccess: "off" }),
        cluster: new SnapshotCluster([saObject("other")]),
      },
    );
    expect(chosen.warnings).toEqual([]);
  });

  it("with ensure off, tells to create the account before applying", async () => {
    const r = await review(policies, deployment(), {
      settings: settings({ ensure: false, secretAccess: "off" }),
      cluster: new SnapshotCluster([saObject("other")]),
    });
    expect(missingWarnings(r)).toEqual([
      "admission-guard/service-account: ServiceAccount llama-index/workload does not exist yet; serviceAccount.ensure is off, so create it before applying Deployment llama-index/trainer",
    ]);
  });
});

describe("service-account: the capability switched off, or no pod to judge", () => {
  it("switched off: the pod is left alone and both rules are listed as skipped", async () => {
    const cluster = new FakeLive({ state: "failed", reason: "never asked" });
    // Another capability acts, so the pod is judged and the switched-off one is reported.
    const r = await review([serviceAccountPolicy, labelsPolicy], seedPod(), {
      settings: settings({ enabled: false }),
      cluster,
    });
    expect(r.changes.filter(c => c.capability === "service-account")).toEqual([]);
    expect(podTemplateOf(r.object)!.spec.serviceAccountName).toBe("default");
    expect(cluster.ensured).toEqual([]);
    expect(r.skipped).toEqual(
      ["dedicated-service-account", "secret-access"].map(rule => ({
        capability: "service-account",
        rule,
        reason: "service-account is switched off (settings serviceAccount.enabled: false)",
      })),
    );
  });

  it("its check says nothing switched off, outside a namespace, or without a pod target", async () => {
    const pod = seedPod({ serviceAccountName: "workload", serviceAccount: "workload" });
    const cluster = new FakeLive({ state: "failed", reason: "never asked" });
    const target = { object: pod, template: podTemplateOf(pod)!, isTemplate: false };
    const clusterScoped = { ...pod, metadata: { name: "p" } };
    const noNamespace = contextFor(clusterScoped, { settings: settings(), cluster });
    const empty = { changes: [], violations: [], warnings: [] };
    // Switched off, the engine runs neither its fix nor its check: the pod is left as written.
    const off = await review([serviceAccountPolicy], pod, {
      settings: settings({ enabled: false }),
      cluster,
    });
    expect([off.changes, off.violations, off.warnings, off.judgedBy]).toEqual([[], [], [], []]);
    expect(await serviceAccountPolicy.check!(clusterScoped, target, noNamespace)).toEqual(empty);
    expect(
      await serviceAccountPolicy.check!(
        pod,
        undefined,
        contextFor(pod, { settings: settings(), cluster }),
      ),
    ).toEqual(empty);
    expect(cluster.ensured).toEqual([]);
  });

  it("serviceAccountForNewNamespace: none with the capability or its mutation off, or a dedicated name of default", () => {
    const ns = (annotations: Record<string, string> = {}) => ({
      name: "ml",
      labels: {},
      annotations,
    });
    expect(serviceAccountForNewNamespace(ns(), settings({ enabled: false }))).toBeUndefined();
    expect(serviceAccountForNewNamespace(ns(), settings({ mutate: false }))).toBeUndefined();
    expect(serviceAccountForNewNamespace(ns(), settings({ name: "default" }))).toBeUndefined();
    expect(
      serviceAccountForNewNamespace(
        ns({ "admission-guard.dev/service-account": "default" }),
        settings({ allowedNames: ["default"] }),
      ),
    ).toBeUndefined();
    expect(
      serviceAccountForNewNamespace(
        ns({ "admission-guard.dev/service-account": "t" }),
        settings({ allowedNames: ["t"] }),
      ),
    ).toBe("t");
  });
});

describe("service-account: secret references and the access finding", () => {
  it("says where each secret is used, once per place; skips what names no secret", () => {
    const pod = seedPod({
      containers: [
        {
          name: "a",
          env: [
            { name: "X", valueFrom: { secretKeyRef: { name: "s", key: "k1" } } },
            { name: "Y", valueFrom: { secretKeyRef: { name: "s", key: "k2" } } },
            { name: "Z", valueFrom: { secretKeyRef: { name: 5, key: "k" } } },
          ],
          envFrom: [{ secretRef: { name: "" } }],
        },
      ],
      initContainers: [],
      volumes: [
        null,
        { name: "v1", secret: { secretName: "s" } },
        { secret: { secretName: "unnamed" } },
        { name: "v2", projected: { sources: [{ secret: { name: "p" } }] } },
      ],
    });
    const refs = secretReferences(podTemplateOf(pod)!);
    expect(Object.fromEntries(refs)).toEqual({
      s: ['env of container "a"', 'volume "v1"'],
      unnamed: ['volume "?"'],
      p: ['projected volume "v2"'],
    });
    const noVolumes = seedPod({ volumes: undefined });
    expect(Object.fromEntries(secretReferences(podTemplateOf(noVolumes)!))).toEqual({
      "llama-index-config": ['envFrom of container "trainer"'],
    });
  });

  it("a pod that references no secret asks the cluster nothing", async () => {
    const asked: string[][] = [];
    const cluster = new SnapshotCluster([], (_objects, ns, sa, secrets) => {
      asked.push([ns, sa, ...secrets]);
      return undefined;
    });
    const pod = seedPod({ containers: [{ name: "trainer", image: "busybox" }] });
    const r = await review(policies, pod, { settings: settings(), cluster });
    expect(asked).toEqual([]);
    expect(r.warnings.join("\n")).not.toMatch(/secret/);
  });

  it("denies (severity deny) with every denied secret and where it is used, in one finding and one grant", async () => {
    const pod = seedPod({
      serviceAccountName: "workload",
      serviceAccount: "workload",
      containers: [
        {
          name: "trainer",
          envFrom: [{ secretRef: { name: "a" } }],
          env: [{ name: "K", valueFrom: { secretKeyRef: { name: "b", key: "k" } } }],
        },
      ],
      initContainers: [],
      volumes: [{ name: "creds", secret: { secretName: "a" } }],
    });
    const r = await review(policies, pod, {
      settings: settings({ secretAccess: "enforce" }),
      cluster: new SnapshotCluster([saObject("workload"), ...secretReader("workload", ["c"])]),
    });
    expect(r.allowed).toBe(false);
    const v = r.violations.find(x => x.rule === "secret-access")!;
    expect(v.severity).toBe("deny");
    expect(v.message).toBe(
      'ServiceAccount llama-index/workload of Pod llama-index/llamaindex-trainer-xxxx may not get secrets "b" (env of container "trainer"), "a" (envFrom of container "trainer"; volume "creds")',
    );
    expect(v.fix).toBe(grantCommands(NS, "workload", ["b", "a"]));
  });

  it("names the pods of a workload, and lists every secret it could not check", async () => {
    const deployment: KubeObject = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "trainer", namespace: NS },
      spec: {
        template: {
          metadata: {},
          spec: podTemplateOf(
            seedPod({ volumes: [{ name: "v", secret: { secretName: "other" } }] }),
          )!.spec,
        },
      },
    };
    const denied = await review(policies, deployment, {
      settings: settings(),
      cluster: new SnapshotCluster([saObject("workload"), ...secretReader("x")]),
    });
    expect(denied.violations.find(x => x.rule === "secret-access")!.message).toMatch(
      /^ServiceAccount llama-index\/workload of the pods of Deployment llama-index\/trainer may not get secrets /,
    );
    const unknown = await review(policies, deployment, {
      settings: settings(),
      cluster: new SnapshotCluster([saObject("workload")]),
    });
    expect(unknown.warnings.join("\n")).toMatch(
      /may get secret\(s\) "llama-index-config", "other" \(the cluster snapshot/,
    );
  });

  it("the grant's Role name stays within 253 characters for the longest ServiceAccount name", () => {
    const sa = "s".repeat(253);
    const role = `${"s".repeat(230)}-secret-reader`;
    expect(grantCommands("ns", sa, ["a"])).toBe(
      `kubectl create role ${role} --verb=get --resource=secrets --resource-name=a -n ns && kubectl create rolebinding ${role} --role=${role} --serviceaccount=ns:${sa} -n ns`,
    );
  });
});

describe("service-account: issue 40, the namespace annotation cannot choose an account an admin did not allow", () => {
  const annotated = (value: string) => ({ "admission-guard.dev/service-account": value });
  const reviewIn = async (value: string, serviceAccount: SettingsInput["serviceAccount"] = {}) => {
    const cluster = new FakeLive({ state: "created" }, [namespace(annotated(value))]);
    const r = await review(policies, seedPod(), {
      settings: settings({ secretAccess: "off", ...serviceAccount }),
      cluster,
    });
    // The mutating and the validating step each make sure of the account: once each.
    const ensured = [...new Set(cluster.ensured)];
    return { r, cluster: { ensured }, moved: podTemplateOf(r.object)!.spec.serviceAccountName };
  };

  it("another controller's account, default, or a name not listed: pods go to the setting's account, only it is created, a warning says why", async () => {
    for (const value of ["argocd-application-controller", "default", "kube-proxy", "workload2"]) {
      const { r, cluster, moved } = await reviewIn(value);
      expect([value, moved]).toEqual([value, "workload"]);
      expect(cluster.ensured).toEqual([`${NS}/workload`]);
      expect(r.warnings).toContainEqual(
        `admission-guard/service-account: namespace ${NS} has admission-guard.dev/service-account="${value}", a ServiceAccount an admin did not allow (serviceAccount.allowedNames); using "workload". Fix: an admin adds the name to serviceAccount.allowedNames, or removes the annotation: kubectl annotate namespace ${NS} admission-guard.dev/service-account-`,
      );
      expect(
        serviceAccountForNewNamespace(
          { name: NS, labels: {}, annotations: annotated(value) },
          settings(),
        ),
      ).toBe("workload");
    }
  });

  it("names over 253 characters and invalid DNS-1123 names are never created; what the warning echoes is bounded", async () => {
    const huge = "a".repeat(256 * 1024);
    for (const value of ["a".repeat(254), huge, "Trainer", "evil_sa", "../default", "a..b/c"]) {
      const { r, cluster, moved } = await reviewIn(value, { allowedNames: ["a*", "e*", "t*"] });
      expect(moved).toBe("workload");
      expect(cluster.ensured).toEqual([`${NS}/workload`]);
      const warning = r.warnings.find(w => w.includes("not a valid ServiceAccount name"))!;
      expect(Buffer.byteLength(warning)).toBeLessThan(700);
    }
  });

  it("an admin's allowedNames: an exact name or a prefix; a pattern never matches default, only an exact entry does (then nothing moves)", async () => {
    const allowed = { allowedNames: ["trainer", "team-*"] };
    expect((await reviewIn("trainer", allowed)).moved).toBe("trainer");
    const team = await reviewIn("team-vision", allowed);
    expect([team.moved, team.cluster.ensured]).toEqual(["team-vision", [`${NS}/team-vision`]]);
    expect((await reviewIn("trainer-2", allowed)).moved).toBe("workload");
    // "d*" would match default: it does not.
    expect((await reviewIn("default", { allowedNames: ["d*"] })).moved).toBe("workload");
    const optOut = await reviewIn("default", { allowedNames: ["default"] });
    expect([optOut.moved, optOut.cluster.ensured, optOut.r.changes]).toEqual(["default", [], []]);
    // The setting's own name is always allowed.
    expect((await reviewIn("workload")).moved).toBe("workload");
  });

  it("allowedNames entries are checked when the settings are read", () => {
    expect(() => settings({ allowedNames: ["Team-*"] })).toThrow(
      /serviceAccount\.allowedNames\[0\]/,
    );
    expect(() => settings({ allowedNames: ["*"] })).toThrow(/allowedNames/);
    expect(settings({ allowedNames: ["team-*", "a.b"] }).serviceAccount.allowedNames).toEqual([
      "team-*",
      "a.b",
    ]);
  });
});

describe("service-account: the secrets other volume sources name (core/v1 Volume)", () => {
  // Each volume source whose kubelet plugin reads a Secret of the pod's namespace for the pod.
  const SOURCES: [string, Record<string, unknown>, string][] = [
    ["azureFile", { secretName: "vault", shareName: "s" }, "azureFile.secretName"],
    ["cephfs", { monitors: ["m"], secretRef: { name: "vault" } }, "cephfs.secretRef.name"],
    ["cinder", { volumeID: "v", secretRef: { name: "vault" } }, "cinder.secretRef.name"],
    [
      "csi",
      { driver: "secrets-store.csi.k8s.io", nodePublishSecretRef: { name: "vault" } },
      "csi.nodePublishSecretRef.name",
    ],
    ["flexVolume", { driver: "x/y", secretRef: { name: "vault" } }, "flexVolume.secretRef.name"],
    [
      "iscsi",
      { targetPortal: "t", iqn: "i", lun: 0, secretRef: { name: "vault" } },
      "iscsi.secretRef.name",
    ],
    ["rbd", { monitors: ["m"], image: "i", secretRef: { name: "vault" } }, "rbd.secretRef.name"],
    [
      "scaleIO",
      { gateway: "g", system: "s", secretRef: { name: "vault" } },
      "scaleIO.secretRef.name",
    ],
    ["storageos", { volumeName: "v", secretRef: { name: "vault" } }, "storageos.secretRef.name"],
  ];
  const withVolume = (source: string, value: Record<string, unknown>) =>
    seedPod({
      containers: [{ name: "trainer", image: "busybox", volumeMounts: [TOKEN_MOUNT] }],
      volumes: [{ name: "store", [source]: value }, TOKEN_VOLUME],
    });

  it.each(SOURCES)(
    "%s: the secret is collected, and a ServiceAccount that may not read it is denied (enforce)",
    async (source, value, field) => {
      const pod = withVolume(source, value);
      expect(Object.fromEntries(secretReferences(podTemplateOf(pod)!))).toEqual({
        vault: [`volume "store" (${field})`],
      });
      const r = await review(policies, pod, {
        settings: settings({ secretAccess: "enforce" }),
        cluster: new SnapshotCluster([
          saObject("workload"),
          ...secretReader("workload", ["other"]),
        ]),
      });
      expect(r.allowed).toBe(false);
      expect(r.violations.find(v => v.rule === "secret-access")!.message).toBe(
        `ServiceAccount llama-index/workload of Pod llama-index/llamaindex-trainer-xxxx may not get secret "vault" (volume "store" (${field}))`,
      );
    },
  );

  it("a claim (persistentVolumeClaim, an ephemeral claim template) names no secret of the pod's", () => {
    const pod = seedPod({
      containers: [{ name: "trainer", image: "busybox" }],
      volumes: [
        { name: "pvc", persistentVolumeClaim: { claimName: "data" } },
        {
          name: "eph",
          ephemeral: {
            volumeClaimTemplate: {
              spec: { accessModes: ["ReadWriteOnce"], storageClassName: "csi-with-secrets" },
            },
          },
        },
      ],
    });
    expect(secretReferences(podTemplateOf(pod)!).size).toBe(0);
  });

  it("the same collector for workload templates and ML roles; bounded by maxSecretReviews", async () => {
    const csiVolumes = (count: number) =>
      Array.from({ length: count }, (_, i) => ({
        name: `v${i}`,
        csi: { driver: "secrets-store.csi.k8s.io", nodePublishSecretRef: { name: `vault-${i}` } },
      }));
    const spec = (count: number) =>
      podTemplateOf(
        seedPod({
          containers: [{ name: "trainer", image: "busybox" }],
          volumes: csiVolumes(count),
        }),
      )!.spec;
    const deployment: KubeObject = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "trainer", namespace: NS },
      spec: { template: { metadata: {}, spec: spec(1) } },
    };
    const job: KubeObject = {
      apiVersion: "kubeflow.org/v1",
      kind: "PyTorchJob",
      metadata: { name: "tune", namespace: NS },
      spec: { pytorchReplicaSpecs: { Master: { replicas: 1, template: { spec: spec(1) } } } },
    };
    for (const obj of [deployment, job]) {
      const r = await review(policies, obj, {
        settings: settings({ secretAccess: "enforce" }),
        cluster: new SnapshotCluster([saObject("workload"), ...secretReader("workload", ["x"])]),
      });
      expect(r.allowed).toBe(false);
      expect(r.violations.find(v => v.rule === "secret-access")!.message).toContain(
        '"vault-0" (volume "v0" (csi.nodePublishSecretRef.name))',
      );
    }
    // 100 CSI secrets: at most maxSecretReviews (4 here) are reviewed, the rest "not checked".
    const asked: string[] = [];
    const cluster = new SnapshotCluster([], (_objects, _ns, _sa, secrets) => {
      asked.push(...secrets);
      return { allowed: new Map(secrets.map(s => [s, true])) };
    });
    const r = await review(
      policies,
      seedPod({ containers: [{ name: "trainer", image: "busybox" }], volumes: csiVolumes(100) }),
      { settings: settings({ maxSecretReviews: 4 }), cluster },
    );
    expect(asked).toHaveLength(4);
    expect(r.warnings.join("\n")).toMatch(/not checked whether ServiceAccount .* 96 of the 100/);
  });
});
