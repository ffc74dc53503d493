import type { Policy } from "../../lib/policy";

export const payloadSizePolicy: Policy = {
  name: "payload-size",
  description:
    "Denies oversize objects and runaway env, volume and annotation counts, naming the biggest parts",
};
