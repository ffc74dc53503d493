// Every restricted check against its own pass and fail fixtures (PSA-style): the fixtures are
// restricted-compliant pods with one variation each, in test/fixtures/security-context/<check>/.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { schemaProblems } from "../../../cli/schema";
import { ALL_CHECKS, checksFor, evaluatePod } from "../../../capabilities/security-context/checks";
import type { KubeObject, PodTemplateRef } from "../../../lib/objects/pod";
import { podTemplateOf } from "../../../lib/workload-kinds/built-in";

const FIXTURES = join(__dirname, "../../fixtures/security-context");

function load(file: string): PodTemplateRef {
  const pod = parse(readFileSync(file, "utf8")) as KubeObject;
  const template = podTemplateOf(pod);
  if (!template) throw new Error(`${file} is not a pod`);
  return template;
}

/** Which check reports a violation of `id` at the restricted level: itself, or the check overriding it. */
function reportedAs(id: string): string {
  return ALL_CHECKS.find(c => c.overrides?.includes(id))?.id ?? id;
}

const restrictedIds = checksFor("restricted").map(c => c.id);

describe("the check registry", () => {
  it("has one fixture directory per check, each with pass and fail cases", () => {
    // Directories only: levels.ts beside them is the generated set of test/unit/security-context/levels.test.ts.
    const dirs = readdirSync(FIXTURES, { withFileTypes: true })
      .filter(d => d.isDirectory())
      .map(d => d.name)
      .sort();
    expect(dirs).toEqual(ALL_CHECKS.map(c => c.id).sort());
    for (const dir of dirs) {
      const files = readdirSync(join(FIXTURES, dir));
      expect(files.some(f => f.startsWith("pass-"))).toBe(true);
      expect(files.some(f => f.startsWith("fail-"))).toBe(true);
    }
  });

  it("evaluates restricted as baseline minus the overridden checks plus the restricted ones", () => {
    expect(restrictedIds).not.toContain("hostPathVolumes");
    expect(restrictedIds).not.toContain("capabilities_baseline");
    expect(restrictedIds).not.toContain("seccompProfile_baseline");
    expect(restrictedIds).not.toContain("procMount_baseline");
    expect(restrictedIds).toEqual(
      expect.arrayContaining(["hostNamespaces", "sysctls", "restrictedVolumes", "runAsNonRoot"]),
    );
    expect(checksFor("baseline").every(c => c.level === "baseline")).toBe(true);
  });
});

describe.each(ALL_CHECKS.map(c => [c.id, c] as const))("check %s", (id, check) => {
  const files = readdirSync(join(FIXTURES, id)).sort();

  it.each(files.filter(f => f.startsWith("pass-")))("allows %s", file => {
    const pod = load(join(FIXTURES, id, file));
    expect(check.check(pod)).toEqual({ allowed: true });
    // A check that runs at restricted: the fixture is a fully restricted-compliant pod.
    if (restrictedIds.includes(id)) {
      expect(evaluatePod(pod).filter(r => !r.allowed)).toEqual([]);
    }
  });

  it.each(files.filter(f => f.startsWith("fail-")))(
    "forbids %s, saying why and how to fix",
    file => {
      const pod = load(join(FIXTURES, id, file));
      const result = check.check(pod);
      expect(result.allowed).toBe(false);
      expect(result.forbiddenReason).toBeTruthy();
      expect(result.forbiddenDetail).toBeTruthy();
      expect(result.fix).toMatch(/(spec|metadata)\./); // names the field to change
      // At restricted exactly this violation is reported (or the check that overrides this one).
      expect(
        evaluatePod(pod)
          .filter(r => !r.allowed)
          .map(r => r.id),
      ).toEqual([reportedAs(id)]);
    },
  );
});

