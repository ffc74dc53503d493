import fc from "fast-check";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { contextFor, review } from "../../../lib/engine";
import type { KubeObject } from "../../../lib/objects/pod";
import { parseSettings, type SettingsInput } from "../../../lib/settings";
import { formatViolation } from "../../../lib/objects/verdict";
import { imageRegistryPolicy } from "../../../capabilities/image-registry";
import {
  parseImage,
  parsePrefix,
  underPrefix,
  type ImageRef,
} from "../../../lib/objects/image-reference";
import { mirrorImage, mirrorsOf } from "../../../capabilities/image-registry/rules";
import { restrictedVolumes } from "../../../capabilities/security-context/checks/restrictedVolumes";
import { podTemplateOf } from "../../../lib/workload-kinds/built-in";
import { run as runCli, tempTree } from "../cli/check-helpers";

const DIGEST = `sha256:${"a".repeat(64)}`;

function ref(image: string): ImageRef {
  const parsed = parseImage(image);
  if (!parsed.ok) throw new Error(`${image}: ${parsed.reason}`);
  return parsed.ref;
}

const prefix = (entry: string) => {
  const p = parsePrefix(entry);
  if (!p.ok) throw new Error(`${entry}: ${p.reason}`);
  return p.prefix;
};

describe("image references are normalised by the parser", () => {
  it.each([
    ["nginx", "docker.io", "library/nginx", undefined, undefined],
    ["nginx:1.25", "docker.io", "library/nginx", "1.25", undefined],
    ["library/nginx", "docker.io", "library/nginx", undefined, undefined],
    ["myorg/app:2", "docker.io", "myorg/app", "2", undefined],
    ["index.docker.io/nginx", "docker.io", "library/nginx", undefined, undefined],
    ["localhost:5000/x", "localhost:5000", "x", undefined, undefined],
    ["localhost/x:1", "localhost", "x", "1", undefined],
    ["registry.internal:5000/team/app:v1", "registry.internal:5000", "team/app", "v1", undefined],
    [`ghcr.io/org/app@${DIGEST}`, "ghcr.io", "org/app", undefined, DIGEST],
    [`ghcr.io/org/app:1.0@${DIGEST}`, "ghcr.io", "org/app", "1.0", DIGEST],
    ["GHCR.IO/org/app", "ghcr.io", "org/app", undefined, undefined],
  ])("%s → %s / %s", (image, registry, repository, tag, digest) => {
    expect(ref(image)).toMatchObject({ registry, repository, tag, digest });
  });

  it("keeps tag and digest in the normalised form", () => {
    expect(ref(`nginx:1.25@${DIGEST}`).normalised).toBe(`docker.io/library/nginx:1.25@${DIGEST}`);
  });

  it.each([
    ["Nginx", /lowercase/],
    ["ghcr.io/Org/app", /lowercase/],
    ["a:b:c", /invalid/],
    ["nginx:", /invalid/],
    [" nginx", /spaces/],
    ["", /empty/],
    ["a".repeat(64), /64-byte/],
    ["ghcr.io/app@sha256:abc", /invalid/],
    ["x".repeat(2000), /characters long/],
  ])("refuses %j", (image, reason) => {
    const parsed = parseImage(image);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.reason).toMatch(reason);
  });

  it("refuses non-strings without throwing", () => {
    for (const bad of [undefined, null, 42, {}, []]) expect(parseImage(bad).ok).toBe(false);
  });

  it("parses with the patched name grammar: no separator that matches nothing inside a repetition", () => {
    // patches/@swimlane+docker-reference+2.0.1.patch: `[-]*` in a repeated group backtracks
    // exponentially ("aaaa…a!" hung for minutes); distribution/reference's grammar has `[-]+`.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const grammar = require("@swimlane/docker-reference/lib/regexp") as {
      anchoredNameRegexp: RegExp;
    };
    expect(grammar.anchoredNameRegexp.source).toContain("(?:[._]|__|[-]+)");
    expect(grammar.anchoredNameRegexp.source).not.toContain("[-]*)");
  });

  it("refuses the inputs that made the unpatched parser backtrack, and never throws", () => {
    for (const image of ["a".repeat(200) + "!", "a-".repeat(300) + "!", "ab".repeat(400) + "/!"])
      expect(parseImage(image).ok).toBe(false);
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom("a", "-", "_", ".", "/", ":", "!", "A") }),
        s => {
          expect(typeof parseImage(s).ok).toBe("boolean");
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("each image is parsed once, and what is shared cannot be changed", () => {
  it("the same reference gives the same frozen result; another gives its own", () => {
    const first = parseImage("ghcr.io/org/shared:1");
    expect(parseImage("ghcr.io/org/shared:1")).toBe(first);
    expect(Object.isFrozen(first)).toBe(true);
    if (!first.ok) throw new Error("expected a valid reference");
    expect(Object.isFrozen(first.ref)).toBe(true);
    expect(() => {
      (first.ref as { tag?: string }).tag = "2";
    }).toThrow(TypeError);
    expect(parseImage("ghcr.io/org/shared:2")).toMatchObject({ ok: true, ref: { tag: "2" } });
  });

  it("an invalid reference is said the same way every time, a too-long one included", () => {
    expect(parseImage("Bad Image")).toEqual(parseImage("Bad Image"));
    expect(parseImage("Bad Image").ok).toBe(false);
    const long = `ghcr.io/${"a".repeat(2000)}`;
    expect(parseImage(long)).toEqual({ ok: false, reason: "the image is 2008 characters long" });
  });
});

describe("allow-list entries match on whole path segments", () => {
  it("parses hosts, hosts with ports and repository prefixes", () => {
    expect(prefix("ghcr.io")).toMatchObject({ registry: "ghcr.io", path: "" });
    expect(prefix("registry.internal:5000")).toMatchObject({
      registry: "registry.internal:5000",
      path: "",
    });
    expect(prefix("docker.io/myorg")).toMatchObject({ registry: "docker.io", path: "myorg" });
    expect(prefix("myorg/team")).toMatchObject({ registry: "docker.io", path: "myorg/team" });
    expect(prefix("localhost/dev")).toMatchObject({ registry: "localhost", path: "dev" });
    expect(prefix("ghcr.io/")).toMatchObject({ registry: "ghcr.io", path: "" });
  });

  it.each(["", "ghcr.io/x:1", "ghcr.io/x@sha256:abc", "ghcr.io/Org", "bad host/x"])(
    "refuses entry %j",
    entry => expect(parsePrefix(entry).ok).toBe(false),
  );

  it.each([
    ["docker.io/myorg/app", "docker.io/myorg", true],
    ["docker.io/myorg/team/app", "docker.io/myorg", true],
    ["docker.io/myorg-evil/x", "docker.io/myorg", false],
    ["docker.io/myorgx", "docker.io/myorg", false],
    ["ghcr.io/a/b", "ghcr.io", true],
    ["ghcr.io.evil.com/a", "ghcr.io", false],
    ["registry.internal:5000/x", "registry.internal", false],
    ["registry.internal:5000/x", "registry.internal:5000", true],
    ["nginx", "docker.io/library", true],
    ["nginx", "ghcr.io", false],
  ])("%s under %s: %s", (image, entry, expected) => {
    expect(underPrefix(ref(image), prefix(entry))).toBe(expected);
  });
});

const settings = (registries: SettingsInput["registries"]) => parseSettings({ registries });

const pod = (images: Record<string, string>, init: Record<string, string> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "trainer", namespace: "ml" },
  spec: {
    initContainers: Object.entries(init).map(([name, image]) => ({ name, image })),
    containers: Object.entries(images).map(([name, image]) => ({ name, image })),
  },
});

