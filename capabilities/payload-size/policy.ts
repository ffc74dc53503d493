// The payload-size policy (pure; index.ts is its Pepr capability): oversize objects and runaway env/volume/annotation counts, on Pods, workloads,
// ConfigMaps and Secrets (CREATE and UPDATE). Limits: settings.payload.
import { CONFIG_MAP, SECRET, type Policy } from "../../lib/engine/policy";
import { CAPABILITY, checkGangPayload, checkPayload } from "./rules";

export const payloadSizePolicy: Policy = {
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
  extraKinds: [CONFIG_MAP, SECRET],
  check: (object, target, ctx) => checkPayload(object, target, ctx),
  checkGang: (object, roles, ctx) => checkGangPayload(object, roles, ctx),
};
