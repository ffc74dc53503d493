// The capabilities of the module, in the order they run: fixes in this order on Pod CREATE, then
// every check. Add yours with one line (see hello-pepr.ts). Pure: the webhook (pepr.ts) and the
// offline `check` (cli/check.ts) both take this list, so they always run the same rules.
import type { Policy } from "../lib/policy";
import { helloPepr } from "../hello-pepr";
import { imageRegistryPolicy } from "./image-registry";
import { labelsPolicy } from "./labels";
import { payloadSizePolicy } from "./payload-size";
import { resourceQuotaPolicy } from "./resource-quota";
import { securityContextPolicy } from "./security-context";
import { serviceAccountPolicy } from "./service-account";

export const policies: Policy[] = [
  // Mirrors first, so the registry check sees the rewritten image.
  imageRegistryPolicy,
  securityContextPolicy,
  labelsPolicy,
  serviceAccountPolicy,
  resourceQuotaPolicy,
  payloadSizePolicy,
  helloPepr,
];
