// `npm run trace` (scripts/trace.ts): its counting on a synthetic list of calls, and its
// instrumentation and recorder on real code, async included.
import {
  callsOfStep,
  countCalls,
  figuresOf,
  leaves,
  restrictTo,
  treeLines,
  unknownNames,
  type Call,
} from "../../../scripts/trace/analyze";
import { instrument, type Site } from "../../../scripts/trace/instrument";
import { Recorder } from "../../../scripts/trace/recorder";

const site = (file: string, name: string): Site => ({ file, name, line: 1 });
// a.ts:root calls a.ts:helper, then b.ts:work (which calls c.ts:leaf and back a.ts:helper), then
// b.ts:more (which calls c.ts:leaf).
const sites = [
  site("a.ts", "root"),
  site("a.ts", "helper"),
  site("b.ts", "work"),
  site("c.ts", "leaf"),
  site("b.ts", "Cache.more"),
];
const calls: Call[] = [
  { site: 0, parent: -1 }, // 0 hop (from Pepr), first into a.ts
  { site: 1, parent: 0 }, //  1 same file; leaf
  { site: 2, parent: 0 }, //  2 hop, first into b.ts
  { site: 3, parent: 2 }, //  3 hop, first into c.ts; leaf
  { site: 1, parent: 2 }, //  4 hop back into a.ts: a re-entry; leaf
  { site: 4, parent: 0 }, //  5 hop into b.ts again: a re-entry
  { site: 3, parent: 5 }, //  6 hop into c.ts again: a re-entry; leaf
];

describe("the trace's counting", () => {
  it("counts calls, functions, files, hops (the action's entry one) and re-entries", () => {
    expect(figuresOf([calls], sites)).toEqual({
      calls: 7,
      functions: 5,
      files: 3,
      hops: 6,
      reentries: 3,
    });
  });

  it("finds the leaves: calls that made no traced call", () => {
    expect(leaves(calls)).toEqual([false, true, false, true, true, false, true]);
  });

  it("without leaf helpers, counts what is left: root, work and more", () => {
    expect(figuresOf([calls], sites, true)).toEqual({
      calls: 3,
      functions: 3,
      files: 2,
      hops: 3,
      reentries: 1,
    });
  });

  it("adds steps up, a re-entry being one within its step, functions and files counted once", () => {
    const other: Call[] = [{ site: 2, parent: -1 }];
    expect(figuresOf([calls, other], sites)).toEqual({
      calls: 8,
      functions: 5,
      files: 3,
      hops: 7,
      reentries: 3,
    });
  });

  it("takes a step's calls out of the recorder's, a caller in another step counting as untraced", () => {
    const recorded = [
      { site: 0, parent: -1, step: 0 },
      { site: 2, parent: -1, step: 1 },
      { site: 3, parent: 0, step: 1 }, // a continuation of step 0's call, run in step 1
      { site: 3, parent: 1, step: 1 },
    ];
    expect(callsOfStep(recorded, 1)).toEqual([
      { site: 2, parent: -1 },
      { site: 3, parent: -1 },
      { site: 3, parent: 0 },
    ]);
  });

  it("counts a name's calls, a method by its own name, and knows the names absent", () => {
    expect(countCalls([calls], sites, ["helper", "more", "Cache.more", "planFor"])).toEqual([
      2, 1, 1, 0,
    ]);
    expect(unknownNames(sites, ["helper", "more", "planFor"])).toEqual(["planFor"]);
  });

  it("within some files, attributes each call to its nearest caller there", () => {
    const within = restrictTo(calls, sites, ["a.ts", "c.ts"]);
    expect(within).toEqual([
      { site: 0, parent: -1 },
      { site: 1, parent: 0 },
      { site: 3, parent: 0 },
      { site: 1, parent: 0 },
      { site: 3, parent: 0 },
    ]);
    // c.ts entered twice from a.ts; a.ts's helper is then called from a.ts: no hop.
    expect(figuresOf([within], sites)).toMatchObject({ hops: 3, reentries: 1 });
  });

  it("prints the tree with hops and re-entries marked, alike siblings once", () => {
    const twice: Call[] = [...calls, { site: 4, parent: 0 }, { site: 3, parent: 7 }];
    expect(treeLines(twice, sites)).toEqual([
      "→ a.ts:root",
      "    a.ts:helper",
      "  → b.ts:work",
      "    → c.ts:leaf",
      "    ↩ a.ts:helper",
      "  ↩ b.ts:Cache.more  ×2",
      "    ↩ c.ts:leaf",
    ]);
  });
});

describe("the trace's instrumentation", () => {
  /** Instruments the source, runs it with a recorder, and names each call with its caller. */
  async function trace(source: string, run: string) {
    const found: Site[] = [];
    const js = instrument(source, "lib/x.ts", found);
    const recorder = new Recorder();
    recorder.step = 0;
    await new Function("__agTrace", `${js}\nreturn ${run};`)(recorder.hook);
    return recorder.calls.map(c => [
      found[c.site].name,
      c.parent < 0 ? "-" : found[recorder.calls[c.parent].site].name,
    ]);
  }

  it("records every kind of function with its caller; after an await, still the awaiting one", async () => {
    const source = `
      const tick = () => new Promise(resolve => setTimeout(resolve, 1));
      function leaf(x: number) { return x; }
      class Box { constructor(readonly v: number) { leaf(v); } get twice() { return leaf(this.v) * 2; } }
      async function outer() {
        await tick();
        inner();
        return [1, 2].map(x => leaf(x)).concat(new Box(3).twice);
      }
      function inner(): number { return leaf(0); }`;
    expect(await trace(source, "outer()")).toEqual([
      ["outer", "-"],
      ["tick", "outer"],
      ["tick/arrow@2", "tick"],
      ["inner", "outer"],
      ["leaf", "inner"],
      ["outer/arrow@8", "outer"],
      ["leaf", "outer/arrow@8"],
      ["outer/arrow@8", "outer"],
      ["leaf", "outer/arrow@8"],
      ["Box.constructor", "outer"],
      ["leaf", "Box.constructor"],
      ["Box.get twice", "outer"],
      ["leaf", "Box.get twice"],
    ]);
  });

  it("keeps what a function returns and throws, `this` and `arguments`", async () => {
    const source = `
      const o = { n: 2, get() { return this.n; }, count: function () { return arguments.length; } };
      const fail = async () => { throw new Error("no"); };`;
    const found: Site[] = [];
    const js = instrument(source, "lib/x.ts", found);
    const recorder = new Recorder();
    recorder.step = 0;
    const run = new Function("__agTrace", `${js}\nreturn { o, fail };`)(recorder.hook);
    expect(run.o.get()).toBe(2);
    expect(run.o.count(1, 2, 3)).toBe(3);
    await expect(run.fail()).rejects.toThrow("no");
  });
});
