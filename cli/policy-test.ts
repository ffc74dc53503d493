// `admission-guard test`: policy tests as files. Each PolicyTest (cli/policy-test-format.ts) names
// resources, the cluster they meet and the settings; its objects go through judgeFiles, the path
// `check` runs (so a test and `check` cannot disagree), and each case's expected verdict, rules and
// fields are compared with what came out. Offline, no cluster. Format: docs/policy-tests.md.
import { mkdir, readFile, realpath, writeFile } from "node:fs/promises";
import { dirname, relative, resolve, sep } from "node:path";
import type { KubeObject } from "../lib/objects/pod";
import { isRecord } from "../lib/objects/record";
import { parseSettings, SettingsError, type Settings } from "../lib/settings";
import { judgeFiles, loadSettings } from "./check";
import { commandArgs, startCommand, UsageError } from "./command";
import type { CliIO } from "./io";
import { junitXml, type JunitSuite } from "./junit";
import { loadManifests, type InputObject, type ManifestFile } from "./manifests";
import {
  isPolicyTest,
  LIMITS,
  parsePolicyTest,
  unknownRules,
  type PolicyTest,
  type PolicyTestCase,
  type Verdict,
} from "./policy-test-format";
import type { Checked } from "./report";

export const TEST_USAGE = `Usage: admission-guard test [options] DIR|FILE ...

Runs policy tests: every PolicyTest file (admission-guard.dev/v1alpha1) found under the given
directories, recursively. Each names resources, the cluster they meet and the settings; each case
names a resource and the verdict (allowed, warned, denied), rules and fields expected of it. The
resources are judged as \`check\` judges them, offline. Format: docs/policy-tests.md.

Options:
      --junit FILE   also write the results as JUnit XML (for CI test reports)
  -h, --help         this help

Exit codes: 0 every case passed, 1 a case failed (named, with what differed), 2 usage errors or
a test file that is not valid (named, with the field).
`;

/** One case's outcome: what was expected, what came out, and every difference. */
export interface CaseResult {
  file: string;
  test: string;
  name: string;
  resource: string;
  expected: Verdict;
  /** The verdict that came out; undefined when the resource got none. */
  got?: Verdict;
  problems: string[];
}

/** One test file's outcome: its cases, or why it could not run. */
interface FileResult {
  file: string;
  test: string;
  cases: CaseResult[];
  errors: string[];
}

/** allowed, warned (allowed, with violations: warn severity or a mode that does not enforce), denied. */
export function verdictOf(r: Checked["review"]): Verdict {
  if (!r.allowed) return "denied";
  return r.violations.length ? "warned" : "allowed";
}

const ruleIds = (list: { capability: string; rule: string }[]) => [
  ...new Set(list.map(x => `${x.capability}/${x.rule}`)),
];

/** "expected X to fire: it did not; Y fired, not expected" for two sets of rule ids. */
function setDifference(what: string, expected: string[], got: string[]): string | undefined {
  const missing = expected.filter(r => !got.includes(r));
  const extra = got.filter(r => !expected.includes(r));
  if (!missing.length && !extra.length) return undefined;
  const parts = [
    ...(missing.length ? [`expected ${missing.join(", ")}, which did not`] : []),
    ...(extra.length ? [`${extra.join(", ")} did, not expected`] : []),
  ];
  return `${what}: ${parts.join("; ")} (got [${got.join(", ")}])`;
}

/** RFC 6901: `/spec/containers/0/name`, `~1` a slash and `~0` a tilde. */
function valueAt(object: unknown, pointer: string): unknown {
  let at: unknown = object;
  for (const raw of pointer.split("/").slice(1)) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (Array.isArray(at) && /^(0|[1-9]\d*)$/.test(key)) at = at[Number(key)];
    else if (isRecord(at) && Object.hasOwn(at, key)) at = at[key];
    else return undefined;
  }
  return at;
}

