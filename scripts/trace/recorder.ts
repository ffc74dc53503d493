// What the instrumented module calls at the start of every function (scripts/trace/instrument.ts):
// one record per call, naming the function and the call it was made from. The caller is the call
// whose body is running, kept in an AsyncLocalStorage rather than a stack, so that an async
// function's code after an `await` is still attributed to it (a stack would hand it to whatever
// ran in between), and a callback to the call that invoked it.
import { AsyncLocalStorage } from "node:async_hooks";

/** One call, in the order calls were entered. */
export interface RecordedCall {
  /** The function: its index in the sites the instrumenter registered. */
  site: number;
  /** The call it was made from (index in the same list); -1 when from untraced code (Pepr). */
  parent: number;
  /** The step (Pepr action) running when it was entered. */
  step: number;
}

/** The global the instrumented code calls: `hook(site, body)` runs the body as that call. */
export type TraceHook = (<T>(site: number, body: () => T) => T) & {
  /** A call whose body cannot be wrapped (a generator): recorded, its callees go to its consumer. */
  mark(site: number): void;
};

export class Recorder {
  readonly calls: RecordedCall[] = [];
  /** The step calls are recorded under; -1 records nothing (module loading, building requests). */
  step = -1;
  private readonly running = new AsyncLocalStorage<number>();

  private record(site: number): number {
    const parent = this.running.getStore() ?? -1;
    return this.calls.push({ site, parent, step: this.step }) - 1;
  }

  readonly hook: TraceHook = Object.assign(
    <T>(site: number, body: () => T): T =>
      this.step < 0 ? body() : this.running.run(this.record(site), body),
    {
      mark: (site: number) => {
        if (this.step >= 0) this.record(site);
      },
    },
  );
}
