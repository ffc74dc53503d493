// The conditions that decide an image-registry violation or fix, one case each side of the line:
// cases mutation testing (npm run test:mutation) found no test for.
import { SnapshotCluster } from "../../../lib/cluster/view";
import { review } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import { parseSettings, type SettingsInput } from "../../../lib/settings";
import { imageRegistryPolicy } from "../../../capabilities/image-registry";
import { parseImage, type ImageRef } from "../../../lib/objects/image-reference";
import {
  mirrorImage,
  mirrorsOf,
  rewriteToMirrors,
} from "../../../capabilities/image-registry/rules";
import { contextFor } from "../../../lib/engine";
import { podTemplateOf } from "../../../lib/workload-kinds/built-in";

const settings = (registries: SettingsInput["registries"]) => parseSettings({ registries });

const pod = (image: unknown): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p", namespace: "ml" },
  spec: { containers: [{ name: "c", image }] },
});

const cluster = (annotations: Record<string, string> = {}) =>
  new SnapshotCluster([{ kind: "Namespace", metadata: { name: "ml", annotations } }]);

const run = (obj: KubeObject, s: ReturnType<typeof settings>, annotations = {}) =>
  review([imageRegistryPolicy], obj, { settings: s, cluster: cluster(annotations) });

function ref(image: string): ImageRef {
  const parsed = parseImage(image);
  if (!parsed.ok) throw new Error(parsed.reason);
  return parsed.ref;
}

describe("image-registry conditions", () => {
  it("the most specific mirror source wins, whatever the order of the settings", () => {
    const { mirrors } = mirrorsOf(
      settings({
        mirrors: { "docker.io": "harbor.internal/hub", "docker.io/myorg": "harbor.internal/myorg" },
      }),
    );
    expect(mirrorImage(ref("docker.io/myorg/app:1"), mirrors)).toBe("harbor.internal/myorg/app:1");
    expect(mirrorImage(ref("docker.io/other/app:1"), mirrors)).toBe(
      "harbor.internal/hub/other/app:1",
    );
  });

  it("a mirror to a bare host keeps the whole repository", () => {
    const { mirrors } = mirrorsOf(settings({ mirrors: { "docker.io": "harbor.internal" } }));
    expect(mirrorImage(ref("nginx:1"), mirrors)).toBe("harbor.internal/library/nginx:1");
  });

  it("a mirror whose source or target is invalid is ignored, with a problem", () => {
    const { mirrors, problems } = mirrorsOf(
      settings({ mirrors: { "docker.io": "harbor.internal/hub" } }),
    );
    expect(mirrors).toHaveLength(1);
    expect(problems).toEqual([]);
    const bad = settings({ mirrors: { "docker.io": "harbor.internal/hub" } });
    bad.registries.mirrors = { "docker.io": "Not A Prefix!", "BAD HOST": "harbor.internal/x" };
    const parsed = mirrorsOf(bad);
    expect(parsed.mirrors).toEqual([]);
    expect(parsed.problems).toHaveLength(2);
  });

  it("mirrors are off with registries.enabled=false, and an invalid image is not rewritten", async () => {
    const mirrors = { "docker.io": "harbor.internal/hub" };
    const off = settings({ enabled: false, mirrors });
    const target = (image: unknown) => ({
      template: podTemplateOf(pod(image))!,
      isTemplate: false,
    });
    const ctx = (s: ReturnType<typeof settings>) =>
      contextFor(pod("nginx"), { settings: s, cluster: cluster() });
    // Switched off, the engine runs no fix of it: the image stays as written.
    expect(
      (await review([imageRegistryPolicy], pod("nginx:1"), { settings: off, cluster: cluster() }))
        .changes,
    ).toEqual([]);
    const on = settings({ mirrors });
    expect(() => rewriteToMirrors(target("NOT VALID::") as never, ctx(on))).not.toThrow();
    expect(rewriteToMirrors(target("NOT VALID::") as never, ctx(on))).toEqual([]);
    expect(rewriteToMirrors(target("nginx:1") as never, ctx(on))).toHaveLength(1);
  });

  it("registries.enabled=false checks nothing; with no rule set, even an invalid image passes", async () => {
    const off = settings({ enabled: false, allowed: ["ghcr.io"], requireDigest: true });
    expect((await run(pod("quay.io/x/app:latest"), off)).allowed).toBe(true);
    const nothing = settings({});
    expect((await run(pod("NOT VALID::"), nothing)).allowed).toBe(true);
    const someRule = settings({ forbidLatest: true });
    expect((await run(pod("NOT VALID::"), someRule)).allowed).toBe(false);
  });

  it("namespace entries are trimmed: each entry after a comma and a space counts", async () => {
    const s = settings({});
    const ann = { "admission-guard.dev/allowed-registries": "quay.io/a ,  ghcr.io/ml , " };
    expect((await run(pod("ghcr.io/ml/app:1"), s, ann)).allowed).toBe(true);
    expect((await run(pod("quay.io/a/app:1"), s, ann)).allowed).toBe(true);
    const denied = await run(pod("docker.io/x/app:1"), s, ann);
    expect(denied.allowed).toBe(false);
    expect(denied.warnings.join("\n")).not.toContain("ignored");
  });
});