const show = (v: unknown) => (v === undefined ? "absent" : JSON.stringify(v));
const escapeKey = (k: string) => k.replace(/~/g, "~0").replace(/\//g, "~1");

/**
 * Where `actual` first differs from `expected`, as a JSON pointer with both values; undefined when
 * it matches. Partial: a mapping's keys not expected are not compared; lists match item by item,
 * of the same length. Exact: the same value (key order aside).
 */
export function firstDifference(
  expected: unknown,
  actual: unknown,
  at: string,
  partial: boolean,
): string | undefined {
  if (isRecord(expected) && isRecord(actual)) {
    const keys = new Set([...Object.keys(expected), ...(partial ? [] : Object.keys(actual))]);
    for (const key of keys) {
      const d = firstDifference(expected[key], actual[key], `${at}/${escapeKey(key)}`, partial);
      if (d) return d;
    }
    return undefined;
  }
  if (Array.isArray(expected) && Array.isArray(actual) && expected.length === actual.length) {
    for (let i = 0; i < expected.length; i++) {
      const d = firstDifference(expected[i], actual[i], `${at}/${i}`, partial);
      if (d) return d;
    }
    return undefined;
  }
  // null expected: the field is absent (or null).
  if (expected === null && (actual === null || actual === undefined)) return undefined;
  if (expected === actual) return undefined;
  return `${at || "/"}: expected ${show(expected)}, got ${show(actual)}`;
}

/** Every difference between a case's expectations and the review of its resource. */
export function compareCase(c: PolicyTestCase, checked: Checked): string[] {
  const r = checked.review;
  const e = c.expect;
  const problems: string[] = [];
  const got = verdictOf(r);
  if (got !== e.verdict) {
    const why = r.violations.map(v => `${v.capability}/${v.rule}`).join(", ");
    problems.push(
      `verdict: expected ${e.verdict}, got ${got}${why ? ` (${why})` : ""}${r.handled ? "" : " (admission-guard does not handle it)"}`,
    );
  }
  const rules = e.rules && setDifference("rules", e.rules, ruleIds(r.violations));
  if (rules) problems.push(rules);
  const fixes = e.fixes && setDifference("fixes", e.fixes, ruleIds(r.changes));
  if (fixes) problems.push(fixes);
  for (const [pointer, value] of Object.entries(e.fields ?? {})) {
    const d = firstDifference(value, valueAt(r.object, pointer), pointer, false);
    if (d) problems.push(`field ${d}`);
  }
  if (e.object) {
    const d = firstDifference(e.object, r.object, "", true);
    if (d) problems.push(`object ${d}`);
  }
  return problems;
}

/** The review of the resource a case names (Kind/namespace/name, or Kind/name when unique). */
function findResource(ref: string, results: Checked[]): Checked | string {
  const parts = ref.split("/");
  const [kind, name] = [parts[0], parts[parts.length - 1]];
  const namespace = parts.length === 3 ? parts[1] : undefined;
  const found = results.filter(
    c =>
      c.input.kind === kind &&
      c.review.name === name &&
      (namespace === undefined || c.review.namespace === namespace),
  );
  if (found.length === 1) return found[0];
  const judged = results.map(c => `${c.review.kind}/${c.review.namespace}/${c.review.name}`);
  if (found.length > 1)
    return `resource ${ref}: ${found.length} resources match; name the namespace (Kind/namespace/name)`;
  return `resource ${ref}: not among the resources judged (${judged.join(", ") || "none"})`;
}

/**
 * A path a test file names, resolved from its folder; it must stay inside the working directory,
 * as written and once links are followed (a link committed beside the test could point anywhere).
 */
async function inside(io: CliIO, testPath: string, given: string): Promise<string> {
  const abs = resolve(dirname(testPath), given);
  const root = resolve(io.cwd);
  const real = await realpath(abs).catch(() => abs); // a missing path is loadManifests' error
  const realRoot = await realpath(root).catch(() => root);
  const within = (p: string, r: string) => p === r || p.startsWith(r + sep);
  if (!within(abs, root) || !within(real, realRoot))
    throw new UsageError(
      `"${given}" is outside the working directory ${root}: a test names files of its repository`,
    );
  return abs;
}

/** The resources or cluster objects of a test: files (relative to it) and objects written in it. */
async function objectsOf(
  entries: (string | Record<string, unknown>)[],
  field: string,
  shownFile: string,
  testPath: string,
  io: CliIO,
): Promise<{ files: Pick<ManifestFile, "objects">[]; errors: string[] }> {
  const errors: string[] = [];
  const paths: string[] = [];
  for (const entry of entries.filter(e => typeof e === "string")) {
    try {
      paths.push(relative(io.cwd, await inside(io, testPath, entry)) || ".");
    } catch (e) {
      errors.push(`${field}: ${(e as Error).message}`);
    }
  }
  const loaded = await loadManifests(paths, {
    cwd: io.cwd,
    readStdin: async () => "",
    maxFileBytes: LIMITS.fileBytes,
  });
  errors.push(...loaded.flatMap(f => f.errors).map(e => `${field}: ${e}`));
  const inline: InputObject[] = [];
  entries.forEach((entry, i) => {
    if (typeof entry !== "string")
      inline.push({
        source: { file: `${shownFile} ${field}[${i}]`, document: 1 },
        object: entry as KubeObject,
      });
  });
  return { files: [...loaded, { objects: inline }], errors };
}

async function settingsOf(test: PolicyTest, shownFile: string, testPath: string, io: CliIO) {
  if (typeof test.settings === "string")
    return loadSettings(relative(io.cwd, await inside(io, testPath, test.settings)), io.cwd);
  return parseSettings(test.settings ?? {}, `${shownFile}: settings`);
}

/** Runs one PolicyTest; its problems as a test file are `errors`, its cases' outcomes `cases`. */
async function runOne(
  test: PolicyTest,
  shownFile: string,
  testPath: string,
  io: CliIO,
): Promise<FileResult> {
  const out: FileResult = { file: shownFile, test: test.metadata.name, cases: [], errors: [] };
  let settings: Settings;
  try {
    settings = await settingsOf(test, shownFile, testPath, io);
  } catch (e) {
    if (!(e instanceof UsageError || e instanceof SettingsError)) throw e;
    out.errors.push(`settings: ${e.message}`);
    return out;
  }
  const resources = await objectsOf(test.resources, "resources", shownFile, testPath, io);
  const cluster = await objectsOf(test.cluster ?? [], "cluster", shownFile, testPath, io);
  out.errors.push(...cluster.errors, ...resources.errors);
  const objects = [...resources.files, ...cluster.files].flatMap(f => f.objects).length;
  if (objects > LIMITS.objects)
    out.errors.push(
      `resources and cluster hold ${objects} objects, more than the ${LIMITS.objects} a test may`,
    );
  if (out.errors.length) return out;

  // A resource the API server would refuse gets no verdict: an error of the test file, as in `check`.
  const judged = await judgeFiles(resources.files, {
    clusterObjects: cluster.files.flatMap(f => f.objects.map(o => o.object)),
    settings,
    operation: test.operation ?? "CREATE",
    namespace: test.namespace ?? "default",
    inspectImages: false,
    io,
  });
  out.errors.push(...judged.errors);
  for (const c of test.cases) {
    const result: CaseResult = {
      file: shownFile,
      test: test.metadata.name,
      name: c.name,
      resource: c.resource,
      expected: c.expect.verdict,
      problems: [],
    };
    const found = findResource(c.resource, judged.results);
    if (typeof found === "string") {
      result.problems.push(found);
    } else {
      result.got = verdictOf(found.review);
      result.problems.push(...compareCase(c, found));
    }
    out.cases.push(result);
  }
  return out;
}

// Control characters (an ANSI escape in a case name) would rewrite the reader's terminal.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;
const printable = (s: string) =>
  s.replace(CONTROL, c => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);

/** The results table: one row per case, then what differed in each failed one. */
export function testTable(files: FileResult[]): string {
  const rows = [
    ["CASE", "RESOURCE", "EXPECTED", "GOT", "RESULT"],
    ...files.flatMap(f =>
      f.cases.map(c => [
        c.name,
        c.resource,
        c.expected,
        c.got ?? "-",
        c.problems.length ? "FAIL" : "PASS",
      ]),
    ),
  ].map(row => row.map(printable));
  const widths = rows[0].map((_, i) => Math.max(...rows.map(r => r[i].length)));
  const lines = rows.map(r =>
    r
      .map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i])))
      .join("  ")
      .trimEnd(),
  );
  for (const f of files)
    for (const c of f.cases.filter(c => c.problems.length)) {
      lines.push("", printable(`FAIL ${f.file}: ${c.name} (${c.resource})`));
      for (const p of c.problems) lines.push(printable(`  ${p}`));
    }
  const cases = files.flatMap(f => f.cases);
  const failed = cases.filter(c => c.problems.length).length;
  lines.push(
    "",
    `${files.length} test file${files.length === 1 ? "" : "s"}, ${cases.length} case${cases.length === 1 ? "" : "s"}: ${cases.length - failed} passed, ${failed} failed`,
  );
  return lines.join("\n") + "\n";
}

