// An image whose interpreter lives under /root (capabilities/security-context/root-home.ts): said
// at admission with the fix, a warning by default, a denial with securityContext.rootImages: deny.
import { policies } from "../../../capabilities";
import { imageUserOf, type ImageUser } from "../../../capabilities/security-context/image-user";
import {
  ROOT_HOME_FIX,
  rootHomeWarning,
  underRootOf,
} from "../../../capabilities/security-context/root-home";
import { SnapshotCluster, type ImageLookup } from "../../../lib/cluster/view";
import { review } from "../../../lib/engine";
import { shapesOf } from "../../../lib/images/config-shapes";
import type { ImageRef } from "../../../lib/objects/image-reference";
import type { KubeObject } from "../../../lib/objects/pod";
import { parseSettings } from "../../../lib/settings";

const lookup = (config: Record<string, unknown>, user = ""): ImageLookup => {
  const shapes = shapesOf(config);
  return {
    state: "known",
    config: { digest: "sha256:x", user, workingDir: "", ...(shapes ? { shapes } : {}) },
  };
};
const CONDA = { Env: ["PATH=/root/miniconda3/bin:/usr/bin"], Cmd: ["python", "train.py"] };
const VENV = { Entrypoint: ["/root/.venv/bin/python"], Env: ["PATH=/usr/bin"] };
const user = (config: Record<string, unknown>, u = ""): ImageUser =>
  imageUserOf("img", lookup(config, u));

describe("an interpreter under /root", () => {
  test("PATH and the program, as the runtime resolves them", () => {
    expect(underRootOf({}, user(CONDA))).toEqual(["PATH /root/miniconda3/bin"]);
    expect(underRootOf({}, user(VENV))).toEqual(["program /root/.venv/bin/python"]);
    // The container's own command and PATH replace the image's.
    expect(underRootOf({ command: ["/opt/py/bin/python"] }, user(VENV))).toEqual([]);
    expect(underRootOf({ env: [{ name: "PATH", value: "/opt/conda/bin" }] }, user(CONDA))).toEqual(
      [],
    );
    expect(underRootOf({ command: ["/root/run.sh"] }, user({}))).toEqual(["program /root/run.sh"]);
    // An image with a numeric USER runs as its own user: not the module's doing.
    expect(underRootOf({}, user(CONDA, "1001"))).toEqual([]);
  });

  test("the warning names the image, the container, what lies under /root, the UID and the fix", () => {
    expect(rootHomeWarning(user(CONDA), { name: "train" }, 1000)).toBe(
      `image "img" (container "train") keeps its interpreter or environment under /root (PATH /root/miniconda3/bin), which is mode 700: run as UID 1000 it cannot start. Fix: ${ROOT_HOME_FIX}`,
    );
    expect(rootHomeWarning(user({ Env: ["PATH=/usr/bin"] }), { name: "t" }, 1000)).toBeUndefined();
  });
});

class Table extends SnapshotCluster {
  constructor(private readonly table: Record<string, ImageLookup>) {
    super([{ kind: "Namespace", metadata: { name: "ml" } } as KubeObject]);
  }
  override async imageConfigs(refs: ImageRef[]) {
    return new Map(
      refs.map(r => [
        r.normalised,
        this.table[r.normalised] ?? { state: "unknown" as const, reason: "not in the table" },
      ]),
    );
  }
}

describe("through the engine", () => {
  const pod: KubeObject = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "p", namespace: "ml" },
    spec: { containers: [{ name: "train", image: "ghcr.io/ml/conda:1" }] },
  };
  const cluster = () => new Table({ "ghcr.io/ml/conda:1": lookup(CONDA) });

  test("a warning by default, the pod admitted", async () => {
    const r = await review(policies, pod, { settings: parseSettings({}), cluster: cluster() });
    expect(r.allowed).toBe(true);
    expect(r.warnings).toContainEqual(
      expect.stringContaining("under /root (PATH /root/miniconda3/bin)"),
    );
  });

  test("securityContext.rootImages: deny refuses it, naming the shape and the fix", async () => {
    const r = await review(policies, pod, {
      settings: parseSettings({ securityContext: { rootImages: "deny" } }),
      cluster: cluster(),
    });
    expect(r.allowed).toBe(false);
    const denial = r.denials.join("; ");
    expect(denial).toContain(
      'admission-guard/security-context: image "ghcr.io/ml/conda:1" (container "train") keeps its interpreter or environment under /root',
    );
    expect(denial).toContain(`Fix: ${ROOT_HOME_FIX}`);
  });
});
