// Objects of the kinds `check` judges, each with what a real 1.32 kube-apiserver answers to a
// server-side dry-run create of it (`accepted`). test/unit/cli/schema.test.ts asserts that check's
// schemaProblems gives the same answer offline; test/cluster/95-check-vs-api-server.test.ts asks
// the real API server and asserts both. Where OpenAPI (kubernetes-models) and the server disagree,
// the server decides: see cli/schema.ts.
import type { KubeObject } from "../../lib/objects/pod";

/** The namespace every namespaced case is in (the cluster test creates it). */
export const NS = "check-vs-api";

export interface ServerCase {
  name: string;
  object: KubeObject;
  /** What the API server answers: accepted, or refused (an invalid object or a decoding error). */
  accepted: boolean;
}

type Json = Record<string, unknown>;

const ctr = (extra: Json = {}): Json => ({ name: "c", image: "busybox", ...extra });
const pod = (spec: Json = {}, extra: Json = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p", namespace: NS },
  spec: { containers: [ctr()], ...spec },
  ...extra,
});
const withVolume = (volume: Json, spec: Json = {}) =>
  pod({ volumes: [{ name: "v", ...volume }], ...spec });
const inContainer = (extra: Json) => pod({ containers: [ctr(extra)] });
const template = { metadata: { labels: { app: "a" } }, spec: { containers: [ctr()] } };
const selector = { matchLabels: { app: "a" } };
const workload = (kind: string, apiVersion: string, spec: Json, extra: Json = {}): KubeObject => ({
  apiVersion,
  kind,
  metadata: { name: "w", namespace: NS },
  spec,
  ...extra,
});
const deployment = (spec: Json = {}, extra: Json = {}) =>
  workload("Deployment", "apps/v1", { selector, template, ...spec }, extra);
const statefulSet = (spec: Json = {}, extra: Json = {}) =>
  workload("StatefulSet", "apps/v1", { selector, template, ...spec }, extra);
const daemonSet = (spec: Json = {}, extra: Json = {}) =>
  workload("DaemonSet", "apps/v1", { selector, template, ...spec }, extra);
const jobSpec = (extra: Json = {}): Json => ({
  template: { spec: { containers: [ctr()], restartPolicy: "Never" } },
  ...extra,
});
const job = (spec: Json = jobSpec(), extra: Json = {}) => workload("Job", "batch/v1", spec, extra);
const cronJob = (spec: Json) => workload("CronJob", "batch/v1", spec);
const failurePolicy = (rule: Json) => job(jobSpec({ podFailurePolicy: { rules: [rule] } }));
const claimTemplate = (spec: Json = {}): Json => ({
  accessModes: ["ReadWriteOnce"],
  resources: { requests: { storage: "1Gi" } },
  ...spec,
});

/**
 * The fields OpenAPI marks `required` in the Pod and workload specs (all but the feature-gated
 * ones of knownDifferences and ephemeral containers', which a create may not hold), and in samples
 * of their status, each in an otherwise valid object: [what, the object around a sub-object, a valid sub-object, the fields the server
 * requires too, the fields it does not (it takes their zero value or defaults them)].
 */
