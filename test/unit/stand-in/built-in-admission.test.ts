// The model of the API server's built-in admission (test/support/built-in-admission.ts), plugin by
// plugin and as a chain around a webhook's patch, on the fields the module's fixes touch.
import type { KubeObject } from "../../../lib/objects/pod";
import {
  admitPodBuiltIns,
  defaultTolerationSecondsAdmit,
  LIMIT_RANGER_ANNOTATION,
  limitRangerAdmit,
  limitRangerValidate,
  objectsCluster,
  OPEN_CLUSTER,
  priorityAdmit,
  serviceAccountAdmit,
  serviceAccountNotFound,
  validatePodBuiltIns,
  type BuiltInContext,
} from "../../support/built-in-admission";

const NS = "ml";
type Spec = Record<string, unknown> & {
  containers: Record<string, unknown>[];
  initContainers?: Record<string, unknown>[];
  volumes?: Record<string, unknown>[];
  tolerations?: Record<string, unknown>[];
};
const pod = (spec: Partial<Spec> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "trainer", namespace: NS },
  spec: { containers: [{ name: "main", image: "busybox:1.36" }], ...spec },
});
const specOf = (p: KubeObject) => p.spec as Spec;
const ctxOf = (objects: KubeObject[] = []): BuiltInContext => ({
  namespace: NS,
  cluster: objectsCluster(objects),
  tokenVolumeName: () => "kube-api-access-abcde",
});
const limitRange = (item: Record<string, unknown>): KubeObject => ({
  apiVersion: "v1",
  kind: "LimitRange",
  metadata: { name: "defaults", namespace: NS },
  spec: { limits: [{ type: "Container", ...item }] },
});
const priorityClass = (name: string, value: number, extra: Record<string, unknown> = {}) => ({
  apiVersion: "scheduling.k8s.io/v1",
  kind: "PriorityClass",
  metadata: { name },
  value,
  ...extra,
});
const account = (name: string, extra: Record<string, unknown> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "ServiceAccount",
  metadata: { name, namespace: NS },
  ...extra,
});

describe("LimitRanger", () => {
  it("defaults what a container leaves unset from the namespace's Container item, and says so in its annotation", () => {
    const p = pod({
      initContainers: [{ name: "copy", resources: { requests: { cpu: "100m" } } }],
    });
    limitRangerAdmit(
      p,
      ctxOf([
        limitRange({ default: { cpu: "1", memory: "1Gi" }, defaultRequest: { cpu: "500m" } }),
      ]),
    );
    expect(specOf(p).initContainers![0].resources).toEqual({
      requests: { cpu: "100m", memory: "1Gi" },
      limits: { cpu: "1", memory: "1Gi" },
    });
    expect(specOf(p).containers[0].resources).toEqual({
      requests: { cpu: "500m", memory: "1Gi" },
      limits: { cpu: "1", memory: "1Gi" },
    });
    expect(p.metadata?.annotations?.[LIMIT_RANGER_ANNOTATION]).toBe(
      "LimitRanger plugin set: cpu, memory request for container main; cpu, memory limit for container main; memory request for init container copy; cpu, memory limit for init container copy",
    );
  });

  it("a max alone becomes the default limit and request (the API server's LimitRange defaulting)", () => {
    const p = pod();
    limitRangerAdmit(p, ctxOf([limitRange({ max: { memory: "2Gi" } })]));
    expect(specOf(p).containers[0].resources).toEqual({
      requests: { memory: "2Gi" },
      limits: { memory: "2Gi" },
    });
  });

  it("no LimitRange: the pod is left as it is", () => {
    const p = pod();
    limitRangerAdmit(p, ctxOf());
    expect(p).toEqual(pod());
  });

  it("refuses requests and limits outside min and max, with the API server's words", () => {
    const ctx = ctxOf([limitRange({ min: { cpu: "100m" }, max: { memory: "1Gi" } })]);
    const ok = pod({
      containers: [
        { name: "main", resources: { requests: { cpu: "200m" }, limits: { memory: "1Gi" } } },
      ],
    });
    expect(limitRangerValidate(ok, ctx)).toBeUndefined();
    const low = pod({
      containers: [
        { name: "main", resources: { requests: { cpu: "50m" }, limits: { memory: "1Gi" } } },
      ],
    });
    expect(limitRangerValidate(low, ctx)).toBe(
      'pods "trainer" is forbidden: minimum cpu usage per Container is 100m, but request is 50m',
    );
    const both = pod({
      containers: [{ name: "main", resources: { requests: { cpu: "50m" } } }],
    });
    expect(limitRangerValidate(both, ctx)).toBe(
      'pods "trainer" is forbidden: [minimum cpu usage per Container is 100m, but request is 50m, maximum memory usage per Container is 1Gi.  No limit is specified]',
    );
  });
});

