// The policy test file (`kind: PolicyTest`), read by `admission-guard test`: resources, the cluster
// they meet, settings, and per case the verdict, rules and fields expected. Validated as `check`
// validates its input: every problem names the file and the field, nothing runs on a bad file.
// Format and why: docs/policy-tests.md, ADR 0036.
import * as z from "zod/mini";
import "../lib/objects/zod-messages";
import { namespaceName } from "../lib/objects/names";
import type { KubeObject } from "../lib/objects/pod";

export const POLICY_TEST_API_VERSION = "admission-guard.dev/v1alpha1";
export const POLICY_TEST_KIND = "PolicyTest";
export const VERDICTS = ["allowed", "warned", "denied"] as const;
export type Verdict = (typeof VERDICTS)[number];

/**
 * Bounds on what one run reads: a test file comes from whoever may open a pull request, and CI
 * must not spend unbounded memory or time on it (docs/threat-model.md).
 */
export const LIMITS = {
  /** Bytes of one test file, and of each file it names. */
  fileBytes: 1024 * 1024,
  /** Test files in one run. */
  testFiles: 500,
  /** Entries of `resources` and of `cluster`, and cases, in one test file. */
  entries: 500,
  /** Objects a test file's resources and cluster hold in all (a directory or a List holds many). */
  objects: 2000,
} as const;

/** `resource-quota/quota-exceeded`: a capability and one of its rules, as every message names them. */
const ruleId = z
  .string()
  .check(
    z.regex(
      /^[a-z0-9]([-a-z0-9]*[a-z0-9])?\/[A-Za-z0-9][-A-Za-z0-9_.]*$/,
      "must be capability/rule, such as resource-quota/quota-exceeded",
    ),
  );

/** `Pod/llama-index/llamaindex-trainer`, or `Pod/llamaindex-trainer` when the name is unique. */
const resourceRef = z
  .string()
  .check(
    z.regex(
      /^[A-Za-z][A-Za-z0-9]*\/([^/\s]+\/)?[^/\s]+$/,
      "must be Kind/namespace/name or Kind/name, such as Pod/llama-index/llamaindex-trainer",
    ),
  );

/** An RFC 6901 JSON pointer into the reviewed object: `/spec/securityContext/runAsNonRoot`. */
const POINTER = /^(\/([^/~]|~[01])*)+$/;

/** A path to a file or directory, relative to the test file. */
const path = z.string().check(z.minLength(1), z.maxLength(4096));
/** A Kubernetes object written in the test file itself. */
const inlineObject = z.looseObject({
  apiVersion: z.string().check(z.minLength(1)),
  kind: z.string().check(z.minLength(1)),
  metadata: z.looseObject({ name: z.string().check(z.minLength(1)) }),
});
const fileOrObject = z.union([path, inlineObject]);

const Expect = z.strictObject({
  verdict: z.enum(VERDICTS),
  /** The rules whose violations fire (denied or warned), exactly. */
  rules: z.optional(z.array(ruleId).check(z.maxLength(LIMITS.entries))),
  /** The rules whose fixes apply (on a Pod) or that its pods will get (a workload), exactly. */
  fixes: z.optional(z.array(ruleId).check(z.maxLength(LIMITS.entries))),
  /** JSON pointer → value in the object after the fix; null: the field must be absent. */
  // (Keys checked below: a record's key schema loses its message in zod's "Invalid key".)
  fields: z.optional(z.record(z.string(), z.unknown())),
  /** A partial object the object after the fix must contain. */
  object: z.optional(z.record(z.string(), z.unknown())),
});

const Case = z.strictObject({
  name: z.string().check(z.minLength(1), z.maxLength(256)),
  resource: resourceRef,
  expect: Expect,
});