const cluster = (annotations: Record<string, string> = {}) =>
  new SnapshotCluster([{ kind: "Namespace", metadata: { name: "ml", annotations } }]);

const run = (obj: KubeObject, s: ReturnType<typeof settings>, annotations = {}) =>
  review([imageRegistryPolicy], obj, { settings: s, cluster: cluster(annotations) });

describe("mirrors", () => {
  const mirrors = {
    "docker.io": "harbor.internal/dockerhub",
    "ghcr.io/org": "harbor.internal/ghcr-org",
    "harbor.internal": "other.internal/h",
  };
  const list = mirrorsOf(settings({ mirrors })).mirrors;

  it("rewrites to the mirror keeping repository, tag and digest", () => {
    expect(mirrorImage(ref("nginx:1.25"), list)).toBe(
      "harbor.internal/dockerhub/library/nginx:1.25",
    );
    expect(mirrorImage(ref(`ghcr.io/org/team/app:2@${DIGEST}`), list)).toBe(
      `harbor.internal/ghcr-org/team/app:2@${DIGEST}`,
    );
    expect(mirrorImage(ref("ghcr.io/other/app"), list)).toBeUndefined();
  });

  it("never rewrites a rewritten image again, even when the mirror host is itself mirrored", () => {
    const once = mirrorImage(ref("nginx"), list)!;
    expect(once).toBe("harbor.internal/dockerhub/library/nginx");
    expect(mirrorImage(ref(once), list)).toBeUndefined();
    // An image on harbor.internal outside every mirror is still mirrored (once).
    expect(mirrorImage(ref("harbor.internal/own/app"), list)).toBe("other.internal/h/own/app");
  });

  it("fixing twice equals fixing once (property)", () => {
    const segment = fc.stringMatching(/^[a-z0-9]{1,6}$/);
    const image = fc
      .tuple(
        fc.constantFrom("", "docker.io/", "ghcr.io/", "ghcr.io/org/", "harbor.internal/"),
        fc.array(segment, { minLength: 1, maxLength: 3 }),
        fc.option(segment, { nil: undefined }),
      )
      .map(([host, path, tag]) => `${host}${path.join("/")}${tag ? `:${tag}` : ""}`);
    fc.assert(
      fc.property(image, img => {
        const p = pod({ c: img });
        const s = settings({ mirrors });
        const ctx = contextFor(p, { settings: s, cluster: cluster() });
        const target = { object: p, template: { metadata: {}, spec: p.spec as never, path: "" } };
        const first = imageRegistryPolicy.fix!({ ...target, isTemplate: false }, ctx);
        const afterOnce = JSON.stringify(p);
        const second = imageRegistryPolicy.fix!({ ...target, isTemplate: false }, ctx);
        expect(second).toEqual([]);
        expect(JSON.stringify(p)).toBe(afterOnce);
        return Array.isArray(first);
      }),
      { numRuns: 200 },
    );
  });

  it("a mirrored pod is rewritten then admitted when only the mirror is allowed", async () => {
    const r = await run(
      pod({ web: "nginx:1.25" }),
      settings({ mirrors, allowed: ["harbor.internal/dockerhub"] }),
    );
    expect(r.allowed).toBe(true);
    expect((r.object.spec as { containers: { image: string }[] }).containers[0].image).toBe(
      "harbor.internal/dockerhub/library/nginx:1.25",
    );
    expect(r.changes.map(c => c.message)).toContain(
      'spec.containers[0].image="harbor.internal/dockerhub/library/nginx:1.25" (was "nginx:1.25")',
    );
    // The webhook's warning, from the trace the mutation left.
    expect(r.warnings).toContain("admission-guard/image-registry: fixed mirror");
  });

  it("a workload's template is not changed, its pods are predicted mirrored", async () => {
    const deploy: KubeObject = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "web", namespace: "ml" },
      spec: { template: { spec: { containers: [{ name: "web", image: "nginx" }] } } },
    };
    const r = await run(deploy, settings({ mirrors, allowed: ["harbor.internal"] }));
    expect(r.allowed).toBe(true);
    expect(JSON.stringify(deploy)).toContain('"image":"nginx"');
    expect(r.warnings.join("\n")).toMatch(
      /its pods will get spec\.template\.spec\.containers\[0\]\.image="harbor\.internal\/dockerhub\/library\/nginx"/,
    );
  });
});

