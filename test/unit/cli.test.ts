// The real command (`node bin/admission-guard.mjs`, as npx runs it) and the shipped examples,
// with the module's own capability list. Assertions hold whatever rules the capabilities grow.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { policies } from "../../capabilities/index";
import { podTemplateOf, type KubeObject } from "../../lib/pod";
import { runCheck as spawnCheck } from "../support/check-command";
import { REPO_ROOT as root } from "../support/controller";
import { demoPodYaml, run, tempTree } from "./check-helpers";

const exec = promisify(execFile);

describe("admission-guard as a process", () => {
  it("denies with the capability, rule and fix, exit 1; names a parse error, exit 2", async () => {
    const dir = tempTree({
      "refused.yaml": demoPodYaml("refused", { deny: true }),
      "broken.yaml": `${demoPodYaml("ok")}---\nkind: Pod\nspec: [\n`,
    });
    const denied = await spawnCheck(["refused.yaml"], dir);
    expect(denied.code).toBe(1);
    expect(denied.stdout).toMatch(/DENIED\s+Pod pepr-demo\/refused/);
    expect(denied.stdout).toMatch(/hello-pepr\/no-deny-label: .*\n\s+Fix: remove the label/);

    const broken = await spawnCheck(["broken.yaml"], dir);
    expect(broken.code).toBe(2);
    expect(broken.stderr).toMatch(/broken\.yaml: document 2: not valid YAML/);
  });
});

describe("check stays light and offline", () => {
  it("loads no Pepr and no cluster client", async () => {
    const script = [
      'import { createRequire } from "node:module";',
      'import { register } from "tsx/cjs/api";',
      "register();",
      'const require = createRequire(process.cwd() + "/");',
      'require("./cli/main.ts");',
      "console.log(JSON.stringify(Object.keys(require.cache)));",
    ].join("\n");
    const { stdout } = await exec(process.execPath, ["--input-type=module", "-e", script], {
      cwd: root,
    });
    const loaded: string[] = JSON.parse(stdout);
    expect(loaded.some(f => f.endsWith(join("cli", "check.ts")))).toBe(true);
    const heavy = loaded.filter(f =>
      /node_modules[\\/](pepr|kubernetes-fluent-client|@kubernetes[\\/]client-node)[\\/]/.test(f),
    );
    expect(heavy).toEqual([]);
  });
});

describe("the examples", () => {
  it("are the seeds' workloads, read without errors, with their namespaces in the cluster snapshot", async () => {
    const files = ["gpt4-canary", "llamaindex-trainer", "mlflow-train"].map(
      f => `examples/${f}.yaml`,
    );
    const r = await run(["check", "-o", "json", "--cluster", "examples/cluster", ...files], {
      cwd: root,
      policies,
    });
    expect(r.stderr).toBe("");
    expect(r.code).not.toBe(2);
    expect(r.json.map(j => [j.kind, j.namespace, j.name])).toEqual([
      ["Pod", "gpt4-canary", "test-gpt4"],
      ["Deployment", "gpt4-canary", "gpt4-canary"],
      ["Pod", "llama-index", "llamaindex-trainer"],
      ["Pod", "mlflow-prod", "mlflow-train"],
    ]);
    expect(r.json.every(j => j.handled)).toBe(true);
  });

  it("seed 002: the GPT-4 namespace requires the component gpt4; no pod-level container fields", async () => {
    const r = await run(["check", "-o", "json", "examples"], { cwd: root, policies });
    expect(r.stderr).toBe("");
    const ns = r.json.find(j => j.kind === "Namespace" && j.name === "gpt4-canary");
    const labels = (ns?.object as { metadata: { labels: Record<string, string> } }).metadata.labels;
    expect(labels["admission-guard.dev/require-component"]).toBe("gpt4");
    const workloads = r.json.filter(j => j.kind === "Pod" || j.kind === "Deployment");
    expect(workloads).toHaveLength(4);
    for (const j of workloads) {
      // Seed 002's mistake must not be copied, nor made by a fix: these fields belong to each
      // container's securityContext; Kubernetes has no such pod-level fields.
      const podSpec = podTemplateOf(j.object as KubeObject)!.spec as unknown as {
        securityContext?: Record<string, unknown>;
      };
      expect(podSpec.securityContext?.readOnlyRootFilesystem).toBeUndefined();
      expect(podSpec.securityContext?.allowPrivilegeEscalation).toBeUndefined();
    }
  });
});
