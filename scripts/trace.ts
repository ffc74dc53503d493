// npm run trace -- <manifest>: one admission request traced through the module, function by
// function (issue 31). The module's own files are instrumented at bundle time
// (scripts/trace/instrument.ts); each object of the manifest is admitted as the API server and
// Pepr admit it (scripts/trace/driver.ts); the calls are counted per step, each step being one
// Pepr binding's action (scripts/trace/analyze.ts). Images are not read from registries (as in
// bench:engine) unless ADMISSION_GUARD_IMAGES_INSPECT says so; other ADMISSION_GUARD_* settings
// apply as in the controller.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { build } from "esbuild";
import {
  callsOfStep,
  countCalls,
  figuresOf,
  filesOf,
  restrictTo,
  treeLines,
  unknownNames,
  type Figures,
} from "./trace/analyze";
import type { DriverJob, DriverResult, TracedStep } from "./trace/driver";
import { PRELUDE, tracePlugin, type Site } from "./trace/instrument";

const ROOT = resolve(__dirname, "..");
// Where the user ran `npm run` from (npm runs the script in the package's root).
const CWD = process.env.INIT_CWD ?? process.cwd();
// The engine's context, exemptions and applicability, whose repetition issue 31 is about.
const DEFAULT_COUNT = [
  "contextFor",
  "contextOf",
  "applicableExemptions",
  "applicability",
  "planOf",
];

const USAGE = `usage: npm run trace -- <manifest> [options]

Traces each object of a manifest (YAML or JSON, several documents, Lists) through the module as a
CREATE: Pepr's mutate processor, the patch applied, Pepr's validate processor. Counts, per step
(each Pepr binding whose action ran) and in total: calls, distinct functions, files, hops (calls
into another file), re-entries (hops into a file the step had entered before), the same without
leaf helpers (calls that made no traced call), and the calls of the named functions.

  --only Kind[/name]   trace only those objects (e.g. --only Deployment)
  --count a,b,...      names to count (default ${DEFAULT_COUNT.join(",")})
  --tree               print every step's call tree (file:function; → hop, ↩ re-entry)
  --tree=TEXT          print the call tree of the steps whose label contains TEXT ("admission Validate")
  --within a,b,...     count only the calls into these files (paths or prefixes: lib/engine/), each
                       attributed to its nearest caller among them (a view of the step from there)
  --cluster PATH       the cluster's objects (file or directory; repeatable; default examples/cluster);
                       a namespace is added for an object whose namespace it has not

  e.g. npm run trace -- examples/llamaindex-trainer.yaml
       npm run trace -- examples/gpt4-canary.yaml --only Deployment --tree=Validate`;

interface Options {
  manifest: string;
  only?: string;
  count: string[];
  /** undefined: no tree; "": every step's; else the steps whose label contains it. */
  tree?: string;
  cluster: string[];
  /** Prefixes of the files counted; empty: every traced file. */
  within: string[];
}

function parseArgs(args: string[]): Options | string {
  const opts: Options = { manifest: "", count: DEFAULT_COUNT, cluster: [], within: [] };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    const value = () => {
      if (i + 1 >= args.length) throw new Error(`${arg} needs a value`);
      return args[++i];
    };
    if (arg === "--only") opts.only = value();
    else if (arg === "--count") opts.count = value().split(",").filter(Boolean);
    else if (arg === "--cluster") opts.cluster.push(value());
    else if (arg === "--within") opts.within = value().split(",").filter(Boolean);
    else if (arg === "--tree") opts.tree = "";
    else if (arg.startsWith("--tree=")) opts.tree = arg.slice("--tree=".length);
    else if (arg.startsWith("-")) return `unknown option ${arg}`;
    else if (opts.manifest) return `one manifest at a time (${opts.manifest}, ${arg})`;
    else opts.manifest = arg;
  }
  if (!opts.cluster.length) opts.cluster.push(join(ROOT, "examples/cluster"));
  return opts;
}

