// hello-pepr: the smallest admission-guard capability, and the one to copy for your own.
//
// A capability is a Pepr Capability, as Pepr's docs teach: a name, the namespaces it acts in, and
// When(...) bindings that say what to do with which requests. What admission-guard adds is where
// the decisions live: in a Policy — a name and two pure functions, `fix` and `check`, over plain
// Kubernetes objects, with no Pepr and no network in them. The bindings hand requests to the
// policy through lib/pepr/adapter.ts, and `npx admission-guard check` runs the very same policy on
// manifests offline. That is how one set of rules serves the webhook and CI.
//
// To add your own:
//   1. copy this file to capabilities/<your-area>/index.ts and rename what says hello;
//   2. add it with one line to the list in capabilities/index.ts (pepr.ts and `check` read it);
//   3. write its unit tests beside the others in test/unit/ (the policy alone: no cluster needed).

// `Capability` builds the capability.
import { Capability } from "pepr";
// The adapter: binds the policy as the module declares, and turns a Pepr request into the engine's
// and the engine's answer into Pepr's.
import { bindPolicy } from "./lib/pepr/adapter";
// What a policy is, and how to say a field's path in messages (pods and workload templates alike).
import type { Policy } from "./lib/engine/policy";
import { fieldPath } from "./lib/objects/pod";

/** The label this demo sets and the one it refuses. */
export const HELLO_LABEL = "hello.admission-guard.dev/greeted";
export const HELLO_DENY_LABEL = "hello.admission-guard.dev/deny";

// ---- The policy: pure rules, the part `check` runs too ----------------------------------------

export const helloPeprPolicy: Policy = {
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
};

// ---- The Pepr capability: which requests reach the policy -------------------------------------

// The name is the policy's (metrics, logs and `pepr build` say it); `namespaces` makes Pepr itself
// skip requests from other namespaces before any of our code runs.
export const HelloPepr = new Capability({
  name: helloPeprPolicy.name,
  description: helloPeprPolicy.description,
  namespaces: helloPeprPolicy.namespaces,
});

// Its bindings (Pepr's When(...) chains) come from the module's one declaration of what runs where
// (lib/engine/routes.ts), which `check` replays too, so the webhook and `check` never disagree:
//   - a policy with a `fix` gets When(a.Pod).IsCreated().Mutate(...): pods fixed as they are created;
//   - a policy with `extraKinds` gets a When(kind).IsCreatedOrUpdated().Validate(...) for each
//     (payload-size judges ConfigMaps and Secrets so);
//   - every policy's `check` runs in the shared validation of Pods (capabilities/pods) and workload
//     templates (capabilities/workloads): one Validate binding per kind (or API group) for the
//     whole module, as each binding costs Pepr a filter pass and a callback on every request.
bindPolicy(HelloPepr, helloPeprPolicy);
