import type { Policy } from "../../lib/policy";

export const serviceAccountPolicy: Policy = {
  name: "service-account",
  description:
    "Moves pods off the default ServiceAccount to a dedicated one; checks the ServiceAccount may read the secrets the pod uses",
};