/** Bundles the driver with the module instrumented, runs it, and returns what it recorded. */
async function traced(opts: Options): Promise<{ result: DriverResult; sites: Site[] }> {
  const dir = mkdtempSync(join(tmpdir(), "admission-guard-trace-"));
  try {
    const sites: Site[] = [];
    const bundle = join(dir, "trace.js");
    await build({
      entryPoints: [join(ROOT, "scripts/trace/driver.ts")],
      absWorkingDir: ROOT,
      bundle: true,
      platform: "node",
      target: "node20",
      format: "cjs",
      outfile: bundle,
      banner: { js: PRELUDE },
      plugins: [tracePlugin(ROOT, sites)],
      // Pepr finds a kind by its class name (a.Pod is V1Pod): bundling must not rename classes.
      keepNames: true,
      logLevel: "warning",
    });
    const job: DriverJob = {
      manifest: opts.manifest,
      cwd: CWD,
      only: opts.only,
      cluster: opts.cluster.map(p => resolve(CWD, p)),
      out: join(dir, "result.json"),
    };
    writeFileSync(join(dir, "job.json"), JSON.stringify(job));
    // The module's logs (Pepr's pino, on stdout) go to stderr: stdout is the trace.
    const run = spawnSync(process.execPath, [bundle, join(dir, "job.json")], {
      stdio: ["ignore", 2, 2],
      env: {
        ...process.env,
        LOG_LEVEL: process.env.LOG_LEVEL ?? "error",
        ADMISSION_GUARD_IMAGES_INSPECT: process.env.ADMISSION_GUARD_IMAGES_INSPECT ?? "false",
      },
    });
    if (run.status !== 0) throw new Error(`the traced run exited with ${run.status ?? run.signal}`);
    return { result: JSON.parse(readFileSync(job.out, "utf8")) as DriverResult, sites };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const stepLabel = (s: TracedStep) =>
  s.capability === "(pepr)"
    ? `Pepr's ${s.action.toLowerCase()} processor, outside actions`
    : `${s.capability} ${s.action}`;

const figureCells = (f: Figures) =>
  [f.calls, f.functions, f.files, f.hops, f.reentries].map(String);

/** Each column's width; a row of one cell (a heading) spans the table and is left out. */
const widthsOf = (rows: string[][]) =>
  rows[0].map((_, c) => Math.max(...rows.filter(r => r.length > 1).map(r => r[c].length)));

/** Columns padded to their widths: the first left-aligned, the others right-aligned. */
function table(rows: string[][], widths = widthsOf(rows)): string[] {
  return rows.map(r =>
    r
      .map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : cell.padStart(widths[c])))
      .join("  ")
      .trimEnd(),
  );
}

function report(result: DriverResult, sites: Site[], opts: Options): string[] {
  const steps = result.steps.map((step, i) => {
    const all = callsOfStep(result.calls, i);
    return { step, all, calls: opts.within.length ? restrictTo(all, sites, opts.within) : all };
  });
  // Pepr's processors make no call into the module outside actions today; shown when they do.
  const shown = steps.filter(s => s.step.capability !== "(pepr)" || s.all.length);
  const head = ["calls", "fns", "files", "hops", "re-entries"];
  const rows: string[][] = [["step", ...head, ...head, ...opts.count]];
  // The named functions' calls are counted wherever they are (--within or not).
  const figures = (of: typeof shown) => [
    ...figureCells(
      figuresOf(
        of.map(s => s.calls),
        sites,
      ),
    ),
    ...figureCells(
      figuresOf(
        of.map(s => s.calls),
        sites,
        true,
      ),
    ),
    ...countCalls(
      of.map(s => s.all),
      sites,
      opts.count,
    ).map(String),
  ];
  result.objects.forEach((object, o) => {
    const own = shown.filter(s => s.step.object === o);
    rows.push([object.label]);
    for (const s of own) rows.push([`  ${stepLabel(s.step)}`, ...figures([s])]);
    rows.push([`  total, ${own.length} steps`, ...figures(own)]);
  });
  // The groups' titles over their columns.
  const widths = widthsOf(rows);
  const at = (c: number) => widths.slice(0, c).reduce((x, w) => x + w + 2, 0);
  const groups = [
    [1, "every call"],
    [6, "without leaf helpers"],
    [11, "calls of"],
  ] as const;
  const out = [
    groups.reduce((line, [c, title]) => line.padEnd(at(c)) + title, ""),
    ...table(rows, widths),
  ];

  const unknown = unknownNames(sites, opts.count);
  out.push(
    "",
    "hop: a call into another file than its caller's (Pepr's call of an action is one); re-entry: a",
    "hop into a file the step had entered before; leaf helper: a call that made no traced call;",
    "a total adds its steps' calls, hops and re-entries, and counts functions and files once.",
    `Traced: ${new Set(sites.map(s => s.file)).size} files, ${sites.length} functions of the module (capabilities/, lib/, hello-pepr.ts).`,
  );
  if (opts.within.length)
    out.push(
      `Counted: only calls into ${opts.within.join(", ")} (--within), each from its nearest caller there.`,
    );
  if (unknown.length)
    out.push(`No traced function is named ${unknown.join(", ")}: 0 means absent.`);

  result.objects.forEach((object, o) => {
    out.push("", `== ${object.label}`, ...object.outcome.map(line => `   ${line}`));
    for (const { step, calls } of shown.filter(s => s.step.object === o)) {
      out.push(``, `-- ${stepLabel(step)} (${step.callback}): its files, in order of first entry`);
      const files = filesOf(calls, sites).map(f => [`   ${f.file}`, `${f.calls}`, `${f.entries}`]);
      out.push(...table([["   file", "calls", "entries"], ...files]));
      const label = `${stepLabel(step)}`;
      if (opts.tree !== undefined && label.includes(opts.tree))
        out.push("", `   call tree:`, ...treeLines(calls, sites).map(line => `   ${line}`));
    }
  });
  return out;
}

async function main() {
  const args = process.argv.slice(2);
  if (!args.length || args.includes("--help") || args.includes("-h")) {
    console.log(USAGE);
    return;
  }
  const opts = parseArgs(args);
  if (typeof opts === "string") {
    console.error(`${opts}\n\n${USAGE}`);
    process.exitCode = 2;
    return;
  }
  const { result, sites } = await traced(opts);
  if (result.errors.length) {
    console.error(result.errors.join("\n"));
    process.exitCode = 1;
    return;
  }
  console.log(report(result, sites, opts).join("\n"));
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exitCode = 1;
});
