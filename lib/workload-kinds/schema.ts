// The setting workloads.kinds, validated: every path parses, counts are whole numbers, and a kind
// is named once. A bad entry is a named error at start (and at build), never a skip per request.
import * as z from "zod/mini";
import "../objects/zod-messages";
import { groupOf, kindName } from "./kind-spec";
import { parsePath } from "./paths";
import { BUILT_IN_KIND_NAMES } from "./table";

const path = z.string().check(
  z.superRefine((p, ctx) => {
    const parsed = parsePath(p);
    if (!parsed.ok) ctx.addIssue({ code: "custom", message: parsed.reason });
  }),
);

const countTerm = z.union([
  path,
  z.strictObject({
    path,
    default: z.optional(z.int().check(z.gte(0))),
    minus: z.optional(z.int().check(z.gte(0))),
    min: z.optional(path),
    max: z.optional(path),
  }),
]);

const templateSpec = z.strictObject({
  template: path,
  role: z.optional(z.string().check(z.minLength(1))),
  name: z.optional(path),
  replicas: z.optional(z.array(countTerm)),
  atMost: z.optional(z.array(countTerm)),
  ifAbsent: z.optional(path),
  ifPresent: z.optional(path),
});

export const WorkloadKindsSchema = z
  .array(
    z.strictObject({
      apiVersion: z
        .string()
        .check(
          z.regex(
            /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?\/[a-z0-9]+$/,
            "must be group/version, e.g. example.com/v1 (a custom resource's group)",
          ),
        ),
      kind: z.string().check(z.regex(/^[A-Z][A-Za-z0-9]*$/, "must be a kind, e.g. TrainingRun")),
      plural: z.optional(
        z
          .string()
          .check(
            z.regex(
              /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/,
              "must be a resource name, e.g. trainingruns",
            ),
          ),
      ),
      suspend: z.optional(path),
      templates: z.array(templateSpec).check(z.minLength(1, "a kind needs at least one template")),
    }),
  )
  .check(
    z.superRefine((kinds, ctx) => {
      const seen = new Set<string>();
      kinds.forEach((k, i) => {
        const key = kindName(k);
        if (seen.has(key))
          ctx.addIssue({
            code: "custom",
            path: [i],
            message: `${k.kind} of ${groupOf(k.apiVersion)} is listed twice`,
          });
        seen.add(key);
      });
    }),
  );

/** The workloads section of the settings (lib/settings composes it). */
export const WorkloadsSettingsSchema = z.prefault(
  z.strictObject({
    /**
     * Fix the pod templates of Deployments, Jobs and their kin when they are applied (as Kyverno's
     * auto-generated rules do), not only their pods: PSA then has nothing to warn about, at the
     * price of fields in the stored object that the applied manifest lacks. Read when the module is
     * built too (package.json pepr.env): it decides whether the mutating webhook receives workloads.
     */
    mutate: z._default(z.boolean(), false),
    /**
     * The platform's own workload kinds (custom resources whose operator makes pods): where their
     * pod templates are and how many pods each makes, judged at apply like the built-in ML kinds
     * (lib/workload-kinds/table.ts, in the same form). Read when the module is built too: it
     * decides the webhook's rules.
     */
    kinds: z._default(WorkloadKindsSchema, []),
    /**
     * The ML kinds of the built-in table judged at apply ("PyTorchJob.kubeflow.org", ...; default
     * all). Each is a webhook binding Pepr filters on every request: a platform without an
     * operator may drop its kinds. Read when the module is built too.
     */
    builtInKinds: z._default(z.array(z.enum(BUILT_IN_KIND_NAMES)), [...BUILT_IN_KIND_NAMES]),
    /**
     * Users whose word that they made a workload (a controller ownerReference) counts, besides
     * Kubernetes' own (kube-controller-manager and kube-system ServiceAccounts): operators that
     * roll out ReplicaSets or Jobs of their own, e.g. "system:serviceaccount:argo-rollouts:*"
     * (a trailing * is a prefix). Their objects are then not judged again.
     */
    controllerUsers: z._default(
      z.array(z.string().check(z.minLength(1), z.maxLength(253))).check(z.maxLength(100)),
      [],
    ),
  }),
  {},
);

export type WorkloadsSettings = z.infer<typeof WorkloadsSettingsSchema>;
