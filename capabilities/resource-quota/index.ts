import type { Policy } from "../../lib/policy";

export const resourceQuotaPolicy: Policy = {
  name: "resource-quota",
  description:
    "Denies early, with the numbers, pods and workloads that exceed the namespace quota or fit no node",
};