function junitSuites(files: FileResult[]): JunitSuite[] {
  return files.map(f => ({
    name: `${f.test} (${f.file})`,
    file: f.file,
    cases: [
      ...(f.errors.length
        ? [
            {
              name: "(the test file)",
              classname: f.test,
              file: f.file,
              error: { message: f.errors[0], detail: f.errors.join("\n") },
            },
          ]
        : []),
      ...f.cases.map(c => ({
        name: c.name,
        classname: f.test,
        file: f.file,
        failure: c.problems.length
          ? {
              message: c.problems[0],
              detail: [
                `${c.resource}: expected ${c.expected}, got ${c.got ?? "-"}`,
                ...c.problems,
              ].join("\n"),
            }
          : undefined,
      })),
    ],
  }));
}

interface TestOptions {
  paths: string[];
  junit?: string;
  help: boolean;
}

function parseTestArgs(argv: string[]): TestOptions {
  const { values, positionals } = commandArgs(argv, {
    junit: { type: "string" },
    help: { type: "boolean", short: "h", default: false },
  });
  if (!values.help && positionals.length === 0)
    throw new UsageError("no input: give directories or files holding PolicyTest files");
  if (positionals.includes("-")) throw new UsageError("test reads files or directories, not stdin");
  if (values.junit === "") throw new UsageError("--junit needs a file name");
  return { paths: positionals, junit: values.junit, help: values.help };
}

