// `admission-guard test` in-process, with the module's own capabilities: the shipped test files
// pass; a planted mismatch of each kind (verdict, rule, fix, field, partial object, resource) fails
// naming the case and what differed; a bad test file is an input error naming the field (exit 2);
// the JUnit report holds hostile names exactly, escaped.
import { execFile } from "node:child_process";
import {
  cpSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { policies, validators } from "../../../capabilities/index";
import { LIMITS } from "../../../cli/policy-test-format";
import { REPO_ROOT as root } from "../../support/controller";
import { run, tempTree } from "./check-helpers";

const exec = promisify(execFile);

/** The capabilities the shipped test files cover, each in a file of its name. */
const COVERED = [
  "image-registry",
  "shared-memory",
  "security-context",
  "labels",
  "service-account",
  "resource-quota",
  "payload-size",
  "exemptions",
];

const test = (argv: string[], cwd = root) => run(["test", ...argv], { cwd, policies });

/** The shipped capability tests (inline resources) copied to a temp dir, one of them changed. */
function planted(file: string, from: string, to: string): string {
  const dir = mkdtempSync(join(tmpdir(), "ag-policy-test-"));
  cpSync(join(root, "examples/tests"), dir, { recursive: true });
  const text = readFileSync(join(dir, file), "utf8");
  expect(text).toContain(from); // the plant hits what the shipped file says
  writeFileSync(join(dir, file), text.replace(from, to));
  return dir;
}

describe("admission-guard test: the shipped test files", () => {
  it("pass: every case of examples/tests, every capability's main rule among them", async () => {
    const r = await test(["examples/tests"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const rows = r.stdout.split("\n").filter(l => / (PASS|FAIL)$/.test(l));
    expect(rows.length).toBeGreaterThanOrEqual(17);
    expect(rows.every(l => l.endsWith("PASS"))).toBe(true);
    // One file per capability (at least its main rule), and the seeds' file. A capability added
    // later brings its own file; these are the ones the shipped files cover.
    const files = readdirSync(join(root, "examples/tests")).map(f => f.replace(/\.yaml$/, ""));
    expect(files).toEqual(expect.arrayContaining([...COVERED, "seeds", "modes"]));
    const names = [...policies, ...validators].map(p => p.name);
    for (const name of COVERED) expect(names).toContain(name);
    expect(r.stdout).toMatch(/, \d+ cases: \d+ passed, 0 failed\n$/);
  });
});

describe("admission-guard test as a process", () => {
  it("npm run test:policies's command passes on the shipped files and writes JUnit with no failure", async () => {
    const out = join(mkdtempSync(join(tmpdir(), "ag-policy-test-")), "junit.xml");
    const script = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).scripts[
      "test:policies"
    ] as string;
    const [node, bin, ...args] = script.split(" ");
    expect(node).toBe("node");
    const r = await exec(process.execPath, [join(root, bin), ...args, "--junit", out], {
      cwd: root,
    });
    expect(r.stderr).toBe("");
    expect(r.stdout).toMatch(/: \d+ passed, 0 failed\n$/);
    const xml = readFileSync(out, "utf8");
    expect(xml).toMatch(
      /<testsuites name="admission-guard test" tests="\d+" failures="0" errors="0">/,
    );
  });
});

describe("admission-guard test: a mismatch fails, naming the case and what differed", () => {
  it.each([
    [
      "verdict",
      "resource-quota.yaml",
      "      verdict: denied\n      rules: [resource-quota/quota-exceeded]",
      "      verdict: allowed\n      rules: [resource-quota/quota-exceeded]",
      "a pod over what the quota has left is denied",
      "verdict: expected allowed, got denied (resource-quota/quota-exceeded)",
    ],
    [
      "rule",
      "image-registry.yaml",
      "rules: [image-registry/registry-not-allowed]",
      "rules: [image-registry/latest-forbidden]",
      "an image of another registry is denied",
      "rules: expected image-registry/latest-forbidden, which did not; image-registry/registry-not-allowed did, not expected",
    ],
    [
      "rule that should not fire",
      "resource-quota.yaml",
      "      verdict: allowed\n      rules: []",
      "      verdict: allowed\n      rules: [resource-quota/node-fit]",
      "a pod within what the quota has left is admitted",
      "rules: expected resource-quota/node-fit, which did not (got [])",
    ],
    [
      "field",
      "security-context.yaml",
      "/spec/securityContext/runAsNonRoot: true",
      "/spec/securityContext/runAsNonRoot: false",
      "a pod with no securityContext is fixed to restricted",
      "field /spec/securityContext/runAsNonRoot: expected false, got true",
    ],
    [
      "field that must be absent",
      "labels.yaml",
      "/metadata/labels/app.kubernetes.io~1component: trainer",
      "/metadata/labels/app.kubernetes.io~1component: null",
      "the component label is taken from app",
      'field /metadata/labels/app.kubernetes.io~1component: expected null, got "trainer"',
    ],
    [
      "partial object",
      "shared-memory.yaml",
      "- mountPath: /dev/shm",
      "- mountPath: /dev/shm2",
      "a GPU pod gets /dev/shm",
      'object /spec/containers/0/volumeMounts/0/mountPath: expected "/dev/shm2", got "/dev/shm"',
    ],
    [
      "fix",
      "seeds.yaml",
      "        - service-account/no-token\n",
      "",
      "gpt4 test pod is fixed to restricted and admitted",
      "fixes: service-account/no-token did, not expected",
    ],
    [
      "resource",
      "labels.yaml",
      "resource: Pod/ml-team/unlabelled",
      "resource: Pod/ml-team/no-such-pod",
      "a pod without the required component is denied",
      "resource Pod/ml-team/no-such-pod: not among the resources judged (Pod/ml-team/labelled, Pod/ml-team/unlabelled)",
    ],
  ])("%s", async (_kind, file, from, to, caseName, problem) => {
    // seeds.yaml names ../*.yaml: its copy sits where it can read them (examples/ in a temp tree).
    const dir = file === "seeds.yaml" ? plantedSeeds(from, to) : planted(file, from, to);
    const r = await test([file === "seeds.yaml" ? "examples/tests/seeds.yaml" : file], dir);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(1);
    const row = r.stdout.split("\n").find(l => l.startsWith(caseName));
    expect(row).toMatch(/ FAIL$/);
    expect(r.stdout).toContain(
      `FAIL ${file === "seeds.yaml" ? "examples/tests/" : ""}${file}: ${caseName} (`,
    );
    expect(r.stdout).toContain(`  ${problem}`);
    // The other cases of the file still pass.
    expect(r.stdout).toMatch(/: \d+ passed, 1 failed\n$/);
  });
});

/** examples/ copied (seeds and cluster with their tests), seeds.yaml changed. */
function plantedSeeds(from: string, to: string): string {
  const dir = mkdtempSync(join(tmpdir(), "ag-policy-test-"));
  cpSync(join(root, "examples"), join(dir, "examples"), { recursive: true });
  const file = join(dir, "examples/tests/seeds.yaml");
  const text = readFileSync(file, "utf8");
  expect(text).toContain(from);
  writeFileSync(file, text.replace(from, to));
  return dir;
}

const header = `apiVersion: admission-guard.dev/v1alpha1
kind: PolicyTest
metadata:
  name: bad
`;
const pod = `resources:
  - apiVersion: v1
    kind: Pod
    metadata: {name: p, namespace: ml}
    spec: {containers: [{name: c, image: nginx:1.27}]}
`;

describe("admission-guard test: a test file is checked like check's input", () => {
  it.each([
    [
      "a verdict that is not one",
      `${header}${pod}cases:\n  - {name: a, resource: Pod/ml/p, expect: {verdict: deny}}\n`,
      'cases[0].expect.verdict: Invalid option: expected one of "allowed"|"warned"|"denied"',
    ],
    [
      "a misspelt field",
      `${header}${pod}cases:\n  - {name: a, resource: Pod/ml/p, expected: {verdict: denied}}\n`,
      'cases[0]: unknown field "expected"',
    ],
    [
      "a rule no capability has",
      `${header}${pod}cases:\n  - {name: a, resource: Pod/ml/p, expect: {verdict: denied, rules: [resource-quota/quota-exeeded]}}\n`,
      'cases[0].expect.rules[0]: no capability reports a rule "resource-quota/quota-exeeded"',
    ],
    [
      "a rule that is not capability/rule",
      `${header}${pod}cases:\n  - {name: a, resource: Pod/ml/p, expect: {verdict: denied, rules: [quota-exceeded]}}\n`,
      "cases[0].expect.rules[0]: must be capability/rule, such as resource-quota/quota-exceeded",
    ],
    [
      "a field that is not a JSON pointer",
      `${header}${pod}cases:\n  - {name: a, resource: Pod/ml/p, expect: {verdict: denied, fields: {spec.x: 1}}}\n`,
      'cases[0].expect.fields["spec.x"]: must be a JSON pointer',
    ],
    [
      "two cases of one name",
      `${header}${pod}cases:\n  - {name: a, resource: Pod/ml/p, expect: {verdict: denied}}\n  - {name: a, resource: Pod/ml/p, expect: {verdict: allowed}}\n`,
      'cases[1].name: another case is named "a" already',
    ],
    [
      "no cases",
      `${header}${pod}cases: []\n`,
      "cases: Too small: expected array to have >=1 items",
    ],
    [
      "another version",
      `${header.replace("v1alpha1", "v1")}${pod}cases:\n  - {name: a, resource: Pod/ml/p, expect: {verdict: denied}}\n`,
      'apiVersion: Invalid input: expected "admission-guard.dev/v1alpha1"',
    ],
    [
      "a bad setting",
      `${header}settings: {registries: {allowd: []}}\n${pod}cases:\n  - {name: a, resource: Pod/ml/p, expect: {verdict: denied}}\n`,
      'unknown setting "registries.allowd"',
    ],
    [
      "a file outside the working directory",
      `${header}resources: [../../etc/passwd]\ncases:\n  - {name: a, resource: Pod/ml/p, expect: {verdict: denied}}\n`,
      'resources: "../../etc/passwd" is outside the working directory',
    ],
    [
      "a resource the API server would refuse",
      `${header}resources:\n  - {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: ml}, spec: {containers: [{name: c}]}}\ncases:\n  - {name: a, resource: Pod/ml/p, expect: {verdict: denied}}\n`,
      "spec.containers[0]: must have required property image",
    ],
    [
      "YAML that does not parse",
      `${header}kind: PolicyTest\ncases: [\n`,
      "t.yaml: document 1: not valid YAML",
    ],
  ])("%s: exit 2, naming the file and the field", async (_what, text, message) => {
    const dir = tempTree({ "tests/t.yaml": text });
    const r = await test(["tests"], dir);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("admission-guard test: tests/t.yaml: ");
    expect(r.stderr).toContain(message);
  });

  it("a link beside the test that leads outside the working directory is refused, not read", async () => {
    const outside = tempTree({
      "secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n",
    });
    const dir = tempTree({
      "tests/t.yaml": `${header}resources: [leak.yaml]\ncases:\n  - {name: a, resource: Secret/s, expect: {verdict: allowed}}\n`,
    });
    symlinkSync(join(outside, "secret.yaml"), join(dir, "tests/leak.yaml"));
    const r = await test(["tests/t.yaml"], dir);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('resources: "leak.yaml" is outside the working directory');
    expect(r.stdout).not.toContain("Secret/s");
  });

  it("is bounded: an oversized file is not read; too many cases are refused", async () => {
    const big = `${header}${pod}cases:\n  - {name: a, resource: Pod/ml/p, expect: {verdict: allowed}}\n#${"x".repeat(LIMITS.fileBytes)}\n`;
    const many =
      `${header}${pod}cases:\n` +
      Array.from(
        { length: LIMITS.entries + 1 },
        (_, i) => `  - {name: c${i}, resource: Pod/ml/p, expect: {verdict: allowed}}\n`,
      ).join("");
    const dir = tempTree({ "big/t.yaml": big, "many/t.yaml": many });
    const tooBig = await test(["big"], dir);
    expect(tooBig.code).toBe(2);
    expect(tooBig.stderr).toContain(`more than the ${LIMITS.fileBytes} a file may have`);
    const tooMany = await test(["many"], dir);
    expect(tooMany.code).toBe(2);
    expect(tooMany.stderr).toContain(
      `cases: Too big: expected array to have <=${LIMITS.entries} items`,
    );
  });

  it("a link to a device beside the tests (/dev/zero, no size to bound) is an error, not read", async () => {
    const dir = tempTree({
      "tests/t.yaml": `${header}${pod}cases:\n  - {name: a, resource: Pod/ml/p, expect: {verdict: allowed}}\n`,
    });
    symlinkSync("/dev/zero", join(dir, "tests/zero.yaml"));
    const r = await test(["tests"], dir);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("tests/zero.yaml: not a regular file");
  });

  it("other files beside the tests (a settings file, resources) are not tests, and not errors", async () => {
    const dir = tempTree({
      "tests/settings.yaml": "registries:\n  allowed: [registry.example.com]\n",
      "tests/pod.yaml":
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml}\nspec: {containers: [{name: c, image: nginx:1.27}]}\n",
      "tests/t.yaml": `${header}settings: settings.yaml\nresources: [pod.yaml]\ncases:\n  - {name: a, resource: Pod/p, expect: {verdict: denied, rules: [image-registry/registry-not-allowed]}}\n`,
    });
    const r = await test(["tests"], dir);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^a +Pod\/p +denied +denied +PASS$/m);
  });

  it("no test file at all is a usage error, not a pass", async () => {
    const dir = tempTree({ "tests/pod.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n" });
    const r = await test(["tests"], dir);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("no PolicyTest files in tests");
  });
});

