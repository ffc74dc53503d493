// The exemptions section of the settings (lib/settings composes it).
import * as z from "zod";
import { namespaceName } from "../objects/names";

export const ExemptionsSettingsSchema = z
  .strictObject({
    /** Exemptions count (off: every violation stands, whatever Exemptions exist). */
    enabled: z.boolean().default(true),
    /**
     * The one namespace whose Exemptions count: whoever may write there grants them (RBAC), never
     * the author of the workload. An Exemption anywhere else is refused at admission.
     */
    namespace: namespaceName.default("admission-guard-exemptions"),
    /** The longest an Exemption may last, from when it is written to its spec.expires. */
    maxLifetimeDays: z.number().int().min(1).max(3650).default(90),
  })
  .prefault({});

export type ExemptionsSettings = z.infer<typeof ExemptionsSettingsSchema>;