/** A file that says it is a PolicyTest is one, even when it does not parse: its errors are shown. */
async function saysPolicyTest(path: string): Promise<boolean> {
  const text = await readFile(path, "utf8").catch(() => "");
  return /^\s*kind:\s*["']?PolicyTest["']?\s*$|"kind"\s*:\s*"PolicyTest"/m.test(text);
}

export async function runTest(argv: string[], io: CliIO): Promise<number> {
  const err = (line: string) => io.stderr.write(line + "\n");
  const opts = startCommand("test", TEST_USAGE, () => parseTestArgs(argv), io);
  if (typeof opts === "number") return opts;

  const found = await loadManifests(opts.paths, {
    cwd: io.cwd,
    readStdin: async () => "",
    maxFileBytes: LIMITS.fileBytes,
  });
  // The rules a test may name: the module's, the same for every test of the run.
  const judges = [...io.policies, ...(io.validators ?? [])];
  const known = {
    violations: new Set(judges.flatMap(p => p.rules.map(r => `${p.name}/${r}`))),
    capabilities: new Set(judges.map(p => p.name)),
  };
  const results: FileResult[] = [];
  let tests = 0;
  for (const file of found) {
    const docs = file.objects.filter(o => isPolicyTest(o.object));
    // A missing path, an oversized file, or a test file that does not parse; not the errors of
    // other files beside the tests (a settings file is no Kubernetes object).
    if (file.errors.length && (docs.length || !file.path || (await saysPolicyTest(file.path)))) {
      results.push({ file: file.file, test: file.file, cases: [], errors: file.errors });
      continue;
    }
    for (const { object, source } of docs) {
      const shown = docs.length > 1 ? `${file.file} (document ${source.document})` : file.file;
      if (++tests > LIMITS.testFiles) {
        results.push({
          file: shown,
          test: shown,
          cases: [],
          errors: [`more than ${LIMITS.testFiles} PolicyTests in one run: split the run`],
        });
        break;
      }
      const parsed = parsePolicyTest(object);
      if (!parsed.test) {
        results.push({ file: shown, test: shown, cases: [], errors: parsed.problems });
        continue;
      }
      const unknown = unknownRules(parsed.test, known);
      if (unknown.length) {
        results.push({ file: shown, test: parsed.test.metadata.name, cases: [], errors: unknown });
        continue;
      }
      results.push(await runOne(parsed.test, shown, file.path!, io));
    }
    if (tests > LIMITS.testFiles) break;
  }
  if (!results.length) {
    err(`admission-guard test: no PolicyTest files in ${opts.paths.join(", ")}`);
    return 2;
  }

  for (const r of results)
    for (const e of r.errors) err(printable(`admission-guard test: ${r.file}: ${e}`));
  io.stdout.write(testTable(results.filter(r => r.cases.length)));
  if (opts.junit) {
    try {
      const target = resolve(io.cwd, opts.junit);
      await mkdir(dirname(target), { recursive: true });
      await writeFile(target, junitXml(junitSuites(results)));
    } catch (e) {
      err(
        `admission-guard test: --junit ${opts.junit}: cannot write (${(e as NodeJS.ErrnoException).code})`,
      );
      return 2;
    }
  }
  if (results.some(r => r.errors.length)) return 2;
  return results.some(r => r.cases.some(c => c.problems.length)) ? 1 : 0;
}