describe("ServiceAccount", () => {
  it("sets the default account and mounts the token in every container, once", () => {
    const p = pod({ initContainers: [{ name: "init" }] });
    expect(serviceAccountAdmit(p, ctxOf())).toBeUndefined();
    const spec = specOf(p);
    expect([spec.serviceAccountName, spec.serviceAccount]).toEqual(["default", "default"]);
    expect(spec.volumes?.map(v => v.name)).toEqual(["kube-api-access-abcde"]);
    const mount = {
      name: "kube-api-access-abcde",
      readOnly: true,
      mountPath: "/var/run/secrets/kubernetes.io/serviceaccount",
    };
    expect([spec.initContainers![0].volumeMounts, spec.containers[0].volumeMounts]).toEqual([
      [mount],
      [mount],
    ]);
    // Run again (the reinvocation after a webhook's patch): nothing added twice.
    const again = structuredClone(p);
    serviceAccountAdmit(again, { ...ctxOf(), tokenVolumeName: () => "kube-api-access-zzzzz" });
    expect(again).toEqual(p);
  });

  it("a container a webhook adds later gets the token mount on the re-run, unless automount is off", () => {
    const p = pod();
    serviceAccountAdmit(p, ctxOf());
    specOf(p).initContainers = [{ name: "added-by-webhook" }];
    serviceAccountAdmit(p, ctxOf());
    expect(specOf(p).initContainers![0].volumeMounts).toEqual([
      expect.objectContaining({ name: "kube-api-access-abcde" }),
    ]);
    const off = pod({ automountServiceAccountToken: false });
    serviceAccountAdmit(off, ctxOf());
    expect(specOf(off).volumes).toBeUndefined();
    expect(specOf(off).containers[0].volumeMounts).toBeUndefined();
  });

  it("the account's automount setting applies when the pod has none; the pod's wins", () => {
    const objects = [account("quiet", { automountServiceAccountToken: false })];
    const quiet = pod({ serviceAccountName: "quiet" });
    serviceAccountAdmit(quiet, ctxOf(objects));
    expect(specOf(quiet).volumes).toBeUndefined();
    const asked = pod({ serviceAccountName: "quiet", automountServiceAccountToken: true });
    serviceAccountAdmit(asked, ctxOf(objects));
    expect(specOf(asked).volumes?.map(v => v.name)).toEqual(["kube-api-access-abcde"]);
  });

  it("copies the account's imagePullSecrets into a pod that has none", () => {
    const objects = [account("puller", { imagePullSecrets: [{ name: "regcred" }] })];
    const p = pod({ serviceAccountName: "puller" });
    serviceAccountAdmit(p, ctxOf(objects));
    expect(specOf(p).imagePullSecrets).toEqual([{ name: "regcred" }]);
    const own = pod({ serviceAccountName: "puller", imagePullSecrets: [{ name: "mine" }] });
    serviceAccountAdmit(own, ctxOf(objects));
    expect(specOf(own).imagePullSecrets).toEqual([{ name: "mine" }]);
  });

  it("refuses a missing account (in both halves); `default` counts as present, the controller manager makes it", () => {
    const ghost = pod({ serviceAccountName: "ghost" });
    const message = serviceAccountNotFound("trainer", NS, "ghost");
    expect(message).toBe(
      'pods "trainer" is forbidden: error looking up service account ml/ghost: serviceaccount "ghost" not found',
    );
    expect(serviceAccountAdmit(ghost, ctxOf())).toBe(message);
    expect(validatePodBuiltIns(ghost, ctxOf())).toBe(message);
    expect(serviceAccountAdmit(pod(), ctxOf())).toBeUndefined();
    expect(serviceAccountAdmit(ghost, { ...ctxOf(), cluster: OPEN_CLUSTER })).toBeUndefined();
  });
});

