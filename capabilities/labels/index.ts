import type { Policy } from "../../lib/policy";

export const labelsPolicy: Policy = {
  name: "labels",
  description:
    "Carries the app label to app.kubernetes.io/component; a namespace may require the component label",
};
