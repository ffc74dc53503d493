// Loaded into the controller by bench/cold.ts (NODE_OPTIONS=--import): times the module's shared
// Pod validation (the `admission` capability's Validate action on Pods: every policy's checks and
// the engine around them) inside the controller, with no change to the module. Pepr's validating step reads
// each capability's `bindings` on every request; the getter is wrapped here so that it hands Pepr
// the same bindings, the `admission` capability's Validate action on Pods timed.
//
// Phases, each started by SIGUSR2 (SIGUSR1 writes what was timed to $COLD_OUT as JSON):
//   1 "request": the action's time on each request, as it runs;
//   2 "again":   the action run three times on each request: the first, then twice more right after;
//   3 "loop":    on the next request, the action run LOOP_RUNS times in a row (nothing between).
import { createRequire } from "node:module";
import fs from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";

const LOOP_RUNS = 5_000;
const PHASES = ["warm-up", "request", "again", "loop", "done"];
let phase = 0;
const times = { request: [], again1: [], again2: [], again3: [], loop: [] };

process.on("SIGUSR2", () => (phase = Math.min(phase + 1, PHASES.length - 1)));
process.on("SIGUSR1", () => fs.writeFileSync(process.env.COLD_OUT, JSON.stringify(times)));

async function timedRun(action, req) {
  const start = performance.now();
  const result = await action(req);
  return { result, us: (performance.now() - start) * 1000 };
}

function timed(action) {
  const wrapper = async function (req) {
    const now = PHASES[phase];
    if (now === "request") {
      const { result, us } = await timedRun(action, req);
      times.request.push(us);
      return result;
    }
    if (now === "again") {
      const first = await timedRun(action, req);
      times.again1.push(first.us);
      times.again2.push((await timedRun(action, req)).us);
      times.again3.push((await timedRun(action, req)).us);
      return first.result;
    }
    if (now === "loop") {
      phase = PHASES.indexOf("done"); // one request runs the loop
      for (let i = 0; i < LOOP_RUNS; i++) times.loop.push((await timedRun(action, req)).us);
    }
    return action(req);
  };
  // Pepr logs an action by its function's name.
  Object.defineProperty(wrapper, "name", { value: action.name });
  return wrapper;
}

const require = createRequire(join(process.cwd(), "package.json"));
const { Capability } = require("pepr");
const original = Object.getOwnPropertyDescriptor(Capability.prototype, "bindings");
const wrapped = new WeakMap();
Object.defineProperty(Capability.prototype, "bindings", {
  ...original,
  get() {
    const bindings = original.get.call(this);
    // Bindings are added while the module loads: wrap again whenever the list has grown.
    let known = wrapped.get(this);
    if (!known || known.length !== bindings.length) {
      known =
        this.name === "admission"
          ? bindings.map(b =>
              b.validateCallback && b.kind?.kind === "Pod"
                ? { ...b, validateCallback: timed(b.validateCallback) }
                : b,
            )
          : bindings;
      wrapped.set(this, known);
    }
    return known;
  },
});