describe("allowed registries", () => {
  it("is off with an empty list", async () => {
    const r = await run(pod({ c: "anything.example/x:latest" }), settings({}));
    expect(r.allowed).toBe(true);
    expect(r.violations).toEqual([]);
  });

  it("denies seed 001's image when only ghcr.io is allowed, naming all the facts", async () => {
    const r = await run(
      pod({ trainer: "private-registry.com/mlflow-train:latest" }),
      settings({ allowed: ["ghcr.io"] }),
    );
    expect(r.allowed).toBe(false);
    const line = formatViolation(r.violations[0]);
    expect(line).toContain("admission-guard/image-registry:");
    expect(line).toContain('container "trainer"');
    expect(line).toContain('"private-registry.com/mlflow-train:latest"');
    expect(line).toContain("registry private-registry.com");
    expect(line).toContain("allowed: ghcr.io");
    expect(line).toMatch(
      /Fix: .*allowed registry or its mirror.*ADMISSION_GUARD_REGISTRIES_ALLOWED/,
    );
  });

  it("admits it when its registry is allowed", async () => {
    const r = await run(
      pod({ trainer: "private-registry.com/mlflow-train:latest" }),
      settings({ allowed: ["ghcr.io", "private-registry.com"] }),
    );
    expect(r.allowed).toBe(true);
  });

  it("judges a bare nginx as docker.io", async () => {
    const denied = await run(pod({ web: "nginx" }), settings({ allowed: ["ghcr.io"] }));
    expect(denied.violations[0].message).toContain("(docker.io/library/nginx)");
    expect(denied.violations[0].message).toContain("registry docker.io");
    const allowed = await run(pod({ web: "nginx" }), settings({ allowed: ["docker.io"] }));
    expect(allowed.allowed).toBe(true);
  });

  it("checks init containers too, and does not admit a look-alike org", async () => {
    const r = await run(
      pod({ app: "docker.io/myorg/app:1" }, { setup: "docker.io/myorg-evil/x:1" }),
      settings({ allowed: ["docker.io/myorg"] }),
    );
    expect(r.violations).toHaveLength(1);
    expect(r.violations[0].message).toContain('init container "setup"');
  });

  it("denies an invalid reference naming the container", async () => {
    const r = await run(
      pod({ trainer: "Private-Registry.com/ML:latest" }),
      settings({ allowed: ["ghcr.io"] }),
    );
    expect(r.violations[0]).toMatchObject({ rule: "invalid-reference" });
    expect(r.violations[0].message).toContain('container "trainer"');
  });

  it("does not throw on malformed containers", async () => {
    const bad: KubeObject = {
      kind: "Pod",
      metadata: { name: "x", namespace: "ml" },
      spec: { containers: [null, 7, { name: "n" }, { name: "o", image: 5 }] },
    };
    const r = await run(bad, settings({ allowed: ["ghcr.io"] }));
    expect(r.violations.map(v => v.rule)).toEqual(["invalid-reference", "invalid-reference"]);
  });
});