describe("Priority", () => {
  it("no class and no globalDefault: priority 0, PreemptLowerPriority, no class name", () => {
    const p = pod();
    expect(priorityAdmit(p, ctxOf())).toBeUndefined();
    expect(specOf(p)).toMatchObject({ priority: 0, preemptionPolicy: "PreemptLowerPriority" });
    expect(specOf(p).priorityClassName).toBeUndefined();
  });

  it("the globalDefault class with the lowest value names the pod's class", () => {
    const p = pod();
    priorityAdmit(
      p,
      ctxOf([
        priorityClass("high", 1000, { globalDefault: true }),
        priorityClass("low", 10, { globalDefault: true, preemptionPolicy: "Never" }),
        priorityClass("lowest", 1),
      ]),
    );
    expect(specOf(p)).toMatchObject({
      priorityClassName: "low",
      priority: 10,
      preemptionPolicy: "Never",
    });
  });

  it("resolves a named class, the system ones included", () => {
    const p = pod({ priorityClassName: "batch" });
    priorityAdmit(p, ctxOf([priorityClass("batch", 500)]));
    expect(specOf(p).priority).toBe(500);
    const system = pod({ priorityClassName: "system-cluster-critical" });
    priorityAdmit(system, ctxOf());
    expect(specOf(system).priority).toBe(2_000_000_000);
  });

  it("refuses an unknown class, and a priority or preemptionPolicy that disagrees with the class", () => {
    expect(priorityAdmit(pod({ priorityClassName: "nope" }), ctxOf())).toBe(
      'pods "trainer" is forbidden: no PriorityClass with name nope was found',
    );
    const classes = [priorityClass("batch", 500, { preemptionPolicy: "Never" })];
    expect(priorityAdmit(pod({ priorityClassName: "batch", priority: 0 }), ctxOf(classes))).toBe(
      'pods "trainer" is forbidden: the integer value of priority (0) must not be provided in pod spec; priority admission controller computed 500 from the given PriorityClass name',
    );
    expect(
      priorityAdmit(
        pod({
          priorityClassName: "batch",
          priority: 500,
          preemptionPolicy: "PreemptLowerPriority",
        }),
        ctxOf(classes),
      ),
    ).toBe(
      'pods "trainer" is forbidden: the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name',
    );
    expect(
      priorityAdmit(
        pod({ priorityClassName: "batch", priority: 500, preemptionPolicy: "Never" }),
        ctxOf(classes),
      ),
    ).toBeUndefined();
  });
});

describe("DefaultTolerationSeconds", () => {
  const added = (key: string) => ({
    key,
    operator: "Exists",
    effect: "NoExecute",
    tolerationSeconds: 300,
  });

  it("adds 300 s of not-ready and unreachable, after the pod's own", () => {
    const own = { key: "gpu", operator: "Exists", effect: "NoSchedule" };
    const p = pod({ tolerations: [own] });
    defaultTolerationSecondsAdmit(p);
    expect(specOf(p).tolerations).toEqual([
      own,
      added("node.kubernetes.io/not-ready"),
      added("node.kubernetes.io/unreachable"),
    ]);
  });

  it("leaves a taint the pod tolerates already: its own seconds, or a toleration of every key", () => {
    const mine = {
      key: "node.kubernetes.io/unreachable",
      operator: "Exists",
      tolerationSeconds: 5,
    };
    const p = pod({ tolerations: [mine] });
    defaultTolerationSecondsAdmit(p);
    expect(specOf(p).tolerations).toEqual([mine, added("node.kubernetes.io/not-ready")]);
    const everything = pod({ tolerations: [{ operator: "Exists" }] });
    defaultTolerationSecondsAdmit(everything);
    expect(specOf(everything).tolerations).toEqual([{ operator: "Exists" }]);
  });
});

