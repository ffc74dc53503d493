// The real command (`node bin/admission-guard.mjs`, as npx runs it) and the shipped examples,
// with the module's own capability list. Assertions hold whatever rules the capabilities grow.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { policies } from "../../../capabilities/index";
import type { KubeObject } from "../../../lib/objects/pod";
import { podTemplateOf } from "../../../lib/workload-kinds/built-in";
import { runCheck as spawnCheck } from "../../support/check-command";
import { REPO_ROOT as root } from "../../support/controller";
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

describe("check stays offline", () => {
  // Its capabilities are Pepr capabilities (capabilities/index.ts), so `check` loads Pepr to read
  // which policy each runs — and nothing more: no server, no connection to a cluster.
  it("opens no network connection and starts no server, with a kubeconfig at hand", async () => {
    const dir = tempTree({
      "offline.cjs": [
        'const net = require("node:net");',
        "const refuse = what => function () { throw new Error(`check must stay offline: ${what}`); };",
        'net.Socket.prototype.connect = refuse("a connection");',
        'net.Server.prototype.listen = refuse("a server");',
      ].join("\n"),
      // A cluster a careless client would try to reach.
      kubeconfig:
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: https://127.0.0.1:1}}]\n" +
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
    });
    // The guard works: a connection attempt under it fails.
    const probe = await exec(
      process.execPath,
      ["-e", 'require("node:net").connect(1, "127.0.0.1")'],
      {
        env: { ...process.env, NODE_OPTIONS: `--require ${join(dir, "offline.cjs")}` },
      },
    ).catch(e => e as { stderr: string });
    expect(probe.stderr).toContain("check must stay offline: a connection");

    const r = await exec(
      process.execPath,
      [
        join(root, "bin", "admission-guard.mjs"),
        "check",
        "-o",
        "json",
        "--cluster",
        "examples/cluster",
        "examples/",
      ],
      {
        cwd: root,
        env: {
          ...process.env,
          KUBECONFIG: join(dir, "kubeconfig"),
          NODE_OPTIONS: `--require ${join(dir, "offline.cjs")}`,
        },
      },
    ).catch(e => e as { code: number; stdout: string; stderr: string });
    expect(r.stderr).toBe("");
    // The examples' verdicts came through: some denied (exit 1), every object reported.
    expect((r as { code?: number }).code).toBe(1);
    expect(r.stdout.trim().split("\n").length).toBeGreaterThanOrEqual(4);
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
