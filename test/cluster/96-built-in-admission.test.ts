// The stand-in's model of the API server's built-in admission (test/support/built-in-admission.ts,
// which the e2e `admit` and the stand-in's POST of a Pod run) against the real kube-apiserver: the
// same pod, with the same ServiceAccounts, PriorityClasses and LimitRanges, created as a server-side
// dry run (no module installed: only the built-in plugins act), and `defaultPod` of
// test/support/admission.ts over the same objects. The fields those plugins set, or their refusal,
// must agree.
import type { KubeObject } from "../../lib/objects/pod";
import { defaultPod } from "../support/admission";
import {
  BuiltInRefusal,
  LIMIT_RANGER_ANNOTATION,
  objectsCluster,
  TOKEN_VOLUME_PREFIX,
  validatePodBuiltIns,
} from "../support/built-in-admission";
import { applyObjects, connect, defaultAccountMade, namespace } from "./support/cluster";
import { pathOf, statusMessage } from "./support/kube-client";

const NS = "built-in-admission";
const cluster = connect();
afterAll(() => cluster.admin.close());

type Json = Record<string, unknown>;
const priorityClass = (name: string, value: number, extra: Json = {}): KubeObject => ({
  apiVersion: "scheduling.k8s.io/v1",
  kind: "PriorityClass",
  metadata: { name },
  value,
  ...extra,
});
const limitRange: KubeObject = {
  apiVersion: "v1",
  kind: "LimitRange",
  metadata: { name: "defaults", namespace: NS },
  spec: {
    limits: [
      {
        type: "Container",
        default: { cpu: "500m", memory: "512Mi" },
        defaultRequest: { cpu: "250m" },
        max: { memory: "1Gi" },
      },
    ],
  },
};
const quietAccount: KubeObject = {
  apiVersion: "v1",
  kind: "ServiceAccount",
  metadata: { name: "quiet", namespace: NS },
  automountServiceAccountToken: false,
  imagePullSecrets: [{ name: "regcred" }],
};
const OBJECTS = [
  priorityClass("built-in-admission-batch", 500),
  priorityClass("built-in-admission-never", 400, { preemptionPolicy: "Never" }),
  limitRange,
  quietAccount,
];

const pod = (name: string, spec: Json = {}, container: Json = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: NS },
  spec: { containers: [{ name: "main", image: "busybox:1.36", ...container }], ...spec },
});

beforeAll(async () => {
  await applyObjects(cluster, [namespace(NS), ...OBJECTS]);
  await defaultAccountMade(cluster, NS);
});

afterAll(async () => {
  for (const pc of OBJECTS.filter(o => o.kind === "PriorityClass"))
    await cluster.admin.delete(pathOf(pc));
});

/** What the built-in plugins decide about a pod: the fields they set, or their refusal. */
function decided(p: KubeObject | undefined, refusal?: string) {
  if (refusal !== undefined) return { refusal };
  const spec = (p?.spec ?? {}) as Json & { containers: Json[]; volumes?: Json[] };
  return {
    serviceAccountName: spec.serviceAccountName,
    priorityClassName: spec.priorityClassName,
    priority: spec.priority,
    preemptionPolicy: spec.preemptionPolicy,
    tolerations: spec.tolerations,
    imagePullSecrets: spec.imagePullSecrets,
    resources: spec.containers.map(c => c.resources),
    // The token volume's name is random: whether there is one, and mounted where.
    tokenVolume: (spec.volumes ?? []).some(v => String(v.name).startsWith(TOKEN_VOLUME_PREFIX)),
    mounts: spec.containers.map(c =>
      ((c.volumeMounts as Json[] | undefined) ?? []).map(m => m.mountPath),
    ),
    limitRanger: p?.metadata?.annotations?.[LIMIT_RANGER_ANNOTATION],
  };
}

async function server(manifest: KubeObject) {
  // The collection's path: a create is POSTed there.
  const collection = pathOf({ ...manifest, metadata: { namespace: NS } });
  const res = await cluster.admin.create(collection, manifest, "?dryRun=All");
  return res.status < 300 ? decided(res.body) : decided(undefined, statusMessage(res));
}

/** The same through the model: defaulting and the mutating plugins, then the validating ones. */
function model(manifest: KubeObject, objects: KubeObject[]) {
  const cluster = objectsCluster(objects);
  try {
    const p = defaultPod(manifest, NS, cluster);
    const refusal = validatePodBuiltIns(p, { namespace: NS, cluster });
    return refusal ? decided(undefined, refusal) : decided(p);
  } catch (e) {
    if (e instanceof BuiltInRefusal) return decided(undefined, e.message);
    throw e;
  }
}

const cases: [string, KubeObject][] = [
  ["no serviceAccountName: default, the token mounted, 300 s tolerations", pod("plain")],
  ["a PriorityClass by name", pod("batch", { priorityClassName: "built-in-admission-batch" })],
  [
    "a class whose preemptionPolicy is Never",
    pod("never", { priorityClassName: "built-in-admission-never" }),
  ],
  ["an unknown PriorityClass: refused", pod("unknown", { priorityClassName: "no-such-class" })],
  [
    "a priority that disagrees with the class: refused",
    pod("disagrees", { priorityClassName: "built-in-admission-batch", priority: 7 }),
  ],
  [
    "LimitRange defaults for what the container leaves unset",
    pod("partial", {}, { resources: { requests: { memory: "128Mi" } } }),
  ],
  [
    "a limit over the LimitRange's max: refused",
    pod("big", {}, { resources: { limits: { memory: "2Gi" } } }),
  ],
  ["an account with automount off and pull secrets", pod("quiet", { serviceAccountName: "quiet" })],
  ["a missing account: refused", pod("ghost", { serviceAccountName: "ghost" })],
  [
    "its own unreachable toleration kept",
    pod("tolerant", {
      tolerations: [
        {
          key: "node.kubernetes.io/unreachable",
          operator: "Exists",
          effect: "NoExecute",
          tolerationSeconds: 5,
        },
      ],
    }),
  ],
];

test.each(cases)("%s: the stand-in's model and the API server agree", async (_name, manifest) => {
  expect(model(manifest, OBJECTS)).toEqual(await server(manifest));
});

test("the globalDefault PriorityClass: the model and the API server agree", async () => {
  const global = priorityClass("built-in-admission-global", 100, { globalDefault: true });
  await applyObjects(cluster, [global]);
  try {
    const manifest = pod("defaulted-priority");
    expect(model(manifest, [...OBJECTS, global])).toEqual(await server(manifest));
  } finally {
    await cluster.admin.delete(pathOf(global));
  }
});