type RequiredRow = [string, (sub: Json) => KubeObject, Json, string[], string[]];
const REQUIRED: RequiredRow[] = [
  // Volume sources
  [
    "scaleIO",
    s => withVolume({ scaleIO: s }),
    { gateway: "g", system: "s", volumeName: "v", secretRef: { name: "x" } },
    ["gateway", "system"],
    ["secretRef"],
  ],
  [
    "iscsi",
    s => withVolume({ iscsi: s }),
    { targetPortal: "1.2.3.4:3260", iqn: "iqn.2001-04.com.example:storage", lun: 0 },
    ["targetPortal", "iqn"],
    ["lun"],
  ],
  [
    "awsElasticBlockStore",
    s => withVolume({ awsElasticBlockStore: s }),
    { volumeID: "v" },
    ["volumeID"],
    [],
  ],
  [
    "azureDisk",
    s => withVolume({ azureDisk: s }),
    { diskName: "d", diskURI: "https://a.blob.core.windows.net/c/d.vhd" },
    ["diskName", "diskURI"],
    [],
  ],
  [
    "azureFile",
    s => withVolume({ azureFile: s }),
    { secretName: "s", shareName: "s" },
    ["secretName", "shareName"],
    [],
  ],
  ["cephfs", s => withVolume({ cephfs: s }), { monitors: ["m"] }, ["monitors"], []],
  ["cinder", s => withVolume({ cinder: s }), { volumeID: "v" }, ["volumeID"], []],
  ["csi", s => withVolume({ csi: s }), { driver: "d" }, ["driver"], []],
  ["flexVolume", s => withVolume({ flexVolume: s }), { driver: "d" }, ["driver"], []],
  ["gcePersistentDisk", s => withVolume({ gcePersistentDisk: s }), { pdName: "d" }, ["pdName"], []],
  ["gitRepo", s => withVolume({ gitRepo: s }), { repository: "r" }, ["repository"], []],
  [
    "glusterfs",
    s => withVolume({ glusterfs: s }),
    { endpoints: "e", path: "p" },
    ["endpoints", "path"],
    [],
  ],
  ["hostPath", s => withVolume({ hostPath: s }), { path: "/x" }, ["path"], []],
  ["nfs", s => withVolume({ nfs: s }), { server: "s", path: "/x" }, ["server", "path"], []],
  [
    "persistentVolumeClaim",
    s => withVolume({ persistentVolumeClaim: s }),
    { claimName: "c" },
    ["claimName"],
    [],
  ],
  [
    "photonPersistentDisk",
    s => withVolume({ photonPersistentDisk: s }),
    { pdID: "d" },
    ["pdID"],
    [],
  ],
  ["portworxVolume", s => withVolume({ portworxVolume: s }), { volumeID: "v" }, ["volumeID"], []],
  [
    "quobyte",
    s => withVolume({ quobyte: s }),
    { registry: "r:1", volume: "v" },
    ["registry", "volume"],
    [],
  ],
  ["rbd", s => withVolume({ rbd: s }), { monitors: ["m"], image: "i" }, ["monitors", "image"], []],
  [
    "vsphereVolume",
    s => withVolume({ vsphereVolume: s }),
    { volumePath: "/p" },
    ["volumePath"],
    [],
  ],
  [
    "configMap item",
    s => withVolume({ configMap: { name: "cm", items: [s] } }),
    { key: "k", path: "p" },
    ["key", "path"],
    [],
  ],
  [
    "downwardAPI item",
    s => withVolume({ downwardAPI: { items: [s] } }),
    { path: "p", fieldRef: { fieldPath: "metadata.name" } },
    ["path"],
    [],
  ],
  [
    "downwardAPI fieldRef",
    s => withVolume({ downwardAPI: { items: [{ path: "p", fieldRef: s }] } }),
    { fieldPath: "metadata.name" },
    ["fieldPath"],
    [],
  ],
  [
    "serviceAccountToken projection",
    s => withVolume({ projected: { sources: [{ serviceAccountToken: s }] } }),
    { path: "t" },
    ["path"],
    [],
  ],
  [
    "ephemeral volumeClaimTemplate",
    s => withVolume({ ephemeral: { volumeClaimTemplate: s } }),
    { spec: claimTemplate() },
    ["spec"],
    [],
  ],
  [
    "claim dataSource",
    s =>
      withVolume({
        ephemeral: { volumeClaimTemplate: { spec: claimTemplate({ dataSource: s }) } },
      }),
    { kind: "PersistentVolumeClaim", name: "x" },
    ["kind", "name"],
    [],
  ],
  [
    "claim dataSourceRef",
    s =>
      withVolume({
        ephemeral: { volumeClaimTemplate: { spec: claimTemplate({ dataSourceRef: s }) } },
      }),
    { kind: "PersistentVolumeClaim", name: "x" },
    ["kind", "name"],
    [],
  ],
  ["volume", s => pod({ volumes: [s] }), { name: "v", emptyDir: {} }, ["name"], []],
  // Containers
  ["container", s => pod({ containers: [s] }), ctr(), ["name"], []],
  [
    "container port",
    s => inContainer({ ports: [s] }),
    { containerPort: 80 },
    ["containerPort"],
    [],
  ],
  ["env", s => inContainer({ env: [s] }), { name: "A", value: "b" }, ["name"], []],
  [
    "configMapKeyRef",
    s => inContainer({ env: [{ name: "A", valueFrom: { configMapKeyRef: s } }] }),
    { name: "cm", key: "k" },
    ["key"],
    [],
  ],
  [
    "secretKeyRef",
    s => inContainer({ env: [{ name: "A", valueFrom: { secretKeyRef: s } }] }),
    { name: "s", key: "k" },
    ["key"],
    [],
  ],
  [
    "resourceFieldRef",
    s => inContainer({ env: [{ name: "A", valueFrom: { resourceFieldRef: s } }] }),
    { resource: "limits.cpu" },
    ["resource"],
    [],
  ],
  [
    "volumeMount",
    s => pod({ containers: [ctr({ volumeMounts: [s] })], volumes: [{ name: "v", emptyDir: {} }] }),
    { name: "v", mountPath: "/v" },
    ["name", "mountPath"],
    [],
  ],
  [
    "volumeDevice",
    s =>
      pod({
        containers: [ctr({ volumeDevices: [s] })],
        volumes: [{ name: "v", persistentVolumeClaim: { claimName: "c" } }],
      }),
    { name: "v", devicePath: "/dev/x" },
    ["name", "devicePath"],
    [],
  ],
  ["httpGet", s => inContainer({ readinessProbe: { httpGet: s } }), { port: 80 }, ["port"], []],
  [
    "httpHeader",
    s => inContainer({ readinessProbe: { httpGet: { port: 80, httpHeaders: [s] } } }),
    { name: "X-A", value: "b" },
    ["name"],
    ["value"],
  ],
  ["tcpSocket", s => inContainer({ readinessProbe: { tcpSocket: s } }), { port: 80 }, ["port"], []],
  ["grpc", s => inContainer({ readinessProbe: { grpc: s } }), { port: 80 }, ["port"], []],
  [
    "sleep",
    s => inContainer({ lifecycle: { preStop: { sleep: s } } }),
    { seconds: 1 },
    ["seconds"],
    [],
  ],
  // Pod spec
  [
    "seccompProfile",
    s => pod({ securityContext: { seccompProfile: s } }),
    { type: "RuntimeDefault" },
    ["type"],
    [],
  ],
  [
    "appArmorProfile",
    s => pod({ securityContext: { appArmorProfile: s } }),
    { type: "RuntimeDefault" },
    ["type"],
    [],
  ],
  [
    "sysctl",
    s => pod({ securityContext: { sysctls: [s] } }),
    { name: "kernel.shm_rmid_forced", value: "0" },
    ["name"],
    ["value"],
  ],
  ["hostAlias", s => pod({ hostAliases: [s] }), { ip: "1.2.3.4", hostnames: ["a"] }, ["ip"], []],
  ["os", s => pod({ os: s }), { name: "linux" }, ["name"], []],
  [
    "readinessGate",
    s => pod({ readinessGates: [s] }),
    { conditionType: "a.b/c" },
    ["conditionType"],
    [],
  ],
  ["schedulingGate", s => pod({ schedulingGates: [s] }), { name: "g" }, ["name"], []],
  [
    "nodeAffinity required",
    s => pod({ affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: s } } }),
    { nodeSelectorTerms: [{ matchExpressions: [{ key: "a", operator: "Exists" }] }] },
    ["nodeSelectorTerms"],
    [],
  ],
  [
    "node selector requirement",
    s =>
      pod({
        affinity: {
          nodeAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: {
              nodeSelectorTerms: [{ matchExpressions: [s] }],
            },
          },
        },
      }),
    { key: "a", operator: "Exists" },
    ["key", "operator"],
    [],
  ],
  [
    "nodeAffinity preferred",
    s =>
      pod({ affinity: { nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [s] } } }),
    { weight: 1, preference: { matchExpressions: [{ key: "a", operator: "Exists" }] } },
    ["weight"],
    ["preference"],
  ],
  [
    "podAffinity term",
    s =>
      pod({ affinity: { podAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [s] } } }),
    { topologyKey: "zone" },
    ["topologyKey"],
    [],
  ],
  [
    "podAntiAffinity preferred",
    s =>
      pod({
        affinity: { podAntiAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [s] } },
      }),
    { weight: 1, podAffinityTerm: { topologyKey: "zone" } },
    ["weight", "podAffinityTerm"],
    [],
  ],
  [
    "label selector requirement",
    s =>
      pod({
        affinity: {
          podAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: [
              { topologyKey: "zone", labelSelector: { matchExpressions: [s] } },
            ],
          },
        },
      }),
    { key: "a", operator: "Exists" },
    ["key", "operator"],
    [],
  ],
  [
    "topologySpreadConstraint",
    s => pod({ topologySpreadConstraints: [s] }),
    { maxSkew: 1, topologyKey: "zone", whenUnsatisfiable: "DoNotSchedule" },
    ["maxSkew", "topologyKey", "whenUnsatisfiable"],
    [],
  ],
  [
    "ownerReference",
    s => pod({}, { metadata: { name: "p", namespace: NS, ownerReferences: [s] } }),
    { apiVersion: "v1", kind: "ConfigMap", name: "x", uid: "0c7c2b7e-0000-4000-8000-000000000000" },
    ["apiVersion", "kind", "name", "uid"],
    [],
  ],
  // Workloads
  [
    "Deployment spec",
    s => workload("Deployment", "apps/v1", s),
    { selector, template },
    ["selector", "template"],
    [],
  ],
  [
    "StatefulSet spec",
    s => workload("StatefulSet", "apps/v1", s),
    { selector, template },
    ["selector", "template"],
    [],
  ],
  [
    "DaemonSet spec",
    s => workload("DaemonSet", "apps/v1", s),
    { selector, template },
    ["selector", "template"],
    [],
  ],
  [
    "ReplicaSet spec",
    s => workload("ReplicaSet", "apps/v1", s),
    { selector, template },
    ["selector"],
    [],
  ],
  ["Job spec", s => job(s), jobSpec(), ["template"], []],
  [
    "CronJob spec",
    s => cronJob(s),
    { schedule: "* * * * *", jobTemplate: { spec: jobSpec() } },
    ["schedule", "jobTemplate"],
    [],
  ],
  [
    "podFailurePolicy",
    s => job(jobSpec({ podFailurePolicy: s })),
    { rules: [{ action: "FailJob", onExitCodes: { operator: "In", values: [1] } }] },
    [],
    ["rules"],
  ],
  [
    "podFailurePolicy rule",
    s => failurePolicy(s),
    { action: "FailJob", onExitCodes: { operator: "In", values: [1] } },
    ["action"],
    [],
  ],
  [
    "onExitCodes",
    s => failurePolicy({ action: "FailJob", onExitCodes: s }),
    { operator: "In", values: [1] },
    ["operator", "values"],
    [],
  ],
  [
    "onPodConditions",
    s => failurePolicy({ action: "Ignore", onPodConditions: [s] }),
    { type: "DisruptionTarget", status: "True" },
    ["type"],
    ["status"],
  ],
  [
    "successPolicy",
    s => job(jobSpec({ completionMode: "Indexed", completions: 2, successPolicy: s })),
    { rules: [{ succeededCount: 1 }] },
    ["rules"],
    [],
  ],
  // Status: reset by the server on create, whatever it holds (its types are still decoded)
  [
    "Pod condition",
    s => pod({}, { status: { conditions: [s] } }),
    { type: "Ready", status: "True" },
    [],
    ["type", "status"],
  ],
  [
    "Pod containerStatus",
    s => pod({}, { status: { containerStatuses: [s] } }),
    { name: "c", ready: true, restartCount: 0, image: "i", imageID: "x" },
    [],
    ["name", "ready", "restartCount", "image", "imageID"],
  ],
  ["Pod podIP", s => pod({}, { status: { podIPs: [s] } }), { ip: "1.2.3.4" }, [], ["ip"]],
  [
    "Deployment condition",
    s => deployment({}, { status: { conditions: [s] } }),
    { type: "Available", status: "True" },
    [],
    ["type", "status"],
  ],
  ["StatefulSet status", s => statefulSet({}, { status: s }), { replicas: 1 }, [], ["replicas"]],
  [
    "DaemonSet status",
    s => daemonSet({}, { status: s }),
    { currentNumberScheduled: 0, numberMisscheduled: 0, desiredNumberScheduled: 0, numberReady: 0 },
    [],
    ["currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady"],
  ],
  [
    "ReplicaSet status",
    s => workload("ReplicaSet", "apps/v1", { selector, template }, { status: s }),
    { replicas: 1 },
    [],
    ["replicas"],
  ],
  [
    "ReplicationController status",
    s =>
      workload("ReplicationController", "v1", { selector: { app: "a" }, template }, { status: s }),
    { replicas: 1 },
    [],
    ["replicas"],
  ],
  [
    "Job condition",
    s => job(jobSpec(), { status: { conditions: [s] } }),
    { type: "Complete", status: "True" },
    [],
    ["type", "status"],
  ],
];

