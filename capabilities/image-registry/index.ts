import type { Policy } from "../../lib/policy";

export const imageRegistryPolicy: Policy = {
  name: "image-registry",
  description: "Only images from allowed registries; optional mirrors rewrite images",
};
