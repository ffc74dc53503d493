// The setting workloads.kinds, validated: every path parses, counts are whole numbers, and a kind
// is named once. A bad entry is a named error at start (and at build), never a skip per request.
import * as z from "zod";
import { groupOf, kindName } from "./kind-spec";
import { parsePath } from "./paths";

const path = z.string().superRefine((p, ctx) => {
  const parsed = parsePath(p);
  if (!parsed.ok) ctx.addIssue({ code: "custom", message: parsed.reason });
});

const countTerm = z.union([
  path,
  z.strictObject({
    path,
    default: z.number().int().min(0).optional(),
    minus: z.number().int().min(0).optional(),
    min: path.optional(),
    max: path.optional(),
  }),
]);

const templateSpec = z.strictObject({
  template: path,
  role: z.string().min(1).optional(),
  name: path.optional(),
  replicas: z.array(countTerm).optional(),
  atMost: z.array(countTerm).optional(),
  ifAbsent: path.optional(),
  ifPresent: path.optional(),
});

export const WorkloadKindsSchema = z
  .array(
    z.strictObject({
      apiVersion: z
        .string()
        .regex(
          /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?\/[a-z0-9]+$/,
          "must be group/version, e.g. example.com/v1 (a custom resource's group)",
        ),
      kind: z.string().regex(/^[A-Z][A-Za-z0-9]*$/, "must be a kind, e.g. TrainingRun"),
      plural: z
        .string()
        .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, "must be a resource name, e.g. trainingruns")
        .optional(),
      suspend: path.optional(),
      templates: z.array(templateSpec).min(1, "a kind needs at least one template"),
    }),
  )
  .superRefine((kinds, ctx) => {
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
  });
