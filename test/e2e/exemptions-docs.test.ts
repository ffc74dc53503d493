// docs/exemptions.md followed word for word, as far as the stand-in goes: its three manifests (the
// Exemptions namespace, the Exemption, the pod), taken from the page with its shell substitutions
// done, go through the real built controller; the pod is admitted and the warning names the
// Exemption. If the page changes its manifests, this test reads the new ones.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import type { KubeObject } from "../../lib/objects/pod";
import { admit } from "../support/admission";
import { REPO_ROOT } from "../support/controller";
import { useEnvironment } from "../support/environment";
import { eventually } from "../support/wait";

const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8"));
const page = readFileSync(join(REPO_ROOT, "docs", "exemptions.md"), "utf8");

/** The file a `cat > NAME <<EOF ... EOF` on the page writes, as the shell would write it. */
function heredoc(name: string): KubeObject {
  const found = new RegExp(
    `^( *)cat > ${name.replace(".", "\\.")} <<EOF\\n([\\s\\S]*?)^\\1EOF$`,
    "m",
  ).exec(page);
  if (!found) throw new Error(`docs/exemptions.md writes no ${name}`);
  const indent = found[1].length;
  const text = found[2]
    .split("\n")
    .map(line => line.slice(indent))
    .join("\n")
    .replaceAll(`$(node -p "require('./package.json').pepr.uuid")`, pkg.pepr.uuid)
    .replaceAll(
      `$(date -u -d '+30 days' +%Y-%m-%dT%H:%M:%SZ)`,
      new Date(Date.now() + 30 * 24 * 60 * 60 * 1000).toISOString().replace(/\.\d+Z$/, "Z"),
    );
  if (text.includes("$(")) throw new Error(`${name}: a substitution this test does not know`);
  return parse(text) as KubeObject;
}

const env = useEnvironment({
  objects: [{ apiVersion: "v1", kind: "Namespace", metadata: { name: "gpu-operator" } }],
});

describe("docs/exemptions.md, from nothing to an exempted pod", () => {
  const namespace = heredoc("exemptions-namespace.yaml");
  const exemption = heredoc("gpu-driver-exemption.yaml");
  const pod = heredoc("nvidia-driver.yaml");

  it("creates the namespace with kubectl create -f (fails if it exists), never kubectl create namespace or apply", () => {
    expect(page).toContain("kubectl create -f exemptions-namespace.yaml");
    expect(page).not.toMatch(/kubectl create namespace admission-guard-exemptions/);
    expect(page).not.toMatch(/kubectl apply -f exemptions-namespace\.yaml/);
    expect(namespace.metadata?.labels).toEqual({ "admission-guard.dev/owned-by": pkg.pepr.uuid });
  });

  it("before the Exemption: the pod is denied", async () => {
    env.api.put(namespace);
    const result = await admit(env.controller, pod, { api: env.api, dryRun: true });
    expect(result.allowed).toBe(false);
    expect(result.message).toContain("admission-guard/security-context: privileged");
  });

  it("the Exemption is admitted in the namespace made as the page says, and the pod then is, naming it", async () => {
    // The namespace reaches the controller's cache through its watch.
    await eventually(async () => {
      const written = await admit(env.controller, exemption);
      if (!written.allowed) throw new Error(written.message);
    });
    env.api.put(exemption);
    const result = await eventually(async () => {
      const r = await admit(env.controller, pod, { api: env.api, dryRun: true });
      if (!r.allowed) throw new Error(r.message);
      return r;
    });
    expect(result.warnings).toContainEqual(
      expect.stringMatching(
        /^admission-guard\/security-context: privileged waived by Exemption admission-guard-exemptions\/gpu-driver until .* \(the NVIDIA driver installer loads kernel modules\)/,
      ),
    );
  });
});
