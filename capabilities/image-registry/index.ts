// image-registry as a Pepr capability: images come from allowed registries (settings.registries,
// narrowed per namespace by the admission-guard.dev/allowed-registries annotation); mirrors rewrite
// images on Pod CREATE. The rules are in rules.ts, the policy `check` runs in policy.ts.
import { Capability } from "pepr";
import { bindPolicy } from "../../lib/pepr/adapter";
import { imageRegistryPolicy } from "./policy";

export const ImageRegistry = new Capability({
  name: imageRegistryPolicy.name,
  description: imageRegistryPolicy.description,
});
// Its bindings, as the module's one declaration of what runs where says (lib/engine/routes.ts).
// A new pod's images are rewritten to their mirrors (a Mutate on Pod CREATE, first of all the
// areas, so every other capability sees the image the kubelet will pull); its checks run in the
// shared validation (capabilities/pods, capabilities/workloads).
bindPolicy(ImageRegistry, imageRegistryPolicy);