/** Each row valid as written, then each required field left out, then set to null (the same to the server). */
export const requiredFieldCases: ServerCase[] = REQUIRED.flatMap(
  ([what, make, valid, required, notRequired]) => [
    { name: `${what}: valid`, object: make(valid), accepted: true },
    ...[...required, ...notRequired].flatMap(field => {
      const accepted = notRequired.includes(field);
      const without = { ...valid };
      delete without[field];
      return [
        { name: `${what}: without ${field}`, object: make(without), accepted },
        { name: `${what}: ${field}: null`, object: make({ ...valid, [field]: null }), accepted },
      ];
    }),
  ],
);

/**
 * Enumerations: null is absent to the server (then defaulted, or refused where it requires the
 * field); "" is absent too where the field is a plain Go string (`emptyAccepted`), not where it
 * is a pointer or required; a value outside the enumeration is refused.
 */
type EnumRow = [string, (value: unknown) => KubeObject, boolean, boolean];
const ENUMS: EnumRow[] = [
  // [field, object with it, null accepted, "" accepted]
  ["container imagePullPolicy", v => inContainer({ imagePullPolicy: v }), true, true],
  [
    "container terminationMessagePolicy",
    v => inContainer({ terminationMessagePolicy: v }),
    true,
    true,
  ],
  [
    "container port protocol",
    v => inContainer({ ports: [{ containerPort: 80, protocol: v }] }),
    true,
    true,
  ],
  [
    "httpGet scheme",
    v => inContainer({ readinessProbe: { httpGet: { port: 80, scheme: v } } }),
    true,
    true,
  ],
  ["pod restartPolicy", v => pod({ restartPolicy: v }), true, true],
  ["pod dnsPolicy", v => pod({ dnsPolicy: v }), true, true],
  [
    "toleration effect",
    v => pod({ tolerations: [{ key: "k", operator: "Exists", effect: v }] }),
    true,
    true,
  ],
  [
    "toleration operator",
    v => pod({ tolerations: [{ key: "k", operator: v, value: "x" }] }),
    true,
    true,
  ],
  ["Deployment strategy type", v => deployment({ strategy: { type: v } }), true, true],
  ["DaemonSet updateStrategy type", v => daemonSet({ updateStrategy: { type: v } }), true, true],
  [
    "StatefulSet updateStrategy type",
    v => statefulSet({ updateStrategy: { type: v } }),
    true,
    true,
  ],
  ["StatefulSet podManagementPolicy", v => statefulSet({ podManagementPolicy: v }), true, true],
  [
    "CronJob concurrencyPolicy",
    v => cronJob({ schedule: "* * * * *", concurrencyPolicy: v, jobTemplate: { spec: jobSpec() } }),
    true,
    true,
  ],
  [
    "ReplicationController template restartPolicy",
    v =>
      workload("ReplicationController", "v1", {
        selector: { app: "a" },
        template: { ...template, spec: { ...template.spec, restartPolicy: v } },
      }),
    true,
    true,
  ],
  // pointers: "" is a value, and not an allowed one
  ["pod preemptionPolicy", v => pod({ preemptionPolicy: v }), true, false],
  [
    "volumeMount mountPropagation",
    v =>
      pod({
        containers: [ctr({ volumeMounts: [{ name: "v", mountPath: "/v", mountPropagation: v }] })],
        volumes: [{ name: "v", emptyDir: {} }],
      }),
    true,
    false,
  ],
  [
    "pod fsGroupChangePolicy",
    v => pod({ securityContext: { fsGroupChangePolicy: v } }),
    true,
    false,
  ],
  [
    "topologySpread nodeAffinityPolicy",
    v =>
      pod({
        topologySpreadConstraints: [
          {
            maxSkew: 1,
            topologyKey: "z",
            whenUnsatisfiable: "DoNotSchedule",
            labelSelector: selector,
            nodeAffinityPolicy: v,
          },
        ],
      }),
    true,
    false,
  ],
  [
    "topologySpread nodeTaintsPolicy",
    v =>
      pod({
        topologySpreadConstraints: [
          {
            maxSkew: 1,
            topologyKey: "z",
            whenUnsatisfiable: "DoNotSchedule",
            labelSelector: selector,
            nodeTaintsPolicy: v,
          },
        ],
      }),
    true,
    false,
  ],
  ["Job completionMode", v => job(jobSpec({ completionMode: v })), true, false],
  ["Job podReplacementPolicy", v => job(jobSpec({ podReplacementPolicy: v })), true, false],
  [
    "azureDisk kind",
    v =>
      withVolume({
        azureDisk: { diskName: "d", diskURI: "https://a.blob.core.windows.net/c/d.vhd", kind: v },
      }),
    true,
    false,
  ],
  [
    "azureDisk cachingMode",
    v =>
      withVolume({
        azureDisk: {
          diskName: "d",
          diskURI: "https://a.blob.core.windows.net/c/d.vhd",
          cachingMode: v,
        },
      }),
    true,
    false,
  ],
  [
    "claim volumeMode",
    v =>
      withVolume({
        ephemeral: { volumeClaimTemplate: { spec: claimTemplate({ volumeMode: v }) } },
      }),
    true,
    false,
  ],
  // required by the server: neither null nor ""
  [
    "seccompProfile type",
    v => pod({ securityContext: { seccompProfile: { type: v } } }),
    false,
    false,
  ],
  [
    "appArmorProfile type",
    v => pod({ securityContext: { appArmorProfile: { type: v } } }),
    false,
    false,
  ],
  [
    "topologySpread whenUnsatisfiable",
    v =>
      pod({ topologySpreadConstraints: [{ maxSkew: 1, topologyKey: "z", whenUnsatisfiable: v }] }),
    false,
    false,
  ],
  [
    "node selector operator",
    v =>
      pod({
        affinity: {
          nodeAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: {
              nodeSelectorTerms: [{ matchExpressions: [{ key: "a", operator: v }] }],
            },
          },
        },
      }),
    false,
    false,
  ],
  [
    "podFailurePolicy action",
    v => failurePolicy({ action: v, onExitCodes: { operator: "In", values: [1] } }),
    false,
    false,
  ],
  [
    "onExitCodes operator",
    v => failurePolicy({ action: "FailJob", onExitCodes: { operator: v, values: [1] } }),
    false,
    false,
  ],
  // status: reset on create, any value goes
  ["Pod status phase", v => pod({}, { status: { phase: v } }), true, true],
  ["Pod status qosClass", v => pod({}, { status: { qosClass: v } }), true, true],
];

