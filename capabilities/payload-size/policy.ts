// The payload-size policy (pure; index.ts is its Pepr capability): oversize objects and runaway env/volume/annotation counts, on Pods, workloads,
// ConfigMaps and Secrets (CREATE and UPDATE). Limits: settings.payload.
import type { PolicyRules } from "../../lib/engine/policy";
import { CAPABILITY, checkGangPayload, checkPayload } from "./rules";

export const payloadSizeRules: PolicyRules = {
  name: CAPABILITY,
  switchedBy: "payload",
  rules: [
    "object-too-large",
    "annotations-too-large",
    "too-many-env",
    "too-many-env-from",
    "too-many-volumes",
    "too-many-projected-sources",
    "too-many-volume-mounts",
  ],
  description:
    "Denies oversize objects and runaway env, volume and annotation counts, naming the biggest parts",
  check: (object, target, ctx) => checkPayload(object, target, ctx),
  checkGang: (object, roles, ctx) => checkGangPayload(object, roles, ctx),
};
