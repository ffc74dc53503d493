// Minimal CustomResourceDefinitions written by the project for the ML kinds the tests apply: a
// structural schema whose spec and status keep unknown fields (the real ones are large), served in
// the versions the fixtures use, with a status subresource as the operators have. No operator
// runs: the API server stores the objects, and admission is what is tested.
import type { KubeObject } from "../../../lib/objects/pod";
import { eventually } from "../../support/wait";
import { applyObjects, type Cluster } from "./cluster";

export interface CrdKind {
  group: string;
  kind: string;
  plural: string;
  version: string;
}

export const ML_CRDS: CrdKind[] = [
  { group: "kubeflow.org", kind: "PyTorchJob", plural: "pytorchjobs", version: "v1" },
  { group: "ray.io", kind: "RayCluster", plural: "rayclusters", version: "v1" },
  { group: "jobset.x-k8s.io", kind: "JobSet", plural: "jobsets", version: "v1alpha2" },
  {
    group: "leaderworkerset.x-k8s.io",
    kind: "LeaderWorkerSet",
    plural: "leaderworkersets",
    version: "v1",
  },
];

export function minimalCrd(k: CrdKind): KubeObject {
  const open = { type: "object", "x-kubernetes-preserve-unknown-fields": true };
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${k.plural}.${k.group}` },
    spec: {
      group: k.group,
      scope: "Namespaced",
      names: {
        kind: k.kind,
        plural: k.plural,
        singular: k.kind.toLowerCase(),
        listKind: `${k.kind}List`,
      },
      versions: [
        {
          name: k.version,
          served: true,
          storage: true,
          subresources: { status: {} },
          schema: {
            openAPIV3Schema: {
              type: "object",
              properties: {
                apiVersion: { type: "string" },
                kind: { type: "string" },
                metadata: { type: "object" },
                spec: open,
                status: open,
              },
            },
          },
        },
      ],
    },
  };
}

/** Applies the CRDs and waits until the API server serves each (Established). */
export async function installCrds(cluster: Cluster, kinds: CrdKind[]): Promise<void> {
  await applyObjects(cluster, kinds.map(minimalCrd));
  for (const k of kinds)
    await eventually(async () => {
      const res = await cluster.admin.get(`/apis/${k.group}/${k.version}`);
      expect(res.status).toBe(200);
      expect(JSON.stringify(res.body)).toContain(`"${k.plural}"`);
    }, 30_000);
}
