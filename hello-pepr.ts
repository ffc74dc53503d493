// hello-pepr: the smallest admission-guard capability, and the one to copy for your own.
//
// A capability is a Pepr Capability: a name, the namespaces it acts in, and what it does with
// which requests. What admission-guard adds is where the decisions live: in a policy — a name and
// two pure functions, `fix` and `check`, over plain Kubernetes objects, with no Pepr and no
// network in them — and one declaration of what it acts on (`policyOf`, below). The module's one
// Mutate and one Validate (capabilities/admission) run it where it declares, with every other
// capability, and `npx admission-guard check` runs the very same policy on manifests offline.
// That is how one set of rules serves the webhook and CI.
//
// To add your own (docs/add-a-capability.md walks through it):
//   1. copy this file to capabilities/<your-area>/index.ts and rename what says hello;
//   2. add it with one line to `areas` in capabilities/index.ts (pepr.ts and `check` read it);
//   3. write its unit tests beside the others in test/unit/ (the policy alone: no cluster needed).
//
// This example is registered only where it teaches: the tests, and `npm run dev:hello`
// (ADMISSION_GUARD_EXAMPLES=hello-pepr).

// The Pepr capability of a policy (its name, description and namespaces).
import { capabilityOf } from "./lib/pepr/adapter";
// A policy from its rules and what it acts on; how to say a field's path in messages (pods and
// workload templates alike).
import { policyOf } from "./lib/engine/policy";
import { fieldPath } from "./lib/objects/pod";

/** The label this demo sets and the one it refuses. */
export const HELLO_LABEL = "hello.admission-guard.dev/greeted";
export const HELLO_DENY_LABEL = "hello.admission-guard.dev/deny";

// ---- The policy: pure rules, the part `check` runs too ----------------------------------------

export const helloPeprPolicy = policyOf(
  {
    // Every message says "admission-guard/hello-pepr: ...", so users know who fixed or denied what.
    name: "hello-pepr",
    // Every rule its check may deny under: what an Exemption may waive and a PolicyReport lists.
    rules: ["no-deny-label"],
    description: "Demo: greets pods in the pepr-demo namespace and refuses those that ask for it",
    // Acts only here. Leave it out to act in every namespace (system namespaces are always skipped).
    namespaces: ["pepr-demo"],

    // fix: runs on Pod CREATE on the request's copy, and on a copy of a workload's pod template to
    // predict what its pods will get. Change the pod spec in place and say what you changed (the
    // engine adds the capability name). Rules of the house: idempotent (a second run changes
    // nothing: the webhook may be called again), never override a value the user set, never throw
    // on malformed input.
    fix({ template }) {
      const labels = (template.metadata.labels ??= {});
      if (labels[HELLO_LABEL] !== undefined) return []; // set already, by us or by the user: leave it
      labels[HELLO_LABEL] = "true";
      return [
        {
          rule: "greet",
          message: `${fieldPath(template, "metadata.labels")}["${HELLO_LABEL}"]="true"`,
        },
      ];
    },

    // check: runs on the object as it will be stored (after every fix, in the validating webhook),
    // and on a workload's template with every fix applied. Say what is wrong, with the names
    // involved, and how to fix it. Violations deny in enforce mode and warn in warn mode.
    check(_object, target) {
      const denyAsked = target?.template.metadata.labels?.[HELLO_DENY_LABEL] === "true";
      return {
        changes: [],
        violations: denyAsked
          ? [
              {
                rule: "no-deny-label",
                message: `the pod carries ${HELLO_DENY_LABEL}=true, which asks to be refused`,
                fix: `remove the label ${HELLO_DENY_LABEL} from ${fieldPath(target!.template, "metadata.labels")}`,
              },
            ]
          : [],
        warnings: [],
      };
    },
  },
  // What it acts on, and when: the module runs its fix and its check there and nowhere else.
  {
    // A pod as it is created (and a workload's own template, when the module is built with
    // workloads.mutate).
    fix: { pods: ["CREATE"], templates: ["CREATE", "UPDATE"] },
    // A pod as it will be stored, and the pods a workload will make, on CREATE and UPDATE. A kind
    // of your own goes in `kinds: { refs: [...], operations: [...] }` (payload-size's ConfigMaps).
    check: { pods: ["CREATE", "UPDATE"], templates: ["CREATE", "UPDATE"] },
  },
);

// ---- The Pepr capability ----------------------------------------------------------------------

// Its name, description and namespaces are the policy's (metrics, logs and `pepr build` say them).
export const HelloPepr = capabilityOf(helloPeprPolicy);
