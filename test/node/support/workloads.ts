// Pods for the node tier, and what became of them: Succeeded, Failed (with the probe's own
// summary), Running (servers), or never started (the kubelet's reason: the image runs as root under
// runAsNonRoot, a named user it cannot check...), or denied at admission.
import type { V1Container, V1Pod, V1PodSpec, V1SecurityContext } from "@kubernetes/client-node";
import type { KubeObject } from "../../../lib/objects/pod";
import { namespace, type Cluster } from "../../cluster/support/cluster";
import { imageOf, type ImageVariant, type Shape } from "./shapes";

/**
 * The seeds' images, as probes (no registry on the internet serves them here): the trainers are
 * root-built images whose jobs write caches, /tmp and /dev/shm, the GPT-4 canary a root-built
 * image that serves. Loaded into the node under their own names (CRI names images fully:
 * `openai/...` is `docker.io/openai/...`), and served by the tier's registry under the same path,
 * which the module's `registries.mirrors` point each source registry at (an air-gapped cluster's
 * set-up: the module reads, and the kubelet pulls, the mirror).
 */
export const SEED_IMAGES: ImageVariant[] = [
  { shape: "root-built-scratch", tags: ["ghcr.io/run-llama/llama-index:latest"] },
  { shape: "root-built-scratch", tags: ["private-registry.com/mlflow-train:latest"] },
  {
    shape: "root-built-scratch",
    tags: ["docker.io/openai/gpt4-inference:latest"],
    env: ["MODE=serve"],
  },
];
/**
 * Issue 46's shapes, as root-built probes served under docker.io names (mirrored as the seeds'
 * are): a server on port 80 (TGI's Env PORT=80), an environment under /root on PATH (Miniconda
 * installed as root), and Hugging Face's cache in a directory no layer makes (HF_HOME=/data/hf:
 * the runtime would make it, root's).
 */
export const ML_SHAPE_IMAGES = {
  lowPort: {
    shape: "root-built-scratch",
    tags: ["docker.io/admission-guard/low-port-server:1"],
    env: ["MODE=serve", "PORT=80"],
  },
  rootHome: {
    shape: "root-built-scratch",
    tags: ["docker.io/admission-guard/conda-under-root:1"],
    env: ["PATH=/root/miniconda3/bin:/bin:/usr/local/bin"],
  },
  hfCache: {
    shape: "root-built-scratch",
    tags: ["docker.io/admission-guard/hf-cache:1"],
    env: ["HF_HOME=/data/hf"],
  },
} satisfies Record<string, ImageVariant>;
export const SEED_REGISTRIES = ["ghcr.io", "private-registry.com", "docker.io"];

/**
 * The module's environment on the node tier: it reads image configs from the tier's registry
 * (plain HTTP on loopback) and mirrors the seeds' registries to it.
 */
export function nodeModuleEnv(registry: string): Record<string, string> {
  return {
    ADMISSION_GUARD_IMAGES_INSPECT: "true",
    ADMISSION_GUARD_IMAGES_PLAIN_HTTP: registry,
    ADMISSION_GUARD_REGISTRIES_MIRRORS: JSON.stringify(
      Object.fromEntries(SEED_REGISTRIES.map(r => [r, `${registry}/${r}`])),
    ),
  };
}

/** What Pod Security "restricted" asks for, and nothing more: the baseline a job must keep. */
export const MINIMAL_RESTRICTED = {
  pod: { runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } },
  container: {
    allowPrivilegeEscalation: false,
    capabilities: { drop: ["ALL"] },
  } satisfies V1SecurityContext,
};

export const CHECKPOINT_DIR = "/checkpoints";

export interface ProbePodOptions {
  name: string;
  namespace: string;
  /** The tier's registry (host:port). */
  registry: string;
  shape: Shape;
  /** "minimal": the four fields Pod Security asks for; "none": no securityContext at all. */
  securityContext: "minimal" | "none";
  labels?: Record<string, string>;
}

/** A training probe pod: runs once, writes its caches, /tmp, ./outputs, /dev/shm and a checkpoint. */
export function probePod(options: ProbePodOptions): KubeObject {
  const minimal = options.securityContext === "minimal";
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: options.name,
      namespace: options.namespace,
      labels: { app: "probe", shape: options.shape, ...options.labels },
    },
    spec: {
      restartPolicy: "Never",
      ...(minimal ? { securityContext: MINIMAL_RESTRICTED.pod } : {}),
      containers: [
        {
          name: "probe",
          image: imageOf(options.registry, options.shape),
          imagePullPolicy: "IfNotPresent",
          env: [{ name: "CHECKPOINT_DIR", value: CHECKPOINT_DIR }],
          volumeMounts: [{ name: "checkpoints", mountPath: CHECKPOINT_DIR }],
          terminationMessagePolicy: "FallbackToLogsOnError",
          ...(minimal ? { securityContext: MINIMAL_RESTRICTED.container } : {}),
        },
      ],
      volumes: [{ name: "checkpoints", emptyDir: {} }],
    } satisfies V1PodSpec,
  };
}