/** Attribute values of one element, unescaped. */
function attributesOf(element: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [, name, value] of element.matchAll(/ (\w+)="([^"]*)"/g))
    out[name] = value.replace(/&(#\d+|\w+);/g, (_, e: string) =>
      e.startsWith("#")
        ? String.fromCharCode(Number(e.slice(1)))
        : { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" }[e]!,
    );
  return out;
}

describe("admission-guard test --junit", () => {
  it("writes every case once, hostile names escaped and kept exactly; the terminal gets no escapes", async () => {
    const hostile = [
      `a "quoted" <b>&amp;</b> 'case'`,
      "]]><injected attr='x'/><!--",
      "tab\tand\nnewline",
      "an ANSI \u001b[31mred\u001b[0m name",
    ];
    const cases = hostile
      .map(
        (name, i) =>
          `  - name: ${JSON.stringify(name)}\n    resource: Pod/ml/p\n    expect: {verdict: ${i === 0 ? "denied" : "allowed"}}\n`,
      )
      .join("");
    const dir = tempTree({ "tests/t.yaml": `${header}${pod}cases:\n${cases}` });
    const r = await test(["--junit", "out/report.xml", "tests"], join(dir));
    expect(r.code).toBe(1);
    expect(r.stdout).not.toContain("\u001b");
    expect(r.stdout).toContain("an ANSI \\u001b[31mred\\u001b[0m name");

    // The parent folder made, as CI report paths want.
    const xml = readFileSync(join(dir, "out/report.xml"), "utf8");
    expect(xml.match(/<\?xml /g)).toHaveLength(1);
    expect(xml.trimEnd().endsWith("</testsuites>")).toBe(true);
    // Every < and & in the file is markup or an entity: no name opened an element or a comment.
    const elements = xml.match(/<[^>]*>/g)!;
    expect(elements.every(e => /^<(\?xml [^<]*\?|\/?[a-z]+( \w+="[^"<]*")*\/?)>$/.test(e))).toBe(
      true,
    );
    expect(xml.replace(/<[^>]*>/g, "")).not.toMatch(/[<]|&(?!(amp|lt|gt|quot|apos|#\d+);)/);
    expect(xml).not.toContain("\u001b");
    // Each case once, its name exactly as written (the escape character made U+FFFD, not valid XML).
    const testcases = elements.filter(e => e.startsWith("<testcase "));
    expect(testcases.map(e => attributesOf(e).name)).toEqual(
      hostile.map(n => n.replaceAll("\u001b", "\ufffd")),
    );
    expect(attributesOf(elements.find(e => e.startsWith("<testsuites "))!)).toMatchObject({
      tests: "4",
      failures: "1",
      errors: "0",
    });
    const failure = elements.find(e => e.startsWith("<failure "))!;
    expect(attributesOf(failure).message).toBe("verdict: expected denied, got allowed");
  });
});
