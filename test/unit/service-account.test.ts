import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { defaultPod } from "../support/admission";
import { serviceAccountPolicy } from "../../capabilities/service-account/policy";
import {
  dedicatedServiceAccount,
  moveOffDefault,
  serviceAccountForNewNamespace,
} from "../../capabilities/service-account/rules";
import { grantCommands, secretReferences } from "../../capabilities/service-account/secret-access";
import { SnapshotCluster, type EnsureResult } from "../../lib/cluster";
import { contextFor, mutate, review } from "../../lib/engine";
import { podTemplateOf, type KubeObject } from "../../lib/pod";
import { parseSettings, type SettingsInput } from "../../lib/settings";
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

  it("the namespace annotation names the ServiceAccount; an invalid one falls back with a warning", async () => {
    const named = await review(policies, seedPod(), {
      settings: settings(),
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
    expect(dedicatedServiceAccount(undefined, "workload")).toEqual({ name: "workload" });
    expect(
      dedicatedServiceAccount({ "admission-guard.dev/service-account": " trainer " }, "w"),
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
    parseYaml(readFileSync(`${__dirname}/../../examples/cluster/rbac.yaml`, "utf8")).items;

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
