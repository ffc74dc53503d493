// The benchmarks' cluster: realistic objects as the API server stores them, built from an index so
// that any size can be made without keeping them (bench/reports.ts at 10,000 pods in 50 namespaces;
// bench/scale.ts up to 100,000 pods and 15,000 nodes).
//
//  - Pods: Running, two containers with env, ports, resources, a readiness probe, volume mounts,
//    labels, an owner, managedFields and a full status (~5 KiB of JSON). 70% as the module leaves
//    them, 10% each privileged, an image from a registry outside registries.allowed, and no
//    securityContext at all on the default ServiceAccount (shapeOf).
//  - Nodes: as a GPU cluster's kubelets report them (~12 KiB of JSON): ~20 labels, 50
//    status.images, five conditions, capacity/allocatable with nvidia.com/gpu, a GPU taint, node
//    info, managedFields. Three in four are GPU nodes.
//  - Namespaces, ServiceAccounts, ResourceQuotas, LimitRanges, and a Deployment whose template asks
//    for a GPU (judged by node fit against every node).
import type { KubeObject } from "../lib/objects/pod";

/** How the objects spread: pod i lives in namespace i % namespaces and runs on node i % nodes. */
export interface Layout {
  namespaces: number;
  nodes: number;
}

export type Shape = "fixed" | "privileged" | "registry" | "unfixed";

export const uidOf = (prefix: string, i: number) =>
  `${prefix}-0000-4000-8000-${i.toString(16).padStart(12, "0")}`;
export const HOUR_AGO = new Date(Date.now() - 3600_000).toISOString();
// The client's types say Date; the wire (and the stand-in) say an RFC 3339 string.
const asDate = (s: string) => s as unknown as Date;

const padded = (n: number, count: number) =>
  String(n).padStart(Math.max(2, String(count - 1).length), "0");

