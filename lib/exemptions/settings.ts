// The exemptions section of the settings (lib/settings composes it).
import * as z from "zod/mini";
import "../objects/zod-messages";
import { namespaceName } from "../objects/names";

export const ExemptionsSettingsSchema = z.prefault(
  z.strictObject({
    /** Exemptions count (off: every violation stands, whatever Exemptions exist). */
    enabled: z._default(z.boolean(), true),
    /**
     * The one namespace whose Exemptions count: whoever may write there grants them (RBAC), never
     * the author of the workload. An Exemption anywhere else is refused at admission.
     */
    namespace: z._default(namespaceName, "admission-guard-exemptions"),
    /** The longest an Exemption may last, from when it is written to its spec.expires. */
    maxLifetimeDays: z._default(z.int().check(z.gte(1), z.lte(3650)), 90),
  }),
  {},
);

export type ExemptionsSettings = z.infer<typeof ExemptionsSettingsSchema>;