export const PolicyTestSchema = z
  .strictObject({
    apiVersion: z.literal(POLICY_TEST_API_VERSION),
    kind: z.literal(POLICY_TEST_KIND),
    metadata: z.strictObject({
      name: z.string().check(z.minLength(1), z.maxLength(253)),
      labels: z.optional(z.record(z.string(), z.string())),
      annotations: z.optional(z.record(z.string(), z.string())),
    }),
    resources: z.array(fileOrObject).check(z.minLength(1), z.maxLength(LIMITS.entries)),
    cluster: z.optional(z.array(fileOrObject).check(z.maxLength(LIMITS.entries))),
    /** A settings file (relative to the test file), or the settings themselves. */
    settings: z.optional(z.union([path, z.record(z.string(), z.unknown())])),
    namespace: z.optional(namespaceName),
    operation: z.optional(z.enum(["CREATE", "UPDATE"])),
    cases: z.array(Case).check(z.minLength(1), z.maxLength(LIMITS.entries)),
  })
  .check(
    z.superRefine((test, ctx) => {
      // A case is named in the table and in JUnit: two of one name could not be told apart.
      const seen = new Set<string>();
      test.cases.forEach((c, i) => {
        if (seen.has(c.name))
          ctx.issues.push({
            code: "custom",
            input: c.name,
            path: ["cases", i, "name"],
            message: `another case is named "${c.name}" already: each case needs its own name`,
          });
        seen.add(c.name);
        for (const key of Object.keys(c.expect.fields ?? {}))
          if (!POINTER.test(key))
            ctx.issues.push({
              code: "custom",
              input: key,
              path: ["cases", i, "expect", "fields", key],
              message: `must be a JSON pointer such as /spec/securityContext/runAsNonRoot (~1 for a / in a key)`,
            });
      });
    }),
  );

export type PolicyTest = z.infer<typeof PolicyTestSchema>;
export type PolicyTestCase = PolicyTest["cases"][number];

/** `cases[2].expect.fields["/spec/x"]`: where a problem is, as a reader writes it. */
function where(path: readonly PropertyKey[]): string {
  return (
    path
      .map((part, i) =>
        typeof part === "number"
          ? `[${part}]`
          : /^[A-Za-z_][\w-]*$/.test(String(part))
            ? `${i ? "." : ""}${String(part)}`
            : `[${JSON.stringify(String(part))}]`,
      )
      .join("") || "(the file)"
  );
}

/** The test, or every problem of it, each naming its field. */
export function parsePolicyTest(
  raw: unknown,
): { test: PolicyTest; problems?: undefined } | { test?: undefined; problems: string[] } {
  const result = PolicyTestSchema.safeParse(raw, { reportInput: true });
  if (result.success) return { test: result.data };
  return {
    problems: result.error.issues.map(issue => {
      if (issue.code === "unrecognized_keys") {
        const at = issue.path.length ? `${where(issue.path)}: ` : "";
        return `${at}unknown field${issue.keys.length > 1 ? "s" : ""} ${issue.keys.map(k => `"${k}"`).join(", ")}`;
      }
      const input = (issue as { input?: unknown }).input;
      const shown =
        typeof input === "string" || typeof input === "number" || typeof input === "boolean"
          ? issue.message.includes(JSON.stringify(input))
            ? ""
            : ` (got ${JSON.stringify(input).slice(0, 80)})`
          : "";
      return `${where(issue.path)}: ${issue.message}${shown}`;
    }),
  };
}

/** Whether a parsed document is meant as a policy test (then it is validated as one). */
export const isPolicyTest = (object: KubeObject) => object.kind === POLICY_TEST_KIND;

/** The rule ids a test names that the module has no such rule for, each with where it is. */
export function unknownRules(
  test: PolicyTest,
  known: { violations: ReadonlySet<string>; capabilities: ReadonlySet<string> },
): string[] {
  const out: string[] = [];
  test.cases.forEach((c, i) => {
    c.expect.rules?.forEach((rule, j) => {
      if (!known.violations.has(rule))
        out.push(
          `cases[${i}].expect.rules[${j}]: no capability reports a rule "${rule}" (a typo would never fire)`,
        );
    });
    c.expect.fixes?.forEach((rule, j) => {
      if (!known.capabilities.has(rule.split("/")[0]))
        out.push(
          `cases[${i}].expect.fixes[${j}]: no capability is named "${rule.split("/")[0]}" (of "${rule}")`,
        );
    });
  });
  return out;
}
