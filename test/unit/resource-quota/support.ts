// The objects the resource-quota tests build: containers with resources, quotas with their
// usage, nodes with their allocatable.
import type { V1Node, V1ResourceQuota } from "@kubernetes/client-node";

export type Res = { requests?: Record<string, string>; limits?: Record<string, string> };

export const container = (name: string, resources: Res, extra: Record<string, unknown> = {}) => ({
  name,
  image: "registry.example/train:1",
  resources,
  ...extra,
});

/** A quota of `namespace`; `used` undefined: the quota controller has not counted it yet. */
export const resourceQuota = (
  namespace: string,
  name: string,
  hard: Record<string, string>,
  used?: Record<string, string>,
  spec: Record<string, unknown> = {},
): V1ResourceQuota => ({
  apiVersion: "v1",
  kind: "ResourceQuota",
  metadata: { name, namespace },
  spec: { hard, ...spec },
  status: used ? { hard, used } : undefined,
});

export const node = (
  name: string,
  allocatable: Record<string, string>,
  spec: Record<string, unknown> = {},
  labels: Record<string, string> = {},
): V1Node => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: { name, labels: { "kubernetes.io/hostname": name, ...labels } },
  spec,
  status: { allocatable },
});