describe("namespace narrowing", () => {
  const key = "admission-guard.dev/allowed-registries";

  it("narrows the cluster list", async () => {
    const s = settings({ allowed: ["ghcr.io", "quay.io"] });
    const ann = { [key]: "ghcr.io/ml-team" };
    expect((await run(pod({ c: "ghcr.io/ml-team/app:1" }), s, ann)).allowed).toBe(true);
    const denied = await run(pod({ c: "quay.io/x/app:1" }), s, ann);
    expect(denied.allowed).toBe(false);
    expect(denied.violations[0].message).toContain("not allowed in namespace ml");
    expect(denied.violations[0].message).toContain("allowed: ghcr.io/ml-team");
    expect(denied.violations[0].fix).toContain(`kubectl annotate namespace ml ${key}=`);
  });

  it("cannot widen the cluster list", async () => {
    const s = settings({ allowed: ["ghcr.io"] });
    const denied = await run(pod({ c: "quay.io/x/app:1" }), s, { [key]: "ghcr.io, quay.io" });
    expect(denied.allowed).toBe(false);
    expect(denied.violations[0].message).toContain("allowed: ghcr.io");
    expect(denied.violations[0].fix).toContain("ADMISSION_GUARD_REGISTRIES_ALLOWED");
  });

  it("restricts a namespace even when the cluster list is empty", async () => {
    const s = settings({});
    expect((await run(pod({ c: "ghcr.io/a" }), s, { [key]: "ghcr.io" })).allowed).toBe(true);
    expect((await run(pod({ c: "quay.io/a" }), s, { [key]: "ghcr.io" })).allowed).toBe(false);
  });

  it("reports invalid entries and fails closed when none is valid", async () => {
    const s = settings({ allowed: ["ghcr.io"] });
    const r = await run(pod({ c: "ghcr.io/a" }), s, { [key]: "GHCR.io/Bad" });
    expect(r.allowed).toBe(false);
    expect(r.violations[0].message).toContain("allowed: nothing");
    expect(r.warnings.join("\n")).toContain('entry "GHCR.io/Bad" ignored');
  });
});

