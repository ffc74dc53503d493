// `npm run demo`: the real admission-guard controller (built by `npm run build`), started locally
// against a small stand-in for the Kubernetes API (no cluster needed), is sent every workload of
// examples/*.yaml as the API server would send it: a Pod is mutated, the patch applied, then the
// patched pod validated; other workloads are validated. Prints what was fixed and what was denied
// with its fix, then stops everything. `tsx scripts/demo.ts DIR` runs DIR/*.yaml instead.
import { relative } from "node:path";
import type { Operation } from "fast-json-patch";
import type { KubeObject } from "../lib/objects/pod";
import { describeObject } from "../lib/objects/pod";
import { admit, type AdmitResult } from "../test/support/admission";
import { REPO_ROOT } from "../test/support/controller";
import { startEnvironment, type Environment } from "../test/support/environment";
import { seedWorkloads } from "../test/support/manifests";

const MAX_CHANGES_SHOWN = 15;
const tty = process.stdout.isTTY;
const paint = (code: number) => (s: string) => (tty ? `\x1b[${code}m${s}\x1b[0m` : s);
const bold = paint(1);
const green = paint(32);
const red = paint(31);
const yellow = paint(33);
const dim = paint(2);

/** The JSON patch of the mutate response as `path = value` lines (Pepr's own annotations left out). */
function patchLines(result: AdmitResult): string[] {
  const patch = result.mutateResponse?.patch;
  if (!patch) return [];
  const ops = JSON.parse(Buffer.from(patch, "base64").toString("utf8")) as Operation[];
  const lines: string[] = [];
  for (const op of ops) {
    if (op.op === "add" && op.path === "/metadata/annotations") {
      const ours = Object.entries(op.value as Record<string, string>).filter(
        ([k]) => !k.includes(".pepr.dev/"),
      );
      for (const [k, v] of ours)
        lines.push(`add /metadata/annotations/${k} = ${JSON.stringify(v)}`);
    } else if (!op.path.includes(".pepr.dev~1")) {
      const value = "value" in op ? ` = ${JSON.stringify(op.value)}` : "";
      // JSON pointer escapes (~1 for "/", ~0 for "~") undone for reading.
      lines.push(`${op.op} ${op.path.replace(/~1/g, "/").replace(/~0/g, "~")}${value}`);
    }
  }
  return lines;
}

function print(obj: KubeObject, file: string, result: AdmitResult) {
  const verdict = result.allowed ? green("ALLOWED") : red("DENIED");
  console.log(`\n${bold(describeObject(obj))}  ${dim(relative(REPO_ROOT, file))}  → ${verdict}`);
  const fixedLines = result.warnings.filter(w => / fixed | will get /.test(w));
  const otherWarnings = result.warnings.filter(w => !fixedLines.includes(w));
  if (obj.kind === "Pod") {
    for (const w of fixedLines) console.log(`  ${green("fixed")}    ${w}`);
    const changes = patchLines(result);
    for (const line of changes.slice(0, MAX_CHANGES_SHOWN))
      console.log(`  ${dim("  patch")}  ${line}`);
    if (changes.length > MAX_CHANGES_SHOWN)
      console.log(
        dim(`           … and ${changes.length - MAX_CHANGES_SHOWN} more patch operations`),
      );
    if (!changes.length && !fixedLines.length) console.log(dim("  nothing to fix"));
  } else {
    for (const w of fixedLines) console.log(`  ${green("on pods")}  ${w}`);
  }
  for (const w of otherWarnings) console.log(`  ${yellow("warning")}  ${w}`);
  if (!result.allowed) {
    for (const line of result.message.split(/; (?=admission-guard[/:])/)) {
      // The last part of a denial: an Exemption is the way out, and who grants it.
      if (line.startsWith("admission-guard:")) {
        console.log(`  ${dim("way out")}  ${line.slice("admission-guard: ".length)}`);
        continue;
      }
      const [what, fix] = line.split(/\. Fix: /);
      console.log(`  ${red("denied")}   ${what}`);
      if (fix) console.log(`  ${bold("fix")}      ${fix}`);
    }
  }
}

async function main(): Promise<number> {
  const started = Date.now();
  const { workloads, cluster, from } = seedWorkloads(process.argv[2]);
  if (!workloads.length) {
    console.error(`no workloads found in ${from}`);
    return 2;
  }
  console.log(
    `admission-guard demo: ${workloads.length} workloads from ${relative(REPO_ROOT, from)}/, ` +
      `${cluster.length} cluster objects, real controller against a local stand-in API`,
  );
  let environment: Environment | undefined;
  try {
    environment = await startEnvironment({ objects: cluster, env: { LOG_LEVEL: "warn" } });
    const { controller } = environment;
    console.log(dim(`controller ready at ${controller.url} in ${Date.now() - started} ms`));
    let denied = 0;
    for (const { file, object } of workloads) {
      // The API server's built-in admission reads the stand-in's LimitRanges, PriorityClasses...
      const result = await admit(controller, object, { api: environment.api });
      if (!result.allowed) denied++;
      print(object, file, result);
    }
    console.log(
      `\n${workloads.length} workloads: ${workloads.length - denied} allowed, ${denied} denied ` +
        dim(`(${((Date.now() - started) / 1000).toFixed(1)} s)`),
    );
    return 0;
  } catch (e) {
    console.error(red(`demo failed: ${e instanceof Error ? e.message : String(e)}`));
    if (environment) console.error(environment.controller.logs().slice(-3000));
    return 1;
  } finally {
    await environment?.stop();
  }
}

void main().then(code => process.exit(code));