export const enumCases: ServerCase[] = ENUMS.flatMap(([what, make, nullOk, emptyOk]) => [
  { name: `${what}: null`, object: make(null), accepted: nullOk },
  { name: `${what}: ""`, object: make(""), accepted: emptyOk },
  { name: `${what}: "Bogus"`, object: make("Bogus"), accepted: what.includes("status") },
]);

/** Other nulls: optional objects and scalars, map entries, list items. */
export const nullCases: ServerCase[] = [
  // As Go marshals a ScaleIO volume without a secret (secretRef has no omitempty): the Pod
  // Security restricted-volumes fixtures hold it.
  {
    name: "a Pod Security fixture: scaleIO volume with secretRef: null",
    object: withVolume(
      {
        scaleIO: {
          gateway: "https://localhost:443/api",
          system: "scaleio",
          protectionDomain: "sd0",
          storagePool: "sp1",
          volumeName: "vol-0",
          secretRef: null,
          fsType: "xfs",
        },
      },
      { containers: [ctr({ volumeMounts: [{ name: "v", mountPath: "/data" }] })] },
    ),
    accepted: true,
  },
  {
    name: "pod and container securityContext: null",
    object: pod({ securityContext: null, containers: [ctr({ securityContext: null })] }),
    accepted: true,
  },
  {
    name: "runAsUser: null",
    object: pod({ securityContext: { runAsUser: null } }),
    accepted: true,
  },
  { name: "Deployment replicas: null", object: deployment({ replicas: null }), accepted: true },
  {
    name: "Deployment maxSurge: null",
    object: deployment({ strategy: { rollingUpdate: { maxSurge: null } } }),
    accepted: true,
  },
  {
    name: "label value null",
    object: pod({}, { metadata: { name: "p", namespace: NS, labels: { a: null } } }),
    accepted: true,
  },
  {
    name: "annotation value null",
    object: pod({}, { metadata: { name: "p", namespace: NS, annotations: { a: null } } }),
    accepted: true,
  },
  { name: "nodeSelector value null", object: pod({ nodeSelector: { a: null } }), accepted: true },
  {
    name: "resource limit null",
    object: inContainer({ resources: { limits: { cpu: null } } }),
    accepted: true,
  },
  { name: "args item null", object: inContainer({ args: [null] }), accepted: true },
  { name: "command item null", object: inContainer({ command: ["sh", null] }), accepted: true },
  {
    name: "container name: null",
    object: pod({ containers: [{ name: null, image: "busybox" }] }),
    accepted: false,
  },
  {
    name: "httpGet port: null",
    object: inContainer({ readinessProbe: { httpGet: { port: null } } }),
    accepted: false,
  },
  { name: "containers item null", object: pod({ containers: [ctr(), null] }), accepted: false },
  { name: "volumes item null", object: pod({ volumes: [null] }), accepted: false },
  { name: "Deployment selector: null", object: deployment({ selector: null }), accepted: false },
];

