// withBudget gives up a call at its budget with an error of its own class, so a caller tells "cut
// by the deadline" from "the API server failed" without reading the clock (a timer may fire a
// millisecond before Date.now() reaches the deadline: the flake this replaces).
import { BudgetExceeded, withBudget } from "../../../lib/cluster/api-calls";

const never = () => new Promise<never>(() => undefined);

test("a call with no answer is given up at its budget, as BudgetExceeded, naming the call", async () => {
  const given = withBudget(never(), 5, "reading namespace ml");
  await expect(given).rejects.toBeInstanceOf(BudgetExceeded);
  await expect(given).rejects.toThrow(
    "reading namespace ml: no answer from the API server within 5 ms",
  );
});

test("a call that fails is its own error, not BudgetExceeded; an answer passes through", async () => {
  const failed = withBudget(Promise.reject(new Error("connect ECONNREFUSED")), 1000, "x");
  await expect(failed).rejects.not.toBeInstanceOf(BudgetExceeded);
  await expect(failed).rejects.toThrow("connect ECONNREFUSED");
  await expect(withBudget(Promise.resolve(42), 1000, "x")).resolves.toBe(42);
});