/**
 * A server container: the well-built non-root probe image serving its model over HTTP (reads
 * only), ready once it answers. `extra` adds or replaces fields (resources, probe period).
 */
export function serverContainer(registry: string, extra: Partial<V1Container> = {}): V1Container {
  return {
    name: "serve",
    image: imageOf(registry, "nonroot-numeric"),
    imagePullPolicy: "IfNotPresent",
    env: [{ name: "MODE", value: "serve" }],
    readinessProbe: { httpGet: { path: "/model.txt", port: 8080 }, periodSeconds: 2 },
    ...extra,
  };
}

/** Kubelet reasons that mean the container will not start without a change to the pod. */
const STUCK = new Set([
  "CreateContainerConfigError",
  "CreateContainerError",
  "RunContainerError",
  "ErrImagePull",
  "ImagePullBackOff",
  "ErrImageNeverPull",
  "InvalidImageName",
]);

export type Outcome =
  | { kind: "Succeeded" }
  | { kind: "Running" }
  | { kind: "Failed"; message: string }
  | { kind: "NotStarted"; reason: string; message: string }
  | { kind: "Pending"; message: string }
  | { kind: "Denied"; message: string };

/** What became of a pod so far; undefined while it is still on its way. */
export function outcomeOf(pod: KubeObject, waitFor: "completion" | "running"): Outcome | undefined {
  const { status } = pod as V1Pod;
  const container = status?.containerStatuses?.[0];
  if (status?.phase === "Succeeded") return { kind: "Succeeded" };
  if (status?.phase === "Failed")
    return {
      kind: "Failed",
      message: (container?.state?.terminated?.message ?? status.message ?? "").trim(),
    };
  const waiting = container?.state?.waiting;
  if (waiting?.reason && STUCK.has(waiting.reason))
    return { kind: "NotStarted", reason: waiting.reason, message: waiting.message ?? "" };
  if (waitFor === "running" && container?.ready) return { kind: "Running" };
  return undefined;
}

/** One table cell: the outcome and the first words of its reason (the API server's, the kubelet's). */
export function describeOutcome(outcome: Outcome, width = 110): string {
  const short = (text: string) => {
    const plain = text
      .replace(/^admission webhook "[^"]+" denied the request: /, "")
      .replace(/ \(pod: "[^"]+", container: [^)]+\)/, "");
    return plain.length > width ? `${plain.slice(0, width)}...` : plain;
  };
  switch (outcome.kind) {
    case "Succeeded":
    case "Running":
      return outcome.kind;
    case "Failed":
      return `Failed (${short(outcome.message.split("\n").pop() ?? "")})`;
    case "NotStarted":
      return `${outcome.reason} (${short(outcome.message)})`;
    case "Pending":
      return `Pending (${short(outcome.message)})`;
    case "Denied":
      return `denied: ${short(outcome.message)}`;
  }
}

/**
 * Creates the pods (as the admin, through every admission webhook) and waits until each has an
 * outcome. A pod refused at admission is "Denied" with the API server's message.
 */
export async function runPods(
  cluster: Cluster,
  pods: KubeObject[],
  waitFor: "completion" | "running" = "completion",
  timeoutMs = 90_000,
  /** Filled with each pod's admission warnings (what kubectl would print), by name. */
  warnings?: Map<string, string[]>,
): Promise<Map<string, Outcome>> {
  const outcomes = new Map<string, Outcome>();
  await Promise.all(
    pods.map(async pod => {
      const ns = pod.metadata!.namespace!;
      const res = await cluster.admin.create(`/api/v1/namespaces/${ns}/pods`, pod);
      warnings?.set(pod.metadata!.name!, res.warnings);
      if (res.status >= 300)
        outcomes.set(pod.metadata!.name!, {
          kind: "Denied",
          message: String((res.body as { message?: string }).message ?? res.text),
        });
    }),
  );
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const waiting = pods.filter(p => !outcomes.has(p.metadata!.name!));
    for (const pod of waiting) {
      const { namespace, name } = pod.metadata!;
      const stored = (await cluster.admin.get(`/api/v1/namespaces/${namespace}/pods/${name}`)).body;
      const outcome = outcomeOf(stored, waitFor);
      if (outcome) outcomes.set(name!, outcome);
      else if (Date.now() > deadline) {
        const conditions = ((stored as V1Pod).status?.conditions ?? [])
          .filter(c => c.status !== "True")
          .map(c => `${c.type}: ${c.reason ?? ""} ${c.message ?? ""}`.trim());
        outcomes.set(name!, {
          kind: "Pending",
          message: [(stored as V1Pod).status?.phase, ...conditions].filter(Boolean).join("; "),
        });
      }
    }
    if (pods.every(p => outcomes.has(p.metadata!.name!))) return outcomes;
    await new Promise(r => setTimeout(r, 500));
  }
}