/** Errors both refuse: wrong types (a decoding error to the server), unknown fields, bad values. */
export const errorCases: ServerCase[] = [
  // Required by the server, not by OpenAPI (cli/schema.ts, SERVER_REQUIRES).
  {
    name: "container without image",
    object: pod({ containers: [{ name: "c" }] }),
    accepted: false,
  },
  {
    name: "Deployment template container without image",
    object: deployment({ template: { ...template, spec: { containers: [{ name: "c" }] } } }),
    accepted: false,
  },
  { name: 'container image: ""', object: inContainer({ image: "" }), accepted: false },
  { name: "container image: null", object: inContainer({ image: null }), accepted: false },
  {
    name: "init container without image",
    object: pod({ initContainers: [{ name: "i" }] }),
    accepted: false,
  },
  // Wrong types (decoding errors to the server), unknown fields, what the server requires.
  { name: "containers is a string", object: pod({ containers: "nope" }), accepted: false },
  {
    name: "Deployment replicas is a string",
    object: deployment({ replicas: "two" }),
    accepted: false,
  },
  {
    name: "runAsUser is a string",
    object: pod({ securityContext: { runAsUser: "1000" } }),
    accepted: false,
  },
  {
    name: "pod-level readOnlyRootFilesystem (unknown field)",
    object: pod({ securityContext: { readOnlyRootFilesystem: true } }),
    accepted: false,
  },
  {
    name: "unknown field set to null",
    object: pod({ securityContext: { readOnlyRootFilesystem: null } }),
    accepted: false,
  },
  { name: "status: unknown field", object: pod({}, { status: { bogus: 1 } }), accepted: false },
  {
    name: "status: conditions is a string",
    object: pod({}, { status: { conditions: "x" } }),
    accepted: false,
  },
  {
    name: "status: ready is a string",
    object: pod(
      {},
      {
        status: {
          containerStatuses: [
            { name: "c", ready: "yes", restartCount: 0, image: "i", imageID: "x" },
          ],
        },
      },
    ),
    accepted: false,
  },
  {
    name: "a second container without a name",
    object: pod({ containers: [ctr(), { image: "busybox" }] }),
    accepted: false,
  },
  {
    name: "scaleIO without gateway and system",
    object: withVolume({ scaleIO: { secretRef: null } }),
    accepted: false,
  },
  // DynamicResourceAllocation is on in the test control plane (78-dra): the server validates it.
  {
    name: "resourceClaims entry without name",
    object: pod({ resourceClaims: [{ resourceClaimName: "x" }] }),
    accepted: false,
  },
];