/** The builders for one layout. */
export function clusterOf(layout: Layout) {
  const { namespaces, nodes } = layout;
  const nsName = (n: number) => `team-${padded(n, namespaces)}`;
  const nodeName = (n: number) => `node-${padded(n, nodes)}`;

  /** 70% fixed, 10% each violation. */
  const shapeOf = (i: number): Shape =>
    (
      [
        "fixed",
        "fixed",
        "fixed",
        "fixed",
        "fixed",
        "fixed",
        "fixed",
        "privileged",
        "registry",
        "unfixed",
      ] as const
    )[Math.floor(i / namespaces) % 10];

  /** A Running pod as the API server stores it: pod `i` of namespace i % namespaces. */
  function makePod(i: number, shape: Shape = shapeOf(i), generation = 0): KubeObject {
    const namespace = nsName(i % namespaces);
    const app = `model-${Math.floor(i / namespaces) % 20}`;
    const suffix = (i * 2654435761 + generation * 97).toString(36).slice(-5).padStart(5, "x");
    const name = `${app}-5d8f7c9b4${generation ? `-r${generation}` : ""}-${suffix}`;
    const uid = uidOf(generation ? `1${String(generation).padStart(7, "0")}` : "00000001", i);
    const restricted = shape !== "unfixed" && shape !== "privileged";
    const image =
      shape === "registry" ? "docker.io/library/python:3.11-slim" : `ghcr.io/org/${app}:1.4.2`;
    const created = generation ? new Date().toISOString() : HOUR_AGO;
    const time = HOUR_AGO;
    const stamp = asDate(time);
    return {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name,
        generateName: `${app}-5d8f7c9b4-`,
        namespace,
        uid,
        creationTimestamp: asDate(created),
        labels: {
          app,
          "app.kubernetes.io/name": app,
          "app.kubernetes.io/component": "inference",
          "app.kubernetes.io/part-of": "ml-platform",
          "app.kubernetes.io/version": "1.4.2",
          "pod-template-hash": "5d8f7c9b4",
        },
        annotations: {
          "prometheus.io/scrape": "true",
          "prometheus.io/port": "8080",
          ...(restricted
            ? {
                "admission-guard.dev/fixed":
                  "security-context/runAsNonRoot,security-context/seccompProfile",
              }
            : {}),
        },
        ownerReferences: [
          {
            apiVersion: "apps/v1",
            kind: "ReplicaSet",
            name: `${app}-5d8f7c9b4`,
            uid: uidOf("0000000c", i % 1000),
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
        managedFields: [
          {
            manager: "kube-controller-manager",
            operation: "Update",
            apiVersion: "v1",
            time: stamp,
            fieldsType: "FieldsV1",
            fieldsV1: {
              "f:metadata": { "f:generateName": {}, "f:labels": { ".": {}, "f:app": {} } },
              "f:spec": { "f:containers": { 'k:{"name":"serve"}': { ".": {}, "f:image": {} } } },
            },
          },
          {
            manager: "kubelet",
            operation: "Update",
            apiVersion: "v1",
            time: stamp,
            fieldsType: "FieldsV1",
            fieldsV1: {
              "f:status": { "f:conditions": {}, "f:containerStatuses": {}, "f:phase": {} },
            },
            subresource: "status",
          },
        ],
      },
      spec: {
        ...podSpec(app, image, shape),
        nodeName: nodeName(i % nodes),
      },
      status: podStatus(i, time, 0),
    };
  }

  function podStatus(i: number, time: string, restarts: number) {
    const node = i % nodes;
    const hostIP = `192.168.${Math.floor(node / 250)}.${(node % 250) + 2}`;
    const ip = `10.${64 + Math.floor(node / 256)}.${node % 256}.${(i % 250) + 2}`;
    return {
      phase: "Running",
      conditions: [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
      ].map(type => ({ type, status: "True", lastProbeTime: null, lastTransitionTime: time })),
      hostIP,
      hostIPs: [{ ip: hostIP }],
      podIP: ip,
      podIPs: [{ ip }],
      startTime: HOUR_AGO,
      qosClass: "Guaranteed",
      containerStatuses: ["serve", "metrics"].map(name => ({
        name,
        ready: true,
        started: true,
        restartCount: restarts,
        image: `ghcr.io/org/${name}:1`,
        imageID: `ghcr.io/org/${name}@sha256:${"0123456789abcdef".repeat(4)}`,
        containerID: `containerd://${(i * 31 + name.length).toString(16).padStart(64, "0")}`,
        state: { running: { startedAt: time } },
        lastState: {},
      })),
    };
  }

  /** The same pod after a status update: a probe flipped, a restart counted, a new resourceVersion. */
  function statusUpdate(pod: KubeObject, i: number): KubeObject {
    return {
      ...pod,
      metadata: { ...pod.metadata, resourceVersion: String(100_000 + i) },
      status: podStatus(i, new Date().toISOString(), 1),
    };
  }

  return { nsName, nodeName, shapeOf, makePod, statusUpdate };
}

function container(
  app: string,
  c: string,
  image: string,
  cpu: string,
  memory: string,
  shape: Shape,
) {
  const restricted = shape !== "unfixed" && shape !== "privileged";
  const securityContext = restricted
    ? {
        allowPrivilegeEscalation: false,
        capabilities: { drop: ["ALL"] },
        readOnlyRootFilesystem: true,
      }
    : shape === "privileged"
      ? { privileged: true }
      : undefined;
  return {
    name: c,
    image,
    imagePullPolicy: "IfNotPresent",
    args: ["--config", "/etc/model/config.yaml", "--port", "8080"],
    env: [
      { name: "MODEL_NAME", value: app },
      { name: "LOG_LEVEL", value: "info" },
      { name: "OMP_NUM_THREADS", value: "4" },
      { name: "MLFLOW_TRACKING_URI", value: "http://mlflow.mlflow.svc:5000" },
      {
        name: "POD_NAME",
        valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.name" } },
      },
      {
        name: "POD_NAMESPACE",
        valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" } },
      },
    ],
    ports: [{ name: "http", containerPort: 8080, protocol: "TCP" }],
    resources: { requests: { cpu, memory }, limits: { cpu, memory } },
    readinessProbe: {
      httpGet: { path: "/ready", port: 8080, scheme: "HTTP" },
      periodSeconds: 10,
      timeoutSeconds: 1,
      successThreshold: 1,
      failureThreshold: 3,
    },
    volumeMounts: [
      { name: "config", mountPath: "/etc/model", readOnly: true },
      { name: "tmp", mountPath: "/tmp" },
    ],
    terminationMessagePath: "/dev/termination-log",
    terminationMessagePolicy: "File",
    ...(securityContext ? { securityContext } : {}),
  };
}

/** A pod's spec (without nodeName): two containers, two volumes, the API server's defaults. */
export function podSpec(app: string, image: string, shape: Shape) {
  const restricted = shape !== "unfixed" && shape !== "privileged";
  return {
    ...(restricted
      ? {
          securityContext: {
            runAsNonRoot: true,
            runAsUser: 1000,
            seccompProfile: { type: "RuntimeDefault" },
          },
        }
      : { securityContext: {} }),
    serviceAccountName: shape === "unfixed" ? "default" : "workload",
    serviceAccount: shape === "unfixed" ? "default" : "workload",
    automountServiceAccountToken: false,
    containers: [
      container(app, "serve", image, "2", "4Gi", shape),
      container(app, "metrics", "ghcr.io/org/exporter:0.9.1", "100m", "128Mi", shape),
    ],
    volumes: [
      { name: "config", configMap: { name: `${app}-config`, defaultMode: 420 } },
      { name: "tmp", emptyDir: {} },
    ],
    restartPolicy: "Always",
    terminationGracePeriodSeconds: 30,
    dnsPolicy: "ClusterFirst",
    schedulerName: "default-scheduler",
    enableServiceLinks: true,
    preemptionPolicy: "PreemptLowerPriority",
    priority: 0,
    tolerations: [
      {
        key: "node.kubernetes.io/not-ready",
        operator: "Exists",
        effect: "NoExecute",
        tolerationSeconds: 300,
      },
      {
        key: "node.kubernetes.io/unreachable",
        operator: "Exists",
        effect: "NoExecute",
        tolerationSeconds: 300,
      },
    ] as Record<string, unknown>[],
  };
}

/** A team's namespace; every fifth is in audit mode, every fifth in warn (n % 5 = 1, 2). */
export function namespaceObject(name: string, n: number): KubeObject {
  const mode = n % 5 === 1 ? "audit" : n % 5 === 2 ? "warn" : undefined;
  return {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: {
      name,
      uid: uidOf("0000000a", n),
      labels: {
        "kubernetes.io/metadata.name": name,
        "app.kubernetes.io/part-of": "ml-platform",
        ...(mode ? { "admission-guard.dev/mode": mode } : {}),
      },
    },
    spec: { finalizers: ["kubernetes"] },
    status: { phase: "Active" },
  };
}

export function serviceAccountObject(namespace: string, name: string): KubeObject {
  return {
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: {
      name,
      namespace,
      ...(name === "default"
        ? {}
        : { labels: { "app.kubernetes.io/managed-by": "admission-guard" } }),
    },
  };
}

export function resourceQuotaObject(namespace: string): KubeObject {
  return {
    apiVersion: "v1",
    kind: "ResourceQuota",
    metadata: { name: "compute", namespace },
    spec: { hard: { "requests.cpu": "400", "requests.memory": "1600Gi", pods: "500" } },
    status: {
      hard: { "requests.cpu": "400", "requests.memory": "1600Gi", pods: "500" },
      used: { "requests.cpu": "110", "requests.memory": "220Gi", pods: "200" },
    },
  };
}

export function limitRangeObject(namespace: string): KubeObject {
  return {
    apiVersion: "v1",
    kind: "LimitRange",
    metadata: { name: "defaults", namespace },
    spec: {
      limits: [
        {
          type: "Container",
          default: { cpu: "1", memory: "1Gi" },
          defaultRequest: { cpu: "250m", memory: "512Mi" },
        },
      ],
    },
  };
}

/** The images a node has pulled: 50 of a pool of 200, a different mix on each node. */
const IMAGE_POOL = Array.from({ length: 200 }, (_, k) => {
  const repo = [
    "nvcr.io/nvidia/pytorch",
    "nvcr.io/nvidia/tritonserver",
    "ghcr.io/org/model-serve",
    "registry.internal/ml/trainer",
    "nvcr.io/nvidia/k8s-device-plugin",
    "registry.k8s.io/kube-proxy",
    "docker.io/rayproject/ray-ml",
    "ghcr.io/org/exporter",
  ][k % 8];
  const digest = Array.from({ length: 8 }, (_, w) =>
    ((k + 1) * 2654435761 * (w + 3)).toString(16).slice(-8).padStart(8, "0"),
  ).join("");
  return {
    names: [`${repo}@sha256:${digest}`, `${repo}:${24 + (k % 5)}.${k % 12}-py3`],
    sizeBytes: 400_000_000 + k * 37_000_123,
  };
});

/** Node n as its kubelet reports it (three in four with GPUs, tainted for GPU pods only). */
export function nodeObject(name: string, n: number): KubeObject {
  const gpu = n % 4 !== 3;
  const zone = `eu-west-1${"abc"[n % 3]}`;
  const instance = gpu ? (n % 8 < 4 ? "p4d.24xlarge" : "g5.12xlarge") : "m6i.16xlarge";
  const gpus = instance === "p4d.24xlarge" ? "8" : gpu ? "4" : undefined;
  const ip = `192.168.${Math.floor(n / 250)}.${(n % 250) + 2}`;
  const time = asDate(HOUR_AGO);
  const condition = (type: string, status: string, reason: string, message: string) => ({
    type,
    status,
    lastHeartbeatTime: time,
    lastTransitionTime: time,
    reason,
    message,
  });
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name,
      uid: uidOf("0000000b", n),
      creationTimestamp: time,
      labels: {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/instance-type": instance,
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": instance,
        "topology.kubernetes.io/region": "eu-west-1",
        "topology.kubernetes.io/zone": zone,
        "failure-domain.beta.kubernetes.io/region": "eu-west-1",
        "failure-domain.beta.kubernetes.io/zone": zone,
        "karpenter.sh/capacity-type": n % 5 === 0 ? "spot" : "on-demand",
        "karpenter.sh/nodepool": gpu ? "gpu" : "system",
        ...(gpu
          ? {
              "nvidia.com/gpu.present": "true",
              "nvidia.com/gpu.product": instance === "p4d.24xlarge" ? "A100-SXM4-40GB" : "A10G",
              "nvidia.com/gpu.count": gpus!,
              "nvidia.com/cuda.driver.major": "550",
              "nvidia.com/mig.capable": String(instance === "p4d.24xlarge"),
              "feature.node.kubernetes.io/pci-10de.present": "true",
            }
          : {}),
      },
      annotations: {
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        "csi.volume.kubernetes.io/nodeid": `{"ebs.csi.aws.com":"i-0${(n * 7919).toString(16).padStart(16, "0")}"}`,
      },
      managedFields: [
        {
          manager: "kubelet",
          operation: "Update",
          apiVersion: "v1",
          time,
          fieldsType: "FieldsV1",
          fieldsV1: {
            "f:metadata": { "f:labels": { ".": {}, "f:kubernetes.io/hostname": {} } },
            "f:status": { "f:conditions": {}, "f:images": {}, "f:nodeInfo": {} },
          },
          subresource: "status",
        },
      ],
    },
    spec: {
      podCIDR: `10.${64 + Math.floor(n / 256)}.${n % 256}.0/24`,
      providerID: `aws:///${zone}/i-0${(n * 7919).toString(16).padStart(16, "0")}`,
      ...(gpu
        ? { taints: [{ key: "nvidia.com/gpu", value: "present", effect: "NoSchedule" }] }
        : {}),
    },
    status: {
      capacity: {
        cpu: "96",
        "ephemeral-storage": "524275692Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        memory: "1176000000Ki",
        pods: "250",
        ...(gpus ? { "nvidia.com/gpu": gpus } : {}),
      },
      allocatable: {
        cpu: "95690m",
        "ephemeral-storage": "482098796357",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        memory: "1168000000Ki",
        pods: "250",
        ...(gpus ? { "nvidia.com/gpu": gpus } : {}),
      },
      conditions: [
        condition(
          "MemoryPressure",
          "False",
          "KubeletHasSufficientMemory",
          "kubelet has sufficient memory available",
        ),
        condition(
          "DiskPressure",
          "False",
          "KubeletHasNoDiskPressure",
          "kubelet has no disk pressure",
        ),
        condition(
          "PIDPressure",
          "False",
          "KubeletHasSufficientPID",
          "kubelet has sufficient PID available",
        ),
        condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        condition("NetworkUnavailable", "False", "RouteCreated", "RouteController created a route"),
      ],
      addresses: [
        { type: "InternalIP", address: ip },
        { type: "InternalDNS", address: `ip-${ip.replace(/\./g, "-")}.eu-west-1.compute.internal` },
        { type: "Hostname", address: `ip-${ip.replace(/\./g, "-")}.eu-west-1.compute.internal` },
      ],
      daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
      nodeInfo: {
        machineID: (n * 2654435761).toString(16).padStart(32, "0"),
        systemUUID: uidOf("ec2", n),
        bootID: uidOf("b0", n),
        kernelVersion: "5.10.219-208.866.amzn2.x86_64",
        osImage: "Amazon Linux 2",
        containerRuntimeVersion: "containerd://1.7.11",
        kubeletVersion: "v1.32.1-eks-5d632ec",
        kubeProxyVersion: "v1.32.1-eks-5d632ec",
        operatingSystem: "linux",
        architecture: "amd64",
      },
      images: Array.from({ length: 50 }, (_, k) => IMAGE_POOL[(n * 7 + k * 3) % IMAGE_POOL.length]),
    },
  };
}

