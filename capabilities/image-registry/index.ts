// image-registry as a Pepr capability: images come from allowed registries (settings.registries,
// narrowed per namespace by the admission-guard.dev/allowed-registries annotation); mirrors rewrite
// images. The rules are in rules.ts and policy.ts.
import { policyOf } from "../../lib/engine/policy";
import { capabilityOf } from "../../lib/pepr/adapter";
import { imageRegistryRules } from "./policy";

export const imageRegistryPolicy = policyOf(imageRegistryRules, {
  // A new pod's images rewritten to their mirrors, first of every capability (capabilities/index.ts),
  // so the others see the image the kubelet will pull; a workload's own template with
  // workloads.mutate.
  fix: { pods: ["CREATE"], templates: ["CREATE", "UPDATE"] },
  // Every image of a pod as it will be stored, or of a workload's pods as they will be, from an
  // allowed registry.
  check: { pods: ["CREATE", "UPDATE"], templates: ["CREATE", "UPDATE"] },
});

export const ImageRegistry = capabilityOf(imageRegistryPolicy);
