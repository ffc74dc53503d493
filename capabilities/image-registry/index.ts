// image-registry as a Pepr capability: images come from allowed registries (settings.registries,
// narrowed per namespace by the admission-guard.dev/allowed-registries annotation); mirrors rewrite
// images on Pod CREATE. The rules are in rules.ts, the policy `check` runs in policy.ts.
import { Capability, a } from "pepr";
import { policyActions } from "../../lib/pepr-adapter";
import { imageRegistryPolicy } from "./policy";

export const ImageRegistry = new Capability({
  name: imageRegistryPolicy.name,
  description: imageRegistryPolicy.description,
});
const { When } = ImageRegistry;
const { mutatePod } = policyActions(ImageRegistry, imageRegistryPolicy);

// A new pod's images are rewritten to their mirrors, first of all the areas, so every other
// capability sees the image the kubelet will pull.
When(a.Pod).IsCreated().Mutate(mutatePod);
// Its checks on Pods run with every area's in the shared Pod validation (capabilities/pods).