describe("messages name the containers and fields involved", () => {
  const pod = (spec: Record<string, unknown>): PodTemplateRef =>
    podTemplateOf({ kind: "Pod", metadata: { name: "p" }, spec })!;
  const byId = (id: string) => ALL_CHECKS.find(c => c.id === id)!;

  it("runAsNonRoot: PSA's explicit-false wording, with the field paths in the fix", () => {
    const r = byId("runAsNonRoot").check(
      pod({
        securityContext: { runAsNonRoot: false },
        initContainers: [{ name: "setup", securityContext: { runAsNonRoot: false } }],
        containers: [{ name: "trainer" }],
      }),
    );
    expect(r.forbiddenDetail).toBe(
      'pod and container "setup" must not set securityContext.runAsNonRoot=false',
    );
    expect(r.fix).toContain("spec.securityContext.runAsNonRoot");
    expect(r.fix).toContain("spec.initContainers[0].securityContext.runAsNonRoot");
  });

  it("runAsNonRoot: pod-level true covers containers that do not set it", () => {
    const check = byId("runAsNonRoot");
    const spec = { securityContext: { runAsNonRoot: true }, containers: [{ name: "a" }] };
    expect(check.check(pod(spec)).allowed).toBe(true);
    const r = check.check(
      pod({ containers: [{ name: "a" }, { name: "b", securityContext: { runAsNonRoot: true } }] }),
    );
    expect(r.forbiddenDetail).toBe(
      'pod or container "a" must set securityContext.runAsNonRoot=true',
    );
  });

  it("capabilities_restricted: both problems in one result, sorted capabilities", () => {
    const r = byId("capabilities_restricted").check(
      pod({
        containers: [
          { name: "a", securityContext: { capabilities: { add: ["SYS_TIME", "NET_RAW"] } } },
          { name: "b", securityContext: { capabilities: { drop: ["ALL"] } } },
        ],
      }),
    );
    expect(r.forbiddenDetail).toBe(
      'container "a" must set securityContext.capabilities.drop=["ALL"]; container "a" must not include "NET_RAW", "SYS_TIME" in securityContext.capabilities.add',
    );
  });

  it("hostPorts and restrictedVolumes list what they found", () => {
    expect(
      byId("hostPorts").check(
        pod({
          containers: [
            { name: "a", ports: [{ containerPort: 80, hostPort: 80 }] },
            { name: "b", ports: [{ containerPort: 443, hostPort: 443 }] },
          ],
        }),
      ).forbiddenDetail,
    ).toBe('containers "a", "b" use hostPorts 443, 80');
    expect(
      byId("restrictedVolumes").check(
        pod({
          containers: [],
          volumes: [{ name: "x", gitRepo: { repository: "r" } }, { name: "y" }],
        }),
      ).forbiddenDetail,
    ).toBe('volumes "x", "y" use restricted volume types "gitRepo", "unknown"');
  });

  it("workload templates carry the template path in the fix", () => {
    const template = podTemplateOf({
      kind: "Deployment",
      spec: {
        template: { spec: { containers: [{ name: "a", securityContext: { privileged: true } }] } },
      },
    })!;
    expect(byId("privileged").check(template).fix).toContain(
      "spec.template.spec.containers[0].securityContext.privileged",
    );
    expect(byId("runAsNonRoot").check(template).fix).toContain(
      "spec.template.spec.securityContext.runAsNonRoot",
    );
  });
});

describe("malformed input never throws, and what can be read is still judged", () => {
  // A value of the wrong type counts as unset: the check judges what is left.
  const CONTAINER_UNSET = [
    "allowPrivilegeEscalation",
    "runAsNonRoot",
    "seccompProfile_restricted",
    "capabilities_restricted",
  ];
  const weird: [unknown, string[]][] = [
    [{ containers: [null, 3, "x", { name: 5, securityContext: "bad" }] }, CONTAINER_UNSET],
    [
      { securityContext: [], containers: [{ securityContext: { capabilities: "ALL" } }] },
      CONTAINER_UNSET,
    ],
    [
      { volumes: [null, { name: "v", emptyDir: null }], containers: [{ ports: "80" }] },
      ["restrictedVolumes", ...CONTAINER_UNSET],
    ],
    [
      { securityContext: { sysctls: [null, { name: 7 }], seLinuxOptions: "x" }, containers: [] },
      ["sysctls"],
    ],
    [
      { os: "windows", hostUsers: "false", containers: [{ lifecycle: { preStop: 1 } }] },
      CONTAINER_UNSET,
    ],
  ];
  it.each(weird.map(([spec, ids], i) => [i, spec, ids] as const))("spec #%i", (_i, spec, ids) => {
    const template = podTemplateOf({ kind: "Pod", metadata: {}, spec } as KubeObject)!;
    expect(() => evaluatePod(template)).not.toThrow();
    const failing = evaluatePod(template).filter(r => !r.allowed);
    expect(failing.map(r => r.id)).toEqual(ids);
    for (const r of failing) expect(r.fix).toBeTruthy();
  });

  it("a pod whose containers are not a list has nothing for the checks to judge: the API server refuses it first, and so does check", () => {
    const pod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "p" },
      spec: { containers: "nope" },
    };
    const template = podTemplateOf(pod as unknown as KubeObject)!;
    expect(evaluatePod(template).filter(r => !r.allowed)).toEqual([]);
    expect(schemaProblems(pod as unknown as KubeObject).join("\n")).toContain("spec.containers");
  });

  it("counts a volume with a null source as a restricted (unknown) type, as PSA does", () => {
    const template = podTemplateOf({
      kind: "Pod",
      spec: { containers: [], volumes: [{ name: "v", emptyDir: null }] },
    } as KubeObject)!;
    const r = evaluatePod(template).find(o => o.id === "restrictedVolumes")!;
    expect(r.allowed).toBe(false);
  });
});
