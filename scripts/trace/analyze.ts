// The counting of `npm run trace`, on the calls the recorder kept (pure:
// test/unit/build/trace.test.ts).
//   hop        a call whose function is in another file than its caller's (a call from untraced
//              code, Pepr's processor, is a hop: control enters the module there);
//   re-entry   a hop into a file this step had already entered (and so left, to hop back);
//   leaf       a call that entered no traced function; "without leaf helpers" counts the rest.
import type { RecordedCall } from "./recorder";
import type { Site } from "./instrument";

/** A step's calls in entry order; parent indexes this list, -1 when the caller was untraced. */
export interface Call {
  site: number;
  parent: number;
}

export interface Figures {
  calls: number;
  functions: number;
  files: number;
  hops: number;
  reentries: number;
}

/** One step's calls out of the recorder's list: parents outside the step become -1. */
export function callsOfStep(recorded: readonly RecordedCall[], step: number): Call[] {
  const index = new Map<number, number>();
  const calls: Call[] = [];
  recorded.forEach((c, i) => {
    if (c.step !== step) return;
    index.set(i, calls.length);
    calls.push({ site: c.site, parent: index.get(c.parent) ?? -1 });
  });
  return calls;
}

/**
 * Only the calls of the files `within` names (paths or their prefixes: `lib/engine/`), each
 * attributed to its nearest kept caller: a view of the step as those files see it, an excursion
 * elsewhere (a policy's check) being one opaque call.
 */
export function restrictTo(
  calls: readonly Call[],
  sites: readonly Site[],
  within: readonly string[],
): Call[] {
  const kept = calls.map(c => within.some(prefix => sites[c.site].file.startsWith(prefix)));
  const index = new Map<number, number>();
  const out: Call[] = [];
  calls.forEach((c, i) => {
    if (!kept[i]) return;
    let parent = c.parent;
    while (parent >= 0 && !kept[parent]) parent = calls[parent].parent;
    index.set(i, out.length);
    out.push({ site: c.site, parent: parent < 0 ? -1 : index.get(parent)! });
  });
  return out;
}

/** Which calls are leaves: no call was made from them. */
export function leaves(calls: readonly Call[]): boolean[] {
  const leaf = calls.map(() => true);
  for (const c of calls) if (c.parent >= 0) leaf[c.parent] = false;
  return leaf;
}

/**
 * The figures of some steps together (calls, hops and re-entries add up, a re-entry being counted
 * within its step; functions and files are distinct over all). `withoutLeaves` leaves out every
 * leaf call first: no hop or re-entry is made from one, so the others' figures stay as they were.
 */
export function figuresOf(
  steps: readonly (readonly Call[])[],
  sites: readonly Site[],
  withoutLeaves = false,
): Figures {
  const functions = new Set<number>();
  const files = new Set<string>();
  let calls = 0;
  let hops = 0;
  let reentries = 0;
  for (const step of steps) {
    const leaf = withoutLeaves ? leaves(step) : undefined;
    const entered = new Set<string>();
    step.forEach((call, i) => {
      if (leaf?.[i]) return;
      calls++;
      const file = sites[call.site].file;
      functions.add(call.site);
      files.add(file);
      if (call.parent >= 0 && sites[step[call.parent].site].file === file) return;
      hops++;
      if (entered.has(file)) reentries++;
      entered.add(file);
    });
  }
  return { calls, functions: functions.size, files: files.size, hops, reentries };
}

/** The name `--count` matches: the function's own, without its class (`applicability`, `namespace`). */
const shortName = (name: string) => name.slice(name.lastIndexOf(".") + 1);

/** How many calls each name had (a method matches by its name alone: `SnapshotCluster.namespace`). */
export function countCalls(
  steps: readonly (readonly Call[])[],
  sites: readonly Site[],
  names: readonly string[],
): number[] {
  return names.map(
    name =>
      steps
        .flat()
        .filter(c => sites[c.site].name === name || shortName(sites[c.site].name) === name).length,
  );
}

/** The names no traced function has (renamed or gone): their count is not a measurement. */
export const unknownNames = (sites: readonly Site[], names: readonly string[]) =>
  names.filter(n => !sites.some(s => s.name === n || shortName(s.name) === n));

/** Each file a step entered, in order of first entry: its calls and how often it was entered. */
export function filesOf(calls: readonly Call[], sites: readonly Site[]) {
  const byFile = new Map<string, { calls: number; entries: number }>();
  calls.forEach(call => {
    const file = sites[call.site].file;
    const row = byFile.get(file) ?? { calls: 0, entries: 0 };
    row.calls++;
    if (call.parent < 0 || sites[calls[call.parent].site].file !== file) row.entries++;
    byFile.set(file, row);
  });
  return [...byFile].map(([file, row]) => ({ file, ...row }));
}

/**
 * The call tree, one line per call (`file:function`, indented by depth); a hop is marked `→`, a
 * re-entry `↩`. Consecutive calls of the same subtree under one caller print once, with `×n`.
 */
export function treeLines(calls: readonly Call[], sites: readonly Site[]): string[] {
  const children = calls.map((): number[] => []);
  const roots: number[] = [];
  calls.forEach((c, i) => (c.parent >= 0 ? children[c.parent] : roots).push(i));
  const signature = new Map<number, string>();
  const signatureOf = (i: number): string => {
    let s = signature.get(i);
    if (s === undefined) {
      s = `${calls[i].site}(${children[i].map(signatureOf).join(",")})`;
      signature.set(i, s);
    }
    return s;
  };
  const entered = new Set<string>();
  // Entry order decides which hop is a re-entry, even inside a subtree printed once.
  const mark = calls.map(c => {
    const file = sites[c.site].file;
    if (c.parent >= 0 && sites[calls[c.parent].site].file === file) return " ";
    const m = entered.has(file) ? "↩" : "→";
    entered.add(file);
    return m;
  });
  const lines: string[] = [];
  const print = (siblings: number[], depth: number) => {
    for (let k = 0; k < siblings.length; ) {
      const i = siblings[k];
      let n = 1;
      while (k + n < siblings.length && signatureOf(siblings[k + n]) === signatureOf(i)) n++;
      const { file, name } = sites[calls[i].site];
      lines.push(`${"  ".repeat(depth)}${mark[i]} ${file}:${name}${n > 1 ? `  ×${n}` : ""}`);
      print(children[i], depth + 1);
      k += n;
    }
  };
  print(roots, 0);
  return lines;
}