/** A markdown table, printed by the suites so a reader sees the outcomes at a glance. */
export function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(" | ")} |`;
  return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}

/**
 * Frees the node for the next file: the namespaces' pods deleted at once (their CPU requests hold
 * the 2-core node until they are gone), then the namespaces.
 */
export async function removeNamespaces(cluster: Cluster, names: string[]): Promise<void> {
  for (const ns of names) {
    const pods = await cluster.admin.get(`/api/v1/namespaces/${ns}/pods`);
    for (const p of (pods.body.items as KubeObject[] | undefined) ?? [])
      await cluster.admin.raw(
        "DELETE",
        `/api/v1/namespaces/${ns}/pods/${p.metadata?.name}?gracePeriodSeconds=0`,
      );
    await cluster.admin.delete(`/api/v1/namespaces/${ns}`);
  }
}

/** The seeds' namespaces as their field reports describe them: the canary's enforces restricted and requires its component. */
export const seedNamespaces = (): KubeObject[] => [
  namespace("llama-index"),
  namespace("mlflow-prod"),
  namespace("gpt4-canary", {
    "pod-security.kubernetes.io/enforce": "restricted",
    "admission-guard.dev/require-component": "gpt4",
  }),
];

/** What the shared-memory job's workers put in /dev/shm together: 4 × 64 MiB. */
export const SHM_WORKERS = 4;
export const SHM_MIB_PER_WORKER = 64;

/**
 * A PyTorch DataLoader in shell: SHM_WORKERS worker processes of one pod each put a 64 MiB batch in
 * /dev/shm at once (256 MiB together, four times the runtime's own 64 MiB tmpfs), then the main
 * process reads every batch back. A write past the tmpfs' size fails with ENOSPC ("No space left
 * on device"), which the summary line names; PyTorch's workers die of the same as SIGBUS.
 */
export const SHM_SCRIPT = `
n=${SHM_WORKERS}; mib=${SHM_MIB_PER_WORKER}; bb=/bin/busybox
i=0; pids=""
while [ $i -lt $n ]; do
  $bb dd if=/dev/zero of=/dev/shm/batch.$i bs=1048576 count=$mib 2>/tmp/worker.$i &
  pids="$pids $!"; i=$((i+1))
done
failed=""; i=0
for p in $pids; do
  wait $p || failed="$failed worker$i: $($bb head -n 1 /tmp/worker.$i);"
  i=$((i+1))
done
total=$($bb cat /dev/shm/batch.* 2>/dev/null | $bb wc -c)
$bb df -m /dev/shm | $bb tail -n 1
if [ -n "$failed" ] || [ "$total" -ne $((n * mib * 1048576)) ]; then
  echo "probe failed: shm ($total bytes read back)$failed" | $bb tee /dev/termination-log; exit 1
fi
echo "shm ok: $n workers shared $((total / 1048576)) MiB" | $bb tee /dev/termination-log
`;

/** The shared-memory job: one pod (parallel workers inside it, as a DataLoader's), never retried. */
export function sharedMemoryJob(name: string, namespace: string, registry: string): KubeObject {
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: { name, namespace },
    spec: {
      backoffLimit: 0,
      template: {
        metadata: { labels: { app: "shm-loader" } },
        spec: {
          restartPolicy: "Never",
          containers: [
            {
              name: "loader",
              image: imageOf(registry, "nonroot-numeric"),
              imagePullPolicy: "IfNotPresent",
              command: ["sh", "-c", SHM_SCRIPT],
              terminationMessagePolicy: "FallbackToLogsOnError",
              // The batches are charged to this limit (tmpfs pages count in the memory cgroup).
              resources: { limits: { memory: "1Gi" } },
            },
          ],
        },
      },
    },
  };
}

/**
 * Creates a Job (as the admin, through every admission webhook) and waits until its pod has an
 * outcome: what runPods says of a pod, for the pod the Job made. Its admission warnings, and the
 * pod as it ran, come back too.
 */
export async function runJob(
  cluster: Cluster,
  job: KubeObject,
  timeoutMs = 90_000,
): Promise<{ outcome: Outcome; warnings: string[]; pod?: KubeObject }> {
  const { namespace: ns, name } = job.metadata!;
  const res = await cluster.admin.create(`/apis/batch/v1/namespaces/${ns}/jobs`, job);
  if (res.status >= 300)
    return {
      outcome: {
        kind: "Denied",
        message: String((res.body as { message?: string }).message ?? res.text),
      },
      warnings: res.warnings,
    };
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const pods = await cluster.admin.get(
      `/api/v1/namespaces/${ns}/pods?labelSelector=${encodeURIComponent(`job-name=${name}`)}`,
    );
    const pod = ((pods.body.items as KubeObject[] | undefined) ?? [])[0];
    const outcome = pod && outcomeOf(pod, "completion");
    if (outcome) return { outcome, warnings: res.warnings, pod };
    if (Date.now() > deadline) {
      const status = (await cluster.admin.get(`/apis/batch/v1/namespaces/${ns}/jobs/${name}`)).body
        .status;
      return {
        outcome: {
          kind: "Pending",
          message: pod
            ? `pod ${pod.metadata?.name} ${JSON.stringify((pod as V1Pod).status?.phase)}`
            : `no pod yet (job status ${JSON.stringify(status)})`,
        },
        warnings: res.warnings,
        pod,
      };
    }
    await new Promise(r => setTimeout(r, 500));
  }
}
