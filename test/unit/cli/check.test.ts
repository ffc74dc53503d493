// `admission-guard check` in-process: inputs, options, reports, --fix and exit codes, with the
// hello-pepr capability (acts in pepr-demo, refuses pods labelled hello.admission-guard.dev/deny).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse as parseYaml, parseAllDocuments } from "yaml";
import { policies } from "../../../capabilities";
import { helloPeprPolicy, HELLO_DENY_LABEL, HELLO_LABEL } from "../../../hello-pepr";
import { demoPodYaml, run, tempTree } from "./check-helpers";
import { asArea } from "../../support/policies";

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: pepr-demo
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers: [{name: web, image: nginx:1.27}]
`;
const configMap = `apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: pepr-demo}
data: {a: "1"}
`;

const nsList = (labels: Record<string, string>) =>
  JSON.stringify({
    apiVersion: "v1",
    kind: "List",
    items: [{ apiVersion: "v1", kind: "Namespace", metadata: { name: "pepr-demo", labels } }],
  });

describe("check: inputs", () => {
  it("reads multi-document YAML and reports each object with its source", async () => {
    const dir = tempTree({
      "all.yaml": `${demoPodYaml("one")}---\n${deployment}---\n${configMap}---\n`,
    });
    const r = await run(["check", "-o", "json", "all.yaml"], { cwd: dir });
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("");
    expect(r.json.map(j => [j.kind, j.name, j.source])).toEqual([
      ["Pod", "one", { file: "all.yaml", document: 1 }],
      ["Deployment", "web", { file: "all.yaml", document: 2 }],
      ["ConfigMap", "settings", { file: "all.yaml", document: 3 }],
    ]);
    expect(r.json.map(j => j.handled)).toEqual([true, true, false]);
  });

  it("reads JSON files", async () => {
    const pod = parseYaml(demoPodYaml("from-json", { deny: true }));
    const dir = tempTree({ "pod.json": JSON.stringify(pod, null, 2) });
    const r = await run(["check", "-o", "json", "pod.json"], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.json).toHaveLength(1);
    expect(r.json[0]).toMatchObject({ kind: "Pod", name: "from-json", allowed: false });
  });

  it("expands List and PodList items, numbering them", async () => {
    const list = {
      apiVersion: "v1",
      kind: "List",
      items: [parseYaml(demoPodYaml("a")), parseYaml(deployment)],
    };
    const podList = { apiVersion: "v1", kind: "PodList", items: [parseYaml(demoPodYaml("b"))] };
    const dir = tempTree({
      "get.yaml": `${JSON.stringify(list)}\n---\n${JSON.stringify(podList)}\n`,
    });
    const r = await run(["check", "-o", "json", "get.yaml"], { cwd: dir });
    expect(r.code).toBe(0);
    expect(r.json.map(j => [j.name, j.source])).toEqual([
      ["a", { file: "get.yaml", document: 1, item: 1 }],
      ["web", { file: "get.yaml", document: 1, item: 2 }],
      ["b", { file: "get.yaml", document: 2, item: 1 }],
    ]);
  });

  it("reads stdin for -", async () => {
    const r = await run(["check", "-o", "json", "-"], {
      stdin: demoPodYaml("piped", { deny: true }),
    });
    expect(r.code).toBe(1);
    expect(r.json[0]).toMatchObject({ name: "piped", source: { file: "<stdin>", document: 1 } });
  });

  it("walks directories recursively for .yaml, .yml and .json, skipping hidden folders", async () => {
    const dir = tempTree({
      "manifests/a.yaml": demoPodYaml("a"),
      "manifests/nested/b.yml": demoPodYaml("b"),
      "manifests/nested/c.json": JSON.stringify(parseYaml(demoPodYaml("c"))),
      "manifests/notes.txt": "kind: Pod\n",
      "manifests/.git/x.yaml": demoPodYaml("hidden"),
    });
    const r = await run(["check", "-o", "json", "manifests"], { cwd: dir });
    expect(r.code).toBe(0);
    expect(r.json.map(j => [j.name, (j.source as { file: string }).file])).toEqual([
      ["a", join("manifests", "a.yaml")],
      ["b", join("manifests", "nested", "b.yml")],
      ["c", join("manifests", "nested", "c.json")],
    ]);
  });

  it("reads a file named twice only once", async () => {
    const dir = tempTree({ "m/a.yaml": demoPodYaml("a") });
    const r = await run(["check", "-o", "json", "m/a.yaml", "./m/a.yaml", "m"], { cwd: dir });
    expect(r.json.map(j => j.name)).toEqual(["a"]);
  });

  it("puts objects without a namespace in --namespace (default: default)", async () => {
    const dir = tempTree({ "pod.yaml": demoPodYaml("nameless", { namespace: "" }) });
    const inDefault = await run(["check", "-o", "json", "pod.yaml"], { cwd: dir });
    expect(inDefault.json[0]).toMatchObject({ namespace: "default", handled: false });
    const inDemo = await run(["check", "-o", "json", "-n", "pepr-demo", "pod.yaml"], { cwd: dir });
    expect(inDemo.json[0]).toMatchObject({ namespace: "pepr-demo", handled: true });
    expect((inDemo.json[0].changes as unknown[]).length).toBeGreaterThan(0);
  });
});

describe("check: settings and cluster", () => {
  it("applies a settings file", async () => {
    const dir = tempTree({
      "pod.yaml": demoPodYaml("p", { deny: true }),
      "settings.yaml": "ignoredNamespaces: [pepr-demo]\n",
      "warn.json": JSON.stringify({ mode: "warn" }),
    });
    const ignored = await run(["check", "-o", "json", "--settings", "settings.yaml", "pod.yaml"], {
      cwd: dir,
    });
    expect(ignored.code).toBe(0);
    expect(ignored.json[0]).toMatchObject({ handled: false, allowed: true });
    const warn = await run(["check", "-o", "json", "--settings", "warn.json", "pod.yaml"], {
      cwd: dir,
    });
    expect(warn.code).toBe(0);
    expect(warn.json[0]).toMatchObject({ mode: "warn", allowed: true });
  });

  it.each([
    ["mode: loud\n", /settings\.yaml.*mode/s],
    ["securityContext: {runAsUser: 0}\n", /securityContext\.runAsUser/],
    ["modes: warn\n", /unknown setting "modes"/],
    ["- a\n", /settings\.yaml: settings must be a mapping/],
    ["mode: [\n", /settings\.yaml: not valid YAML/],
  ])("rejects a bad settings file (%j) naming the problem, exit 2", async (content, message) => {
    const dir = tempTree({ "pod.yaml": demoPodYaml("p"), "settings.yaml": content });
    const r = await run(["check", "--settings", "settings.yaml", "pod.yaml"], { cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe("");
  });

  it("reads a cluster snapshot directory: the namespace's mode label turns denial into a warning", async () => {
    const dir = tempTree({
      "pod.yaml": demoPodYaml("p", { deny: true }),
      "cluster/namespaces.yaml": nsList({ "admission-guard.dev/mode": "warn" }),
      "cluster/more/empty.yaml": "# nothing yet\n",
    });
    const without = await run(["check", "-o", "json", "pod.yaml"], { cwd: dir });
    expect(without.code).toBe(1);
    const withCluster = await run(["check", "-o", "json", "--cluster", "cluster", "pod.yaml"], {
      cwd: dir,
    });
    expect(withCluster.code).toBe(0);
    expect(withCluster.json[0]).toMatchObject({ mode: "warn", allowed: true });
    expect((withCluster.json[0].warnings as string[]).join("\n")).toContain(HELLO_DENY_LABEL);
  });

  it("takes Namespaces from the inputs when the snapshot does not have them", async () => {
    const ns = JSON.parse(nsList({ "admission-guard.dev/mode": "off" })).items[0];
    const dir = tempTree({ "app.yaml": `${JSON.stringify(ns)}\n---\n${demoPodYaml("p")}` });
    const r = await run(["check", "-o", "json", "app.yaml"], { cwd: dir });
    expect(r.json.map(j => [j.kind, j.handled])).toEqual([
      ["Namespace", false],
      ["Pod", false],
    ]);
    expect(r.json[0].namespace).toBe("");
  });

  it("stops with exit 2 when the cluster snapshot cannot be read", async () => {
    const dir = tempTree({ "pod.yaml": demoPodYaml("p"), "cluster.yaml": "kind: [\n" });
    const r = await run(["check", "--cluster", "cluster.yaml", "pod.yaml"], { cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--cluster cluster\.yaml: document 1: not valid YAML/);
    const missing = await run(["check", "--cluster", "nowhere", "pod.yaml"], { cwd: dir });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/nowhere: cannot read/);
  });

  it("does not fix pods on --operation UPDATE, but still checks them", async () => {
    const dir = tempTree({ "pod.yaml": demoPodYaml("p", { deny: true }) });
    const r = await run(["check", "-o", "json", "--operation", "update", "pod.yaml"], {
      cwd: dir,
    });
    expect(r.code).toBe(1);
    expect(r.json[0].changes).toEqual([]);
  });
});

describe("check: reports", () => {
  it("json: one line per object with the documented fields", async () => {
    const dir = tempTree({
      "all.yaml": `${demoPodYaml("bad", { deny: true })}---\n${deployment}`,
    });
    const r = await run(["check", "--output", "json", "all.yaml"], { cwd: dir });
    expect(r.code).toBe(1);
    const [pod, deploy] = r.json;
    expect(Object.keys(pod).sort()).toEqual(
      [
        "allowed",
        "changes",
        "handled",
        "kind",
        "mode",
        "name",
        "namespace",
        "object",
        "source",
        "violations",
        "warnings",
      ].sort(),
    );
    expect(pod).toMatchObject({ kind: "Pod", namespace: "pepr-demo", name: "bad", allowed: false });
    expect(pod.changes).toEqual([
      { capability: "hello-pepr", rule: "greet", message: expect.stringContaining(HELLO_LABEL) },
    ]);
    expect(pod.violations).toEqual([
      {
        capability: "hello-pepr",
        rule: "no-deny-label",
        message: expect.stringContaining(HELLO_DENY_LABEL),
        fix: expect.stringContaining("remove the label"),
        severity: "deny",
      },
    ]);
    // The object after mutation: the pod carries the fix and the trace annotation.
    const podObject = pod.object as { metadata: { labels: Record<string, string> } };
    expect(podObject.metadata.labels[HELLO_LABEL]).toBe("true");
    // A workload: its template fixed as its pods will be, and a warning saying so.
    const template = (
      deploy.object as { spec: { template: { metadata: { labels: Record<string, string> } } } }
    ).spec.template;
    expect(template.metadata.labels).toEqual({ app: "web", [HELLO_LABEL]: "true" });
    expect((deploy.warnings as string[]).join("\n")).toMatch(/when Deployment creates them/);
  });

  it("text: what was fixed, what is denied with its fix, a summary; no colors off a TTY", async () => {
    const dir = tempTree({
      "all.yaml": `${demoPodYaml("bad", { deny: true })}---\n${deployment}---\n${configMap}`,
    });
    const r = await run(["check", "all.yaml"], { cwd: dir });
    expect(r.code).toBe(1);
    const out = r.stdout;
    expect(out).toMatch(/DENIED\s+Pod pepr-demo\/bad\s+\[all\.yaml: document 1\]/);
    expect(out).toMatch(/fixed\s+hello-pepr\/greet: metadata\.labels/);
    expect(out).toMatch(/denied\s+hello-pepr\/no-deny-label: the pod carries/);
    expect(out).toMatch(/\n\s+Fix: remove the label/);
    expect(out).toMatch(/allowed\s+Deployment pepr-demo\/web/);
    expect(out).toMatch(/pods get\s+hello-pepr\/greet: spec\.template\.metadata\.labels/);
    expect(out).toMatch(/3 objects: 2 checked, 1 denied, 2 with fixes, 1 not handled .*ConfigMap/);
    expect(out).not.toContain("ConfigMap pepr-demo/settings");
    expect(out).not.toContain("\u001b[");
    const tty = await run(["check", "all.yaml"], { cwd: dir, tty: true });
    expect(tty.stdout).toContain("\u001b[31mDENIED");
  });

  it("a folder that holds policy test files too (examples/): they are named as such, not judged", async () => {
    const policyTest =
      "apiVersion: admission-guard.dev/v1alpha1\nkind: PolicyTest\nmetadata: {name: t}\n";
    const dir = tempTree({ "pod.yaml": demoPodYaml("ok"), "tests/t.yaml": policyTest });
    const r = await run(["check", "."], { cwd: dir });
    expect(r.stdout).toMatch(
      /2 objects: 1 checked, 0 denied, 1 with fixes, 1 policy test file \(run by admission-guard test\)\n$/,
    );
    expect(r.stdout).not.toContain("not handled");
  });
});

describe("check: text report in warn mode", () => {
  it("shows violations as warnings with their fix, and notes", async () => {
    const noting = asArea({
      name: "noting",
      description: "adds a note",
      rules: [],
      check: () => ({ changes: [], violations: [], warnings: ["quota not checked: no data"] }),
    });
    const dir = tempTree({
      "pod.yaml": demoPodYaml("p", { deny: true }),
      "ns.json": nsList({ "admission-guard.dev/mode": "warn" }),
    });
    const r = await run(["check", "--cluster", "ns.json", "pod.yaml"], {
      cwd: dir,
      policies: [helloPeprPolicy, noting],
    });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/allowed\s+Pod pepr-demo\/p \(namespace mode warn\)/);
    expect(r.stdout).toMatch(/warning\s+hello-pepr\/no-deny-label: .*\n\s+Fix: remove the label/);
    expect(r.stdout).toMatch(/note\s+quota not checked: no data/);
    // Each finding once: the warning lines that restate a change or a violation are not repeated.
    expect(r.stdout.match(/no-deny-label/g)).toHaveLength(1);
    expect(r.stdout.match(/hello-pepr\/greet:/g)).toHaveLength(1);
  });
});

describe("check: --fix", () => {
  it("rewrites files with the fixed objects, keeping comments, other documents and quoting; a re-check finds nothing more to fix", async () => {
    const original = `# team manifests\n${demoPodYaml("p")}---\n${configMap}---\n${deployment}`;
    const dir = tempTree({ "app.yaml": original });
    const first = await run(["check", "--fix", "app.yaml"], { cwd: dir });
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/fixed: app\.yaml \(2 objects changed\)/);

    const text = readFileSync(join(dir, "app.yaml"), "utf8");
    expect(text.startsWith("# team manifests\n")).toBe(true);
    expect(text).toContain('data: { a: "1" }');
    const docs = parseAllDocuments(text).map(d => d.toJS());
    expect(docs).toHaveLength(3);
    expect(docs[0].metadata.labels[HELLO_LABEL]).toBe("true");
    // The trace annotation records changes made at admission; it is not written into manifests.
    expect(docs[0].metadata.annotations).toBeUndefined();
    expect(docs[1]).toEqual(parseYaml(configMap));
    expect(docs[2].spec.template.metadata.labels[HELLO_LABEL]).toBe("true");
    expect(docs[2].spec.selector).toEqual({ matchLabels: { app: "web" } });

    const again = await run(["check", "-o", "json", "app.yaml"], { cwd: dir });
    expect(again.code).toBe(0);
    expect(again.json.flatMap(j => j.changes as unknown[])).toEqual([]);
    const third = await run(["check", "--fix", "app.yaml"], { cwd: dir });
    expect(third.stdout).not.toContain("fixed: app.yaml");
    expect(readFileSync(join(dir, "app.yaml"), "utf8")).toBe(text);
  });

  it("fixes List items and JSON files", async () => {
    const list = { apiVersion: "v1", kind: "List", items: [parseYaml(demoPodYaml("a"))] };
    const dir = tempTree({
      "list.json": JSON.stringify(list),
      "untouched.json": JSON.stringify(parseYaml(configMap)),
    });
    const r = await run(["check", "--fix", "list.json", "untouched.json"], { cwd: dir });
    expect(r.code).toBe(0);
    const fixed = JSON.parse(readFileSync(join(dir, "list.json"), "utf8"));
    expect(fixed.items[0].metadata.labels[HELLO_LABEL]).toBe("true");
    expect(readFileSync(join(dir, "untouched.json"), "utf8")).toBe(
      JSON.stringify(parseYaml(configMap)),
    );
  });

  it("prints the fixed YAML of stdin to stdout and the report to stderr", async () => {
    const r = await run(["check", "--fix", "-"], {
      stdin: `${demoPodYaml("p")}---\n${configMap}`,
    });
    expect(r.code).toBe(0);
    const docs = parseAllDocuments(r.stdout).map(d => d.toJS());
    expect(docs[0].metadata.labels[HELLO_LABEL]).toBe("true");
    expect(docs[1]).toEqual(parseYaml(configMap));
    expect(r.stderr).toMatch(/allowed\s+Pod pepr-demo\/p/);
  });

  it("does not print fixed YAML for stdin that has errors", async () => {
    const r = await run(["check", "--fix", "-"], { stdin: `${demoPodYaml("p")}---\nkind: [\n` });
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(/not fixed: <stdin>/);
  });

  it("does not rewrite a file that has errors", async () => {
    const content = `${demoPodYaml("p")}---\nkind: [\n`;
    const dir = tempTree({ "half.yaml": content });
    const r = await run(["check", "--fix", "half.yaml"], { cwd: dir });
    expect(r.code).toBe(2);
    expect(readFileSync(join(dir, "half.yaml"), "utf8")).toBe(content);
  });
});