describe("optional rules", () => {
  it("requireDigest", async () => {
    const s = settings({ requireDigest: true });
    const r = await run(pod({ c: "ghcr.io/a:1" }), s);
    expect(r.violations.map(v => v.rule)).toEqual(["digest-required"]);
    expect(r.violations[0].fix).toContain(`ghcr.io/a:1@sha256:<digest>`);
    expect((await run(pod({ c: `ghcr.io/a@${DIGEST}` }), s)).allowed).toBe(true);
  });

  it("forbidLatest: the latest tag and untagged images, not digests", async () => {
    const s = settings({ forbidLatest: true });
    for (const image of ["ghcr.io/a:latest", "ghcr.io/a", "nginx"])
      expect((await run(pod({ c: image }), s)).violations.map(v => v.rule)).toEqual([
        "latest-forbidden",
      ]);
    for (const image of ["ghcr.io/a:1.2", `ghcr.io/a@${DIGEST}`, `ghcr.io/a:latest@${DIGEST}`])
      expect((await run(pod({ c: image }), s)).allowed).toBe(true);
  });
});

describe("image volumes go through every registry rule", () => {
  // Kubernetes image volumes (spec.volumes[].image): an image the kubelet pulls like a container's.
  const withImageVolume = (
    reference: unknown,
    containerImage = "ghcr.io/ml/train:1",
  ): KubeObject => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "trainer", namespace: "ml" },
    spec: {
      containers: [{ name: "trainer", image: containerImage }],
      volumes: [
        { name: "scratch", emptyDir: {} },
        { name: "config", configMap: { name: "c" } },
        { name: "weights", image: { reference, pullPolicy: "IfNotPresent" } },
      ],
    },
  });
  const referenceOf = (obj: KubeObject, at = 2) =>
    (obj.spec as { volumes: { image: { reference: string } }[] }).volumes[at].image.reference;

  it("denies an image volume from a registry that is not allowed, naming the volume and the fix", async () => {
    const r = await run(
      withImageVolume("evil.example.com/x:latest"),
      settings({ allowed: ["ghcr.io"] }),
    );
    expect(r.allowed).toBe(false);
    expect(r.violations).toHaveLength(1);
    const line = formatViolation(r.violations[0]);
    expect(line).toContain(
      'admission-guard/image-registry: image volume "weights" reference "evil.example.com/x:latest"',
    );
    expect(line).toContain("registry evil.example.com, which is not allowed; allowed: ghcr.io");
    expect(line).toMatch(
      /Fix: use an image from an allowed registry .* in spec\.volumes\[2\]\.image\.reference;/,
    );
  });

  it("applies the namespace's narrowing annotation to image volumes", async () => {
    const s = settings({ allowed: ["ghcr.io"] });
    const ann = { "admission-guard.dev/allowed-registries": "ghcr.io/ml" };
    expect((await run(withImageVolume("ghcr.io/ml/weights:1"), s, ann)).allowed).toBe(true);
    const denied = await run(withImageVolume("ghcr.io/other/weights:1"), s, ann);
    expect(denied.allowed).toBe(false);
    expect(denied.violations[0].message).toContain('image volume "weights"');
    expect(denied.violations[0].message).toContain("not allowed in namespace ml");
  });

  it("requireDigest and forbidLatest hold for image volumes", async () => {
    const digest = await run(withImageVolume("ghcr.io/w:1"), settings({ requireDigest: true }));
    expect(digest.violations.map(v => [v.rule, v.fix.split(" ")[1]])).toEqual([
      ["digest-required", "spec.containers[0].image"],
      ["digest-required", "spec.volumes[2].image.reference"],
    ]);
    const latest = await run(withImageVolume("ghcr.io/w"), settings({ forbidLatest: true }));
    expect(latest.violations).toHaveLength(1);
    expect(latest.violations[0]).toMatchObject({ rule: "latest-forbidden" });
    expect(latest.violations[0].message).toContain(
      'image volume "weights" reference "ghcr.io/w" has no tag',
    );
  });

  it("denies an invalid or missing reference without throwing", async () => {
    for (const bad of ["Evil.Example.com/X", undefined, 42]) {
      const r = await run(withImageVolume(bad), settings({ allowed: ["ghcr.io"] }));
      expect(r.violations.map(v => v.rule)).toEqual(["invalid-reference"]);
      expect(r.violations[0].message).toMatch(/^image volume "weights" has reference/);
      expect(r.violations[0].fix).toMatch(/^set spec\.volumes\[2\]\.image\.reference to/);
    }
  });

  it("rewrites an image volume to its mirror in place, once (idempotent), then admits it", async () => {
    const mirrors = { "docker.io": "harbor.internal/dockerhub" };
    const s = settings({ mirrors, allowed: ["harbor.internal", "ghcr.io"] });
    const r = await run(withImageVolume("nginx:1.25"), s);
    expect(r.allowed).toBe(true);
    expect(referenceOf(r.object)).toBe("harbor.internal/dockerhub/library/nginx:1.25");
    expect((r.object.spec as { volumes: { image: object }[] }).volumes[2].image).toEqual({
      reference: "harbor.internal/dockerhub/library/nginx:1.25",
      pullPolicy: "IfNotPresent",
    });
    expect(r.changes.map(c => c.message)).toContain(
      'spec.volumes[2].image.reference="harbor.internal/dockerhub/library/nginx:1.25" (was "nginx:1.25")',
    );
    const again = await run(r.object, s);
    expect(again.changes).toEqual([]);
    expect(JSON.stringify(again.object)).toBe(JSON.stringify(r.object));
  });

  it("judges a Deployment's template image volume and predicts its pods' mirror", async () => {
    const deploy: KubeObject = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "serve", namespace: "ml" },
      spec: {
        template: {
          spec: {
            containers: [{ name: "serve", image: "ghcr.io/ml/serve:1" }],
            volumes: [{ name: "weights", image: { reference: "evil.example.com/w:1" } }],
          },
        },
      },
    };
    const denied = await run(deploy, settings({ allowed: ["ghcr.io"] }));
    expect(denied.allowed).toBe(false);
    expect(denied.violations[0].fix).toContain("in spec.template.spec.volumes[0].image.reference;");
    const mirrored = await run(
      deploy,
      settings({ mirrors: { "evil.example.com": "ghcr.io/mirror" }, allowed: ["ghcr.io"] }),
    );
    expect(mirrored.allowed).toBe(true);
    expect(mirrored.warnings.join("\n")).toContain(
      'its pods will get spec.template.spec.volumes[0].image.reference="ghcr.io/mirror/w:1"',
    );
    expect(JSON.stringify(deploy)).toContain('"reference":"evil.example.com/w:1"');
  });
  it("judges the image volume of one role of an ML kind (a PyTorchJob's Worker)", async () => {
    const template = (volumeImage?: string) => ({
      spec: {
        containers: [{ name: "pytorch", image: "ghcr.io/ml/train:1" }],
        volumes: volumeImage ? [{ name: "weights", image: { reference: volumeImage } }] : [],
      },
    });
    const job: KubeObject = {
      apiVersion: "kubeflow.org/v1",
      kind: "PyTorchJob",
      metadata: { name: "llama", namespace: "ml" },
      spec: {
        pytorchReplicaSpecs: {
          Master: { replicas: 1, template: template() },
          Worker: { replicas: 4, template: template("evil.example.com/llama-weights:latest") },
        },
      },
    };
    const r = await run(job, settings({ allowed: ["ghcr.io"] }));
    expect(r.allowed).toBe(false);
    expect(r.violations).toHaveLength(1);
    expect(r.violations[0].message).toContain(
      'image volume "weights" reference "evil.example.com/llama-weights:latest"',
    );
    expect(r.violations[0].message).toContain("role Worker");
    expect(r.violations[0].fix).toContain(
      "spec.pytorchReplicaSpecs.Worker.template.spec.volumes[0].image.reference",
    );
  });

  it("check (the offline front door) denies the image volume the webhook denies", async () => {
    const dir = tempTree({
      "pod.json": JSON.stringify(withImageVolume("evil.example.com/x:latest")),
      "settings.json": JSON.stringify({ registries: { allowed: ["ghcr.io"] } }),
    });
    const r = await runCli(["check", "--settings", "settings.json", "pod.json"], {
      cwd: dir,
      policies: [imageRegistryPolicy],
    });
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('image volume "weights" reference "evil.example.com/x:latest"');
    expect(r.stdout).toContain("spec.volumes[2].image.reference");
  });

  it("the restricted volume types still allow image volumes (Pod Security's list)", () => {
    const template = podTemplateOf(withImageVolume("ghcr.io/w:1"))!;
    expect(restrictedVolumes.check(template)).toEqual({ allowed: true });
  });
});