describe("the chain around a webhook", () => {
  const classes = [priorityClass("batch", 500)];

  it("runs in the API server's order and stops at the first refusal", () => {
    // ServiceAccount refuses before Priority is reached: the pod gets no priority.
    const p = pod({ serviceAccountName: "ghost", priorityClassName: "nope" });
    expect(admitPodBuiltIns(p, ctxOf())).toBe(serviceAccountNotFound("trainer", NS, "ghost"));
    expect(specOf(p).priority).toBeUndefined();
  });

  it("a webhook that sets priorityClassName after the first pass is refused by the re-run; setting priority too passes", () => {
    const p = pod();
    expect(admitPodBuiltIns(p, ctxOf(classes))).toBeUndefined();
    const classOnly = structuredClone(p);
    specOf(classOnly).priorityClassName = "batch";
    expect(admitPodBuiltIns(classOnly, ctxOf(classes))).toBe(
      'pods "trainer" is forbidden: the integer value of priority (0) must not be provided in pod spec; priority admission controller computed 500 from the given PriorityClass name',
    );
    const both = structuredClone(p);
    Object.assign(specOf(both), { priorityClassName: "batch", priority: 500 });
    expect(admitPodBuiltIns(both, ctxOf(classes))).toBeUndefined();
    expect(specOf(both).priority).toBe(500);
  });

  it("a webhook that removed the token and turned automount off keeps it off on the re-run", () => {
    const p = pod();
    admitPodBuiltIns(p, ctxOf());
    const spec = specOf(p);
    spec.automountServiceAccountToken = false;
    spec.volumes = [];
    spec.containers[0].volumeMounts = [];
    admitPodBuiltIns(p, ctxOf());
    expect([spec.volumes, spec.containers[0].volumeMounts]).toEqual([[], []]);
  });

  it("a webhook that removed the token but left automount on gets it back on the re-run", () => {
    const p = pod();
    admitPodBuiltIns(p, ctxOf());
    Object.assign(specOf(p), { volumes: [] });
    specOf(p).containers[0].volumeMounts = [];
    admitPodBuiltIns(p, ctxOf());
    expect(specOf(p).volumes?.map(v => v.name)).toEqual(["kube-api-access-abcde"]);
  });

  it("validates after the re-run: LimitRanger's min and max first, then the account", () => {
    const ranged = [limitRange({ max: { memory: "1Gi" } })];
    const big = pod({
      serviceAccountName: "ghost",
      containers: [{ name: "main", resources: { limits: { memory: "2Gi" } } }],
    });
    expect(validatePodBuiltIns(big, ctxOf(ranged))).toBe(
      'pods "trainer" is forbidden: maximum memory usage per Container is 1Gi, but limit is 2Gi',
    );
    const fits = pod({
      serviceAccountName: "ghost",
      containers: [{ name: "main", resources: { limits: { memory: "1Gi" } } }],
    });
    expect(validatePodBuiltIns(fits, ctxOf(ranged))).toBe(
      serviceAccountNotFound("trainer", NS, "ghost"),
    );
  });

  it("a webhook that moves the pod to another account: the re-run checks that account", () => {
    const p = pod();
    admitPodBuiltIns(p, ctxOf());
    specOf(p).serviceAccountName = "workload";
    expect(admitPodBuiltIns(p, ctxOf())).toBe(serviceAccountNotFound("trainer", NS, "workload"));
    expect(admitPodBuiltIns(p, ctxOf([account("workload")]))).toBeUndefined();
  });
});
