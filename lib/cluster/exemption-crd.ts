// The custom resources the module brings, and how they get into a cluster. The controller applies
// them when it starts (as Pepr applies its own PeprStore CRD), so `npx pepr deploy`, the Helm chart
// and `pepr dev` all carry them with no manifest of their own to keep in step. Pepr's scoped RBAC
// already lets the module's ServiceAccount create and patch CustomResourceDefinitions.
//
// The Exemption CRD (admission-guard.dev/v1alpha1) is ours: applied at every start. The PolicyReport
// CRD (wgpolicyk8s.io) that reports are written to is not: Kyverno, Kubewarden or Policy Reporter
// install and upgrade it, and a copy of ours in the way would break their installs. A cluster with
// none of them applies deploy/policyreport-crd.yaml (docs/reports.md).
import { K8s, kind } from "kubernetes-fluent-client";
import type { V1CustomResourceDefinition } from "@kubernetes/client-node";
import { describeError } from "./api-calls";
import { EXEMPTION_GVK } from "../exemptions";
import type { Logger } from "./watched-store";

const str = (description: string) => ({ type: "string", description });
const stringList = (description: string) => ({
  type: "array",
  items: { type: "string", minLength: 1 },
  description,
});

export const EXEMPTION_CRD: V1CustomResourceDefinition = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: {
    name: `${EXEMPTION_GVK.plural}.${EXEMPTION_GVK.group}`,
    labels: { "app.kubernetes.io/part-of": "admission-guard" },
  },
  spec: {
    group: EXEMPTION_GVK.group,
    scope: "Namespaced",
    names: {
      kind: EXEMPTION_GVK.kind,
      plural: EXEMPTION_GVK.plural,
      singular: "exemption",
      categories: ["admission-guard"],
    },
    versions: [
      {
        name: EXEMPTION_GVK.version,
        served: true,
        storage: true,
        additionalPrinterColumns: [
          { name: "Expires", type: "string", jsonPath: ".spec.expires" },
          { name: "Reason", type: "string", jsonPath: ".spec.reason" },
          { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
        ],
        schema: {
          openAPIV3Schema: {
            type: "object",
            description:
              "Waives named admission-guard rules for matching Pods and workloads. Counts only in the exemptions namespace (settings exemptions.namespace, default admission-guard-exemptions).",
            required: ["spec"],
            properties: {
              apiVersion: { type: "string" },
              kind: { type: "string" },
              metadata: { type: "object" },
              spec: {
                type: "object",
                required: ["reason", "expires", "match", "waive"],
                properties: {
                  reason: { ...str("Why the workload needs what the rules forbid."), minLength: 1 },
                  expires: {
                    ...str(
                      "When the Exemption stops counting (RFC 3339), at most exemptions.maxLifetimeDays away.",
                    ),
                    format: "date-time",
                  },
                  match: {
                    type: "object",
                    description:
                      "Which Pods and workloads: every given field must match (a workload by its name and its pod template's labels).",
                    required: ["namespaces"],
                    properties: {
                      namespaces: { ...stringList("Their namespaces."), minItems: 1 },
                      names: stringList(
                        "Their names; * matches any run of characters (nvidia-driver* matches the DaemonSet nvidia-driver and its pods).",
                      ),
                      selector: {
                        type: "object",
                        description: "A label selector over the pod's (the pod template's) labels.",
                        properties: {
                          matchLabels: {
                            type: "object",
                            additionalProperties: { type: "string" },
                          },
                          matchExpressions: {
                            type: "array",
                            items: {
                              type: "object",
                              required: ["key", "operator"],
                              properties: {
                                key: { type: "string" },
                                operator: {
                                  type: "string",
                                  enum: ["In", "NotIn", "Exists", "DoesNotExist"],
                                },
                                values: { type: "array", items: { type: "string" } },
                              },
                            },
                          },
                        },
                      },
                    },
                  },
                  waive: {
                    type: "array",
                    minItems: 1,
                    description: "The capabilities and rules waived.",
                    items: {
                      type: "object",
                      required: ["capability"],
                      properties: {
                        capability: str(
                          "A capability of the module: security-context, image-registry, ...",
                        ),
                        rules: {
                          ...stringList(
                            "Rules of that capability, as denials name them; leave out to waive every rule and skip its fixes.",
                          ),
                          minItems: 1,
                        },
                      },
                    },
                  },
                },
              },
            },
          },
        },
      },
    ],
  },
};

/** Applies the Exemption CRD, retrying while the API server cannot be reached. */
export async function installExemptionCrd(log: Logger, attempts = 10): Promise<boolean> {
  for (let attempt = 1; attempt <= attempts; attempt++) {
    try {
      await K8s(kind.CustomResourceDefinition).Apply(EXEMPTION_CRD, { force: true });
      log.info({ crd: EXEMPTION_CRD.metadata!.name }, "CRD applied");
      return true;
    } catch (e) {
      log.warn(
        { crd: EXEMPTION_CRD.metadata!.name, attempt, error: describeError(e) },
        "could not apply the CRD; Exemptions do not count until it exists",
      );
      await new Promise(r => setTimeout(r, Math.min(30_000, 1000 * 2 ** attempt)));
    }
  }
  return false;
}
