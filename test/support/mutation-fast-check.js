// jest setupFiles of the mutation runs only (stryker.config.mjs), never of `npm test`. A mutant
// often makes a property very slow: a filtered arbitrary (`podArb.filter(compliant)`) whose filter
// the mutant made reject everything loops for ever, a failing property shrinks a large pod. Each
// such mutant would run into Stryker's timeout (its test runner killed and started again), which
// cost most of a run's time. So, in mutation runs only:
// - a filtered arbitrary that rejects 1000 values in a row throws (the property fails: the mutant
//   is killed, as a hang would have counted it detected, but at once);
// - a property stops at its first counterexample (no shrinking: a kill needs no minimal one);
// - a property stops after 3 s of runs, counted as passing (its runs so far all held).
const fc = require("fast-check");

const MAX_REJECTED_IN_A_ROW = 1000;
const filter = fc.Arbitrary.prototype.filter;
fc.Arbitrary.prototype.filter = function (refinement) {
  let rejectedInARow = 0;
  return filter.call(this, value => {
    if (refinement(value)) {
      rejectedInARow = 0;
      return true;
    }
    if (++rejectedInARow >= MAX_REJECTED_IN_A_ROW)
      throw new Error(
        `mutation run: a filtered arbitrary rejected ${MAX_REJECTED_IN_A_ROW} values in a row`,
      );
    return false;
  });
};

fc.configureGlobal({
  endOnFailure: true,
  interruptAfterTimeLimit: 3000,
  markInterruptAsFailure: false,
});