/**
 * The namespace's GPU trainer: a Deployment whose template asks for one GPU and tolerates the GPU
 * taint, as the API server stores it (the scan judges it by node fit against every node).
 */
export function deploymentObject(namespace: string, n: number): KubeObject {
  const app = "trainer";
  const spec = podSpec(app, `ghcr.io/org/${app}:2.1.0`, "fixed");
  spec.containers[0].resources = {
    requests: { cpu: "8", memory: "64Gi", "nvidia.com/gpu": "1" },
    limits: { cpu: "8", memory: "64Gi", "nvidia.com/gpu": "1" },
  } as (typeof spec.containers)[0]["resources"];
  spec.tolerations.push({ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" });
  const labels = { app, "app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "ml-platform" };
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: {
      name: app,
      namespace,
      uid: uidOf("0000000d", n),
      generation: 3,
      labels,
      annotations: { "deployment.kubernetes.io/revision": "3" },
    },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app } },
      template: {
        metadata: {
          labels: { ...labels },
          annotations: {
            "admission-guard.dev/fixed":
              "security-context/runAsNonRoot,security-context/seccompProfile",
          },
        },
        spec: { ...spec, nodeSelector: { "nvidia.com/gpu.present": "true" } },
      },
      strategy: {
        type: "RollingUpdate",
        rollingUpdate: { maxUnavailable: "25%", maxSurge: "25%" },
      },
      revisionHistoryLimit: 10,
      progressDeadlineSeconds: 600,
    },
    status: {
      observedGeneration: 3,
      replicas: 2,
      updatedReplicas: 2,
      readyReplicas: 2,
      availableReplicas: 2,
      conditions: [
        { type: "Available", status: "True", reason: "MinimumReplicasAvailable" },
        { type: "Progressing", status: "True", reason: "NewReplicaSetAvailable" },
      ],
    },
  };
}
