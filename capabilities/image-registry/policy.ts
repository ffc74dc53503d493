// The image-registry policy (pure; index.ts is its Pepr capability): images come from allowed registries (settings.registries, narrowed per namespace
// by the admission-guard.dev/allowed-registries annotation); mirrors rewrite images on Pod CREATE.
// Runs first (capabilities/index.ts) so every later check sees the mirrored image.
import type { PolicyRules } from "../../lib/engine/policy";
import { CAPABILITY, checkImages, rewriteToMirrors } from "./rules";

export const imageRegistryRules: PolicyRules = {
  name: CAPABILITY,
  switchedBy: "registries",
  rules: ["invalid-reference", "registry-not-allowed", "digest-required", "latest-forbidden"],
  description: "Only images from allowed registries; optional mirrors rewrite images",
  fix: (target, ctx) => rewriteToMirrors(target, ctx),
  check: (_object, target, ctx) => checkImages(target, ctx),
};