/** Every case both agree on. */
export const serverCases: ServerCase[] = [
  ...requiredFieldCases,
  ...enumCases,
  ...nullCases,
  ...errorCases,
];

/**
 * Where check and this server still differ, on purpose or beyond what check models; pinned so a
 * change shows. `accepted` is the server's answer; check answers the opposite.
 * - Fields behind feature gates a 1.32 server has off by default: it drops them unread, but a
 *   cluster with the gate on validates them, and so does check (OpenAPI).
 * - What only the server's own validation requires or refuses (check judges OpenAPI; the rules
 *   or the server say the rest).
 */
export const knownDifferences: ServerCase[] = [
  // Feature gates off in 1.32 (InPlacePodVerticalScaling, ClusterTrustBundleProjection,
  // SupplementalGroupsPolicy, ProcMountType). ImageVolume and DynamicResourceAllocation are on in
  // the test control plane (image volumes must reach the registry rules: 85-hostile; DRA: 78-dra),
  // so there the server validates an image volume's pullPolicy and a resourceClaims entry as check
  // does.
  {
    name: "gated: resizePolicy without resourceName",
    object: inContainer({ resizePolicy: [{ restartPolicy: "NotRequired" }] }),
    accepted: true,
  },
  {
    name: "gated: clusterTrustBundle without path",
    object: withVolume({ projected: { sources: [{ clusterTrustBundle: { name: "n" } }] } }),
    accepted: true,
  },
  {
    name: "gated: supplementalGroupsPolicy Bogus",
    object: pod({ securityContext: { supplementalGroupsPolicy: "Bogus" } }),
    accepted: true,
  },
  {
    name: "gated: procMount Bogus",
    object: inContainer({ securityContext: { procMount: "Bogus" } }),
    accepted: true,
  },
  // A null object list item: the server's zero object; an empty imagePullSecrets entry is valid.
  { name: "imagePullSecrets item null", object: pod({ imagePullSecrets: [null] }), accepted: true },
  // The server's own validation, beyond OpenAPI.
  {
    name: "Pod without spec",
    object: { apiVersion: "v1", kind: "Pod", metadata: { name: "p", namespace: NS } },
    accepted: false,
  },
  { name: "Pod without name", object: pod({}, { metadata: { namespace: NS } }), accepted: false },
  { name: "empty toleration", object: pod({ tolerations: [{}] }), accepted: false },
  {
    name: "label selector operator Bogus",
    object: pod({
      affinity: {
        podAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: [
            {
              topologyKey: "zone",
              labelSelector: { matchExpressions: [{ key: "a", operator: "Bogus" }] },
            },
          ],
        },
      },
    }),
    accepted: false,
  },
  {
    name: "onExitCodes values item null (0, not allowed with In)",
    object: failurePolicy({ action: "FailJob", onExitCodes: { operator: "In", values: [null] } }),
    accepted: false,
  },
];