describe("check: errors and exit codes", () => {
  it("exits 0 when all are allowed, 1 when any is denied", async () => {
    const dir = tempTree({
      "ok.yaml": demoPodYaml("ok"),
      "bad.yaml": demoPodYaml("bad", { deny: true }),
    });
    expect((await run(["check", "ok.yaml"], { cwd: dir })).code).toBe(0);
    expect((await run(["check", "ok.yaml", "bad.yaml"], { cwd: dir })).code).toBe(1);
  });

  it.each([
    ["a YAML syntax error", "kind: Pod\nspec: [\n", /bad\.yaml: document 2: not valid YAML/],
    ["a document without kind", "metadata: {name: x}\n", /bad\.yaml: document 2: has no kind/],
    ["a scalar document", "just a string\n", /bad\.yaml: document 2: a string, not a Kubernetes/],
    ["a list document", "- kind: Pod\n", /bad\.yaml: document 2: a list, not a Kubernetes/],
    ["metadata that is not a mapping", "kind: Pod\nmetadata: x\n", /document 2: Pod: metadata/],
    [
      "a namespace that is not a string",
      "kind: Pod\nmetadata: {namespace: 5}\n",
      /document 2: Pod: metadata\.namespace is a number/,
    ],
    [
      "a List item without kind",
      "kind: List\nitems: [{kind: Pod, spec: {}}, {a: 1}]\n",
      /bad\.yaml: document 2, item 2: has no kind/,
    ],
    ["List items that are not a list", "kind: List\nitems: 3\n", /document 2: List items is/],
  ])("names the file and document for %s, exit 2", async (_what, doc, message) => {
    const dir = tempTree({ "bad.yaml": `${demoPodYaml("first")}---\n${doc}` });
    const r = await run(["check", "-o", "json", "bad.yaml"], { cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
    // The good document is still checked and reported.
    expect(r.json.map(j => j.name)).toContain("first");
  });

  it("names a JSON syntax error", async () => {
    const dir = tempTree({ "bad.json": '{"kind": "Pod",' });
    const r = await run(["check", "bad.json"], { cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/bad\.json: document 1: not valid JSON/);
  });

  it("skips empty documents and tolerates empty files", async () => {
    const dir = tempTree({ "empty.yaml": "", "seps.yaml": `---\n---\n${demoPodYaml("p")}---\n` });
    const r = await run(["check", "-o", "json", "empty.yaml", "seps.yaml"], { cwd: dir });
    expect(r.code).toBe(0);
    expect(r.json.map(j => j.name)).toEqual(["p"]);
  });

  it.each([
    [["check"], /no input/],
    [["check", "--bogus", "x.yaml"], /Unknown option '--bogus'/],
    [["check", "--output", "xml", "x.yaml"], /--output must be text, json, policyreport/],
    [["check", "--operation", "DELETE", "x.yaml"], /--operation must be CREATE or UPDATE/],
    [["check", "missing.yaml"], /missing\.yaml: cannot read \(ENOENT\)/],
    [["check", "--cluster", "-", "x.yaml"], /not stdin/],
    [["frobnicate"], /unknown command "frobnicate"/],
    [[], /Usage: admission-guard/],
  ])("usage error %j exits 2", async (argv, message) => {
    const r = await run(argv, { cwd: tempTree({}) });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
  });

  it("reports a directory without manifests", async () => {
    const dir = tempTree({ "empty/readme.txt": "hi" });
    const r = await run(["check", "empty"], { cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/empty: no \.yaml, \.yml or \.json files/);
  });

  it("prints help with exit 0", async () => {
    for (const argv of [["--help"], ["check", "--help"]]) {
      const r = await run(argv);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/--cluster FILE\|DIR/);
      expect(r.stdout).toMatch(/Exit codes: 0/);
    }
  });

  it("reports a rule that throws as a violation, not a crash", async () => {
    const broken = asArea({
      name: "broken",
      description: "throws",
      rules: [],
      check: () => {
        throw new Error("boom");
      },
    });
    const dir = tempTree({ "pod.yaml": demoPodYaml("p") });
    const r = await run(["check", "-o", "json", "pod.yaml"], { cwd: dir, policies: [broken] });
    expect(r.code).toBe(1);
    expect(r.json[0].violations).toEqual([
      expect.objectContaining({ capability: "broken", rule: "internal-error" }),
    ]);
  });
});

describe("check: manifests read as the API server reads them", () => {
  const fixtures = join(__dirname, "../..", "fixtures", "check");

  it("refuses the canary's 'corrected' Deployment: each misplaced field named, with where it belongs, exit 2", async () => {
    const r = await run(["check", join(fixtures, "gpt4-canary-after.yaml")], { policies });
    expect(r.code).toBe(2);
    const lines = r.stderr.trim().split("\n");
    expect(lines).toEqual([
      expect.stringMatching(
        /gpt4-canary-after\.yaml: document 1: Deployment gpt4-canary\/gpt4-canary: spec\.template\.spec\.securityContext\.readOnlyRootFilesystem: unknown field, which the API server refuses; it belongs in each container's securityContext: spec\.template\.spec\.containers\[\*\]\.securityContext\.readOnlyRootFilesystem$/,
      ),
      expect.stringMatching(
        /spec\.template\.spec\.securityContext\.allowPrivilegeEscalation: unknown field, .* spec\.template\.spec\.containers\[\*\]\.securityContext\.allowPrivilegeEscalation$/,
      ),
    ]);
    // No rule ran on it: it is an input error, not a verdict.
    expect(r.stdout).not.toContain("DENIED");
  });

  it("names a wrong type or value with its field", async () => {
    const dir = tempTree({
      "pod.yaml":
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: x}\nspec:\n  restartPolicy: Sometimes\n  containers: [{name: c, image: 5}]\n",
    });
    const r = await run(["check", "pod.yaml"], { cwd: dir, policies });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("Pod x/p: spec.containers[0].image: must be string");
    expect(r.stderr).toContain(
      'Pod x/p: spec.restartPolicy: must be equal to one of the allowed values ("Always", "Never", "OnFailure")',
    );
  });

  it("admits a restricted pod with a volume that names no source: the API server makes it an emptyDir", async () => {
    const r = await run(
      ["check", "-o", "json", join(fixtures, "restricted-volume-without-source.yaml")],
      { policies },
    );
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.json[0]).toMatchObject({ name: "scratch-volumes", allowed: true });
    expect(JSON.stringify(r.json[0])).not.toContain("restrictedVolumes");
  });
});

describe("check: Exemptions and PolicyReports", () => {
  const privileged = `apiVersion: v1
kind: Pod
metadata: {name: driver, namespace: gpu-operator, labels: {app.kubernetes.io/component: driver}}
spec:
  containers: [{name: d, image: ghcr.io/nvidia/driver:550, securityContext: {privileged: true}}]
`;
  const exemption = (namespace: string) => `apiVersion: admission-guard.dev/v1alpha1
kind: Exemption
metadata: {name: gpu-driver, namespace: ${namespace}}
spec:
  reason: the driver loads kernel modules
  expires: "${new Date(Date.now() + 86400_000).toISOString()}"
  match: {namespaces: [gpu-operator], names: [driver]}
  waive: [{capability: security-context, rules: [privileged, allowPrivilegeEscalation]}]
`;

  it("--cluster honours the Exemptions of the snapshot as the webhook does, and only in their namespace", async () => {
    const dir = tempTree({
      "pod.yaml": privileged,
      "cluster/ok.yaml": exemption("admission-guard-exemptions"),
      "elsewhere/self.yaml": exemption("gpu-operator"),
    });
    const without = await run(["check", "pod.yaml"], { cwd: dir, policies });
    expect(without.code).toBe(1);
    expect(without.stdout).toContain(
      "whoever may write Exemptions in namespace admission-guard-exemptions",
    );
    const exempted = await run(["check", "--cluster", "cluster", "-o", "json", "pod.yaml"], {
      cwd: dir,
      policies,
    });
    expect(exempted.code).toBe(0);
    expect(exempted.json[0].warnings).toContainEqual(
      expect.stringContaining(
        "privileged waived by Exemption admission-guard-exemptions/gpu-driver",
      ),
    );
    const selfGranted = await run(["check", "--cluster", "elsewhere", "pod.yaml"], {
      cwd: dir,
      policies,
    });
    expect(selfGranted.code).toBe(1);
  });

  it("judges an Exemption manifest as the webhook would", async () => {
    const dir = tempTree({ "ex.yaml": exemption("gpu-operator") });
    const r = await run(["check", "ex.yaml"], { cwd: dir, policies });
    expect(r.code).toBe(1);
    expect(r.stdout).toContain("exemptions/exemption-namespace");
  });

  it("-o policyreport prints a PolicyReport per namespace, with each object's results", async () => {
    const dir = tempTree({
      "pods.yaml": `${privileged}---\n${demoPodYaml("greeted")}`,
    });
    const r = await run(["check", "-o", "policyreport", "pods.yaml"], { cwd: dir, policies });
    expect(r.code).toBe(1);
    const reports = parseAllDocuments(r.stdout).map(d => d.toJS());
    expect(reports.map(p => [p.kind, p.metadata.namespace])).toEqual([
      ["PolicyReport", "gpu-operator"],
      ["PolicyReport", "pepr-demo"],
    ]);
    const gpu = reports[0];
    expect(gpu.apiVersion).toBe("wgpolicyk8s.io/v1alpha2");
    expect(gpu.results[0]).toMatchObject({
      policy: "security-context",
      rule: "privileged",
      result: "fail",
      resources: [{ kind: "Pod", name: "driver", namespace: "gpu-operator" }],
    });
    expect(gpu.results[0].properties.fix).toContain("privileged to false");
    expect(gpu.summary.fail).toBe(
      gpu.results.filter((x: { result: string }) => x.result === "fail").length,
    );
    expect(gpu.summary.pass).toBeGreaterThan(10);
  });

  it("-o openreports prints the same reports as openreports.io Reports", async () => {
    const dir = tempTree({
      "pods.yaml": `${privileged}---\n${demoPodYaml("greeted")}`,
    });
    const out = async (format: string) => {
      const r = await run(["check", "-o", format, "pods.yaml"], { cwd: dir, policies });
      expect(r.code).toBe(1);
      return parseAllDocuments(r.stdout).map(d => d.toJS());
    };
    const [policyReports, reports] = [await out("policyreport"), await out("openreports")];
    expect(reports.map(p => [p.apiVersion, p.kind, p.metadata.namespace])).toEqual([
      ["openreports.io/v1alpha1", "Report", "gpu-operator"],
      ["openreports.io/v1alpha1", "Report", "pepr-demo"],
    ]);
    expect(reports[0].source).toBe("admission-guard");
    // Each run stamps its own time.
    const untimed = (docs: { results: { timestamp?: unknown }[] }[]) =>
      docs.map(d => d.results.map(r => ({ ...r, timestamp: undefined })));
    expect(untimed(reports)).toEqual(untimed(policyReports));
    expect(reports.map(p => p.summary)).toEqual(policyReports.map(p => p.summary));
  });
});
