// Properties of the security-context fix over generated pods: arbitrary user securityContexts
// (explicit good and bad values), Windows and user-namespaced pods, init and ephemeral containers,
// existing mounts at the writable paths and volumes that collide with our names.
import fc from "fast-check";
import { evaluatePod } from "../../../capabilities/security-context/checks";
import { fixPodSecurity } from "../../../capabilities/security-context/fix";
import type { KubeObject } from "../../../lib/objects/pod";
import { podTemplateOf } from "../../../lib/workload-kinds/built-in";
import { defaultSettings } from "../../../lib/settings";
import { assertValidPod } from "./support";

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const settings = defaultSettings().securityContext;
const opt = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
const seccomp = fc.constantFrom(
  { type: "RuntimeDefault" },
  { type: "Localhost", localhostProfile: "p.json" },
  { type: "Unconfined" },
);
const uid = fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 70000 }));
const capabilities = fc.record(
  {
    add: fc.subarray(["NET_BIND_SERVICE", "CHOWN", "NET_RAW", "SYS_ADMIN", "CAP_SYS_ADMIN"]),
    drop: fc.subarray(["ALL", "NET_RAW", "CHOWN"]),
  },
  { requiredKeys: [] },
);
const containerSecurityContext = fc.record(
  {
    allowPrivilegeEscalation: fc.boolean(),
    privileged: fc.boolean(),
    readOnlyRootFilesystem: fc.boolean(),
    runAsNonRoot: fc.boolean(),
    runAsUser: uid,
    runAsGroup: uid,
    capabilities,
    seccompProfile: seccomp,
    procMount: fc.constantFrom("Default", "Unmasked"),
  },
  { requiredKeys: [] },
);
const mounts = fc.subarray([
  { name: "data", mountPath: "/tmp" },
  { name: "data", mountPath: "/var/tmp/" },
  { name: "cfg", mountPath: "/etc/app", readOnly: true },
]);
const container = fc.record(
  { securityContext: opt(containerSecurityContext), volumeMounts: opt(mounts) },
  { requiredKeys: [] },
);
const podSecurityContext = fc.record(
  {
    runAsNonRoot: fc.boolean(),
    runAsUser: uid,
    runAsGroup: uid,
    seccompProfile: seccomp,
    fsGroup: fc.integer({ min: 1, max: 70000 }),
  },
  { requiredKeys: [] },
);
const volumes = fc.subarray([
  { name: "data", emptyDir: {} },
  { name: "cfg", configMap: { name: "app" } },
  { name: "ag-writable-tmp", secret: { secretName: "s" } },
  { name: "ag-writable-var-tmp", emptyDir: { medium: "Memory" } },
]);

/** Drops undefined keys (fc.option) so the pod is what a user would send. */
const clean = (x: unknown): unknown =>
  Array.isArray(x)
    ? x.map(clean)
    : x && typeof x === "object"
      ? Object.fromEntries(
          Object.entries(x)
            .filter(([, v]) => v !== undefined)
            .map(([k, v]) => [k, clean(v)]),
        )
      : x;

const named = (prefix: string, list: Obj[]) =>
  list.map((c, i) => ({ name: `${prefix}${i}`, image: `registry.example/${prefix}:1`, ...c }));

const podArb = fc
  .record({
    os: opt(fc.constantFrom("linux", "windows")),
    hostUsers: opt(fc.boolean()),
    securityContext: opt(podSecurityContext),
    initContainers: fc.array(container, { maxLength: 2 }),
    containers: fc.array(container, { minLength: 1, maxLength: 3 }),
    ephemeralContainers: fc.array(container, { maxLength: 1 }),
    volumes: volumes,
  })
  .map(g => {
    const windows = g.os === "windows";
    // A Windows pod as the API accepts it: no Linux-only field anywhere (runAsNonRoot is allowed).
    const linuxOnly = (sc: Obj | undefined, keep: string[]) =>
      sc && windows ? Object.fromEntries(Object.entries(sc).filter(([k]) => keep.includes(k))) : sc;
    const kinds = (list: Obj[], prefix: string) =>
      named(
        prefix,
        list.map(c => ({
          ...c,
          securityContext: linuxOnly(c.securityContext, ["runAsNonRoot"]),
          // every mount needs its volume
          volumeMounts: c.volumeMounts,
        })),
      );
    const spec: Obj = {
      os: g.os ? { name: g.os } : undefined,
      hostUsers: windows ? undefined : g.hostUsers,
      securityContext: linuxOnly(g.securityContext, ["runAsNonRoot"]),
      initContainers: kinds(g.initContainers, "init"),
      containers: kinds(g.containers, "app"),
      ephemeralContainers: kinds(g.ephemeralContainers, "debug"),
      volumes: [
        ...g.volumes,
        ...[
          { name: "data", emptyDir: {} },
          { name: "cfg", configMap: { name: "app" } },
        ].filter(v => !g.volumes.some(u => u.name === v.name)),
      ],
    };
    return clean({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "gen", namespace: "ml" },
      spec,
    }) as Obj;
  });

const template = (p: Obj) => podTemplateOf(p as KubeObject)!;
const fixed = (p: Obj) => {
  const copy = structuredClone(p);
  return { pod: copy, changes: fixPodSecurity(template(copy), settings) };
};
const failing = (p: Obj) =>
  evaluatePod(template(p))
    .filter(r => !r.allowed)
    .map(r => r.id);

/** Every leaf value of an object with its path: the explicit values the user set. */
function leaves(x: unknown, path = ""): [string, unknown][] {
  if (x && typeof x === "object") {
    const entries = Object.entries(x);
    if (!entries.length) return [[path, Array.isArray(x) ? "[]" : "{}"]];
    return entries.flatMap(([k, v]) => leaves(v, `${path}/${k}`));
  }
  return [[path, x]];
}
const at = (x: unknown, path: string): unknown =>
  path
    .split("/")
    .slice(1)
    .reduce<unknown>((o, k) => (o && typeof o === "object" ? (o as Obj)[k] : undefined), x);

