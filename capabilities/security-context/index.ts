import type { Policy } from "../../lib/policy";

export const securityContextPolicy: Policy = {
  name: "security-context",
  description:
    "Pod Security Standards restricted: fills unset securityContext fields, denies what cannot be fixed",
};
