// hello-pepr: the smallest admission-guard capability, and the template to copy for your own.
//
// A capability is a plain object (a Policy): a name, optional namespaces, and two optional pure
// functions. No Pepr and no network in here, so the same code runs in the webhook (through
// lib/pepr-adapter.ts) and in the offline `check` command.
//
// To add your own: copy this file to capabilities/<your-area>/index.ts, rename it, and add one line
// to the list in capabilities/index.ts. Write its unit tests beside the others in test/unit/.
import type { Policy } from "./lib/policy";
import type { Violation } from "./lib/verdict";
import { fieldPath } from "./lib/pod";

/** The label this demo sets and the one it refuses. */
export const HELLO_LABEL = "hello.admission-guard.dev/greeted";
export const HELLO_DENY_LABEL = "hello.admission-guard.dev/deny";

export const helloPepr: Policy = {
  // Every message says "admission-guard/hello-pepr: ...", so users know who fixed or denied what.
  name: "hello-pepr",
  description: "Demo: greets pods in the pepr-demo namespace and refuses those that ask for it",
  // Acts only here. Leave it out to act in every namespace (system namespaces are always skipped).
  namespaces: ["pepr-demo"],

  // fix: runs on Pod CREATE on the request's copy, and on a copy of a workload's pod template to
  // predict what its pods will get. Change the pod spec in place and say what you changed.
  // Rules of the house: idempotent (a second run changes nothing), never override a value the user
  // set, never throw on malformed input.
  fix({ template }) {
    const labels = (template.metadata.labels ??= {});
    if (labels[HELLO_LABEL] !== undefined) return []; // set already, by us or by the user: leave it
    labels[HELLO_LABEL] = "true";
    return [
      {
        capability: "hello-pepr",
        rule: "greet",
        message: `${fieldPath(template, "metadata.labels")}["${HELLO_LABEL}"]="true"`,
      },
    ];
  },

  // check: runs on the object as it will be stored (after every fix). Say what is wrong, with the
  // names involved, and how to fix it. Violations deny in enforce mode and warn in warn mode.
  check(_object, target) {
    const violations: Violation[] = [];
    if (target?.template.metadata.labels?.[HELLO_DENY_LABEL] === "true") {
      violations.push({
        capability: "hello-pepr",
        rule: "no-deny-label",
        message: `the pod carries ${HELLO_DENY_LABEL}=true, which asks to be refused`,
        fix: `remove the label ${HELLO_DENY_LABEL} from ${fieldPath(target.template, "metadata.labels")}`,
      });
    }
    return { changes: [], violations, warnings: [] };
  },
};