const SYS_ADMIN = ["SYS_ADMIN", "CAP_SYS_ADMIN"];

/**
 * A reference "fill every unset field with its restricted value", written independently of the
 * fix: pod- and container-level runAsNonRoot and seccompProfile, allowPrivilegeEscalation (where
 * the API allows false), drop ALL. Windows pods only get runAsNonRoot (the API forbids the rest).
 */
function fillEverything(p: Obj): Obj {
  const q = structuredClone(p);
  const windows = q.spec.os?.name === "windows";
  const sc = (q.spec.securityContext ??= {});
  sc.runAsNonRoot ??= true;
  if (!windows) sc.seccompProfile ??= { type: "RuntimeDefault" };
  for (const kind of ["initContainers", "containers", "ephemeralContainers"]) {
    for (const c of q.spec[kind] ?? []) {
      const csc = (c.securityContext ??= {});
      csc.runAsNonRoot ??= true;
      if (windows) continue;
      csc.seccompProfile ??= { type: "RuntimeDefault" };
      const adds: string[] = csc.capabilities?.add ?? [];
      if (csc.privileged !== true && !adds.some(a => SYS_ADMIN.includes(a)))
        csc.allowPrivilegeEscalation ??= false;
      csc.capabilities ??= {};
      csc.capabilities.drop = [
        ...(csc.capabilities.drop ?? []).filter((d: string) => d !== "ALL"),
        "ALL",
      ];
    }
  }
  return q;
}

const WINDOWS_FORBIDDEN_POD = [
  "hostPID",
  "hostIPC",
  "hostUsers",
  "shareProcessNamespace",
  "securityContext.appArmorProfile",
  "securityContext.seLinuxOptions",
  "securityContext.seccompProfile",
  "securityContext.fsGroup",
  "securityContext.fsGroupChangePolicy",
  "securityContext.sysctls",
  "securityContext.runAsUser",
  "securityContext.runAsGroup",
  "securityContext.supplementalGroups",
  "securityContext.supplementalGroupsPolicy",
];
const WINDOWS_FORBIDDEN_CONTAINER = [
  "appArmorProfile",
  "seLinuxOptions",
  "seccompProfile",
  "capabilities",
  "readOnlyRootFilesystem",
  "privileged",
  "allowPrivilegeEscalation",
  "procMount",
  "runAsUser",
  "runAsGroup",
];
function linuxOnlyFields(p: Obj): string[] {
  const out = WINDOWS_FORBIDDEN_POD.filter(
    f => at(p.spec, `/${f.replace(".", "/")}`) !== undefined,
  );
  for (const kind of ["initContainers", "containers", "ephemeralContainers"])
    (p.spec[kind] ?? []).forEach((c: Obj, i: number) => {
      for (const f of WINDOWS_FORBIDDEN_CONTAINER)
        if (c.securityContext?.[f] !== undefined) out.push(`${kind}[${i}].securityContext.${f}`);
    });
  return out;
}

const runs = { numRuns: 300 };

describe("the security-context fix over generated pods", () => {
  it("generates pods the API schema accepts (so the properties below are about real pods)", () => {
    fc.assert(
      fc.property(podArb, p => assertValidPod(p)),
      { numRuns: 100 },
    );
  });

  it("fixing twice equals fixing once", () => {
    fc.assert(
      fc.property(podArb, p => {
        const once = fixed(p).pod;
        const twice = fixed(once);
        expect(twice.changes).toEqual([]);
        expect(twice.pod).toEqual(once);
      }),
      runs,
    );
  });

  it("never changes a value the user set (only adds fields and list entries)", () => {
    fc.assert(
      fc.property(podArb, p => {
        const after = fixed(p).pod;
        for (const [path, value] of leaves(p)) {
          if (value === "{}" || value === "[]") continue; // an empty object/list may be filled
          expect([path, at(after, path)]).toEqual([path, value]);
        }
      }),
      runs,
    );
  });

  it("leaves no violation that filling an unset field could cure", () => {
    fc.assert(
      fc.property(podArb, p => {
        const after = fixed(p).pod;
        const remaining = failing(after);
        const curable = remaining.filter(id => !failing(fillEverything(after)).includes(id));
        expect(curable).toEqual([]);
      }),
      runs,
    );
  });

  it("cures every pod whose user values are all compliant", () => {
    const compliant = podArb.filter(p => failing(fillEverything(p)).length === 0);
    fc.assert(
      fc.property(compliant, p => expect(failing(fixed(p).pod)).toEqual([])),
      { numRuns: 100 },
    );
  });

  it("gives Windows pods no Linux-only field", () => {
    const windows = podArb.filter(p => p.spec.os?.name === "windows");
    fc.assert(
      fc.property(windows, p => {
        expect(linuxOnlyFields(p)).toEqual([]);
        expect(linuxOnlyFields(fixed(p).pod)).toEqual([]);
      }),
      { numRuns: 100 },
    );
  });

  it("produces a pod the Kubernetes schema accepts: known fields, right types", () => {
    fc.assert(
      fc.property(podArb, p => {
        assertValidPod(fixed(p).pod);
      }),
      runs,
    );
  });

  it("names a field path and a value in every change", () => {
    fc.assert(
      fc.property(podArb, p => {
        for (const c of fixed(p).changes) {
          expect(c.message).toMatch(/^spec\.[A-Za-z]+.*=.+/);
        }
      }),
      { numRuns: 100 },
    );
  });
});
