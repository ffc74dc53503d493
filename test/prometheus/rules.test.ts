// The alerts the build ships (deploy/monitoring/alerts.yaml → dist/admission-guard-alerts.yaml,
// scripts/overlay/monitoring.ts) through promtool, Prometheus' own checker: the rule file is valid,
// and the unit tests of deploy/monitoring/alerts.test.yaml pass against the built file (the
// placeholders as the build fills them), with a firing and a quiet case for every alert. promtool
// comes with Debian's `prometheus` package (PROMTOOL_BIN overrides). Run `npm run build` first.
import { spawnSync } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, stringify } from "yaml";

const REPO_ROOT = join(__dirname, "..", "..");
const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8"));
const JOB = `pepr-${pkg.pepr.uuid}`;
const RULES = join(REPO_ROOT, "dist", "admission-guard-alerts.yaml");
const TESTS = join(REPO_ROOT, "deploy", "monitoring", "alerts.test.yaml");
const PROMTOOL = process.env.PROMTOOL_BIN ?? "promtool";

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
}
interface AlertTest {
  alertname: string;
  eval_time: string;
  exp_alerts?: unknown[] | null;
}
interface TestGroup {
  name: string;
  alert_rule_test?: AlertTest[];
}

function promtool(args: string[], cwd: string): { code: number; output: string } {
  const run = spawnSync(PROMTOOL, args, { cwd, encoding: "utf8", timeout: 60_000 });
  if (run.error)
    throw new Error(
      `${PROMTOOL} could not run (${run.error.message}): install Debian's prometheus package (apt-get install prometheus), or set PROMTOOL_BIN`,
    );
  return { code: run.status ?? -1, output: `${run.stdout}${run.stderr}` };
}

const alerts = (): string[] =>
  (parse(readFileSync(RULES, "utf8")).groups as { rules: Rule[] }[])
    .flatMap(g => g.rules)
    .flatMap(r => (r.alert ? [r.alert] : []));
/** The test file with the job the build wrote into the rules. */
const testsText = () => readFileSync(TESTS, "utf8").replaceAll("pepr-UUID", JOB);

let dir: string;
beforeAll(() => {
  if (!existsSync(RULES)) throw new Error(`${RULES} is missing: run \`npm run build\` first`);
  dir = mkdtempSync(join(tmpdir(), "admission-guard-rules-"));
  // alerts.test.yaml names its rule file relatively: the built one, side by side.
  copyFileSync(RULES, join(dir, "admission-guard-alerts.yaml"));
  writeFileSync(join(dir, "alerts.test.yaml"), testsText());
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the shipped alerts under promtool", () => {
  it("the built rule file is valid, every rule counted", () => {
    const { code, output } = promtool(["check", "rules", "admission-guard-alerts.yaml"], dir);
    expect({ code, output }).toEqual({ code: 0, output: expect.stringContaining("SUCCESS") });
    expect(output).toContain(`SUCCESS: ${alerts().length} rules found`);
    // The placeholders are gone: the admission targets' job is the module's Service.
    const rules = readFileSync(RULES, "utf8");
    expect(rules).not.toMatch(/pepr-UUID|WEBHOOK_TIMEOUT/);
    expect(rules).toContain(`up{job="${JOB}"}`);
  });

  it("the unit tests of deploy/monitoring/alerts.test.yaml pass against it", () => {
    const { code, output } = promtool(["test", "rules", "alerts.test.yaml"], dir);
    expect({ code, output }).toEqual({ code: 0, output: expect.stringContaining("SUCCESS") });
  });

  it("every alert has a case where it fires and one where it stays quiet", () => {
    const tests = parse(testsText());
    expect(tests.rule_files).toEqual(["admission-guard-alerts.yaml"]);
    const cases = (tests.tests as TestGroup[]).flatMap(t => t.alert_rule_test ?? []);
    const names = alerts();
    expect(names.length).toBeGreaterThanOrEqual(7);
    for (const name of names) {
      const mine = cases.filter(c => c.alertname === name);
      expect({ name, fires: mine.some(c => c.exp_alerts?.length) }).toEqual({ name, fires: true });
      expect({ name, quiet: mine.some(c => !c.exp_alerts?.length) }).toEqual({ name, quiet: true });
    }
    // No case for an alert the rules do not have (a renamed alert would pass unnoticed).
    expect(cases.filter(c => !names.includes(c.alertname))).toEqual([]);
  });

  it("the firing cases hold: promtool fails when an alert's expected firing is taken away", () => {
    for (const name of alerts()) {
      const tests = parse(testsText());
      for (const group of tests.tests as TestGroup[])
        for (const c of group.alert_rule_test ?? [])
          if (c.alertname === name && c.exp_alerts?.length) c.exp_alerts = [];
      const file = `without-${name}.test.yaml`;
      writeFileSync(join(dir, file), stringify(tests));
      const { code, output } = promtool(["test", "rules", file], dir);
      expect({ name, code }).toEqual({ name, code: 1 });
      expect(output).toContain(`alertname: ${name}`);
    }
  });
});
