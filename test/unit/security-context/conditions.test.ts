// The conditions that decide a security-context violation or fix, one case each side of the line:
// cases mutation testing (npm run test:mutation) found no test for.
import {
  ALL_CHECKS,
  checksFor,
  evaluatePod,
  RESTRICTED_CHECK_IDS,
} from "../../../capabilities/security-context/checks";
import { appArmorProfile } from "../../../capabilities/security-context/checks/appArmorProfile";
import { capabilitiesBaseline } from "../../../capabilities/security-context/checks/capabilities_baseline";
import { capabilitiesRestricted } from "../../../capabilities/security-context/checks/capabilities_restricted";
import { hostPorts } from "../../../capabilities/security-context/checks/hostPorts";
import { hostProbesAndHostLifecycle } from "../../../capabilities/security-context/checks/hostProbesAndHostLifecycle";
import { procMountRestricted } from "../../../capabilities/security-context/checks/procMount";
import { seccompProfileRestricted } from "../../../capabilities/security-context/checks/seccompProfile";
import { seLinuxOptions } from "../../../capabilities/security-context/checks/seLinuxOptions";
import { sysctls } from "../../../capabilities/security-context/checks/sysctls";
import { windowsHostProcess } from "../../../capabilities/security-context/checks/windowsHostProcess";
import {
  fixPodSecurity,
  normalizePath,
  scratchVolumeName,
} from "../../../capabilities/security-context/fix";
import { imageUserOf, type ImageUser } from "../../../capabilities/security-context/image-user";
import type { ImageLookup } from "../../../lib/cluster/view";
import type { KubeObject, PodTemplateRef } from "../../../lib/objects/pod";
import { podTemplateOf } from "../../../lib/workload-kinds/built-in";
import { defaultSettings, parseSettings } from "../../../lib/settings";
import type { V1Container } from "@kubernetes/client-node";

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const settings = defaultSettings().securityContext;
const FILL = parseSettings({ securityContext: { readOnlyRootFilesystem: "fill" } }).securityContext;

const template = (spec: Obj, metadata: Obj = { name: "p", namespace: "ml" }): PodTemplateRef =>
  podTemplateOf({ apiVersion: "v1", kind: "Pod", metadata, spec } as KubeObject)!;

/** A container restricted allows, with `sc` merged into its securityContext. */
const container = (sc: Obj = {}, rest: Obj = {}): Obj => ({
  name: "app",
  image: "registry.example/app:1.0",
  securityContext: {
    allowPrivilegeEscalation: false,
    capabilities: { drop: ["ALL"] },
    ...sc,
  },
  ...rest,
});

/** A pod restricted allows, with `sc` merged into its pod securityContext. */
const restrictedSpec = (containers: Obj[] = [container()], sc: Obj = {}): Obj => ({
  securityContext: { runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" }, ...sc },
  containers,
});

describe("check conditions", () => {
  it("appArmorProfile: the Localhost type is allowed in the field, Unconfined at pod level is not", () => {
    const localhost = template(
      restrictedSpec([
        container({ appArmorProfile: { type: "Localhost", localhostProfile: "p" } }),
      ]),
    );
    expect(appArmorProfile.check(localhost)).toEqual({ allowed: true });
    const podUnconfined = appArmorProfile.check(
      template(restrictedSpec([container()], { appArmorProfile: { type: "Unconfined" } })),
    );
    expect(podUnconfined.allowed).toBe(false);
    expect(podUnconfined.forbiddenDetail).toMatch(/^pod must not set/);
    expect(podUnconfined.fix).toContain("spec.securityContext.appArmorProfile.type");
  });

  it("appArmorProfile: the annotations runtime/default and empty are allowed", () => {
    for (const value of ["runtime/default", ""]) {
      const annotations = { "container.apparmor.security.beta.kubernetes.io/app": value };
      const t = template(restrictedSpec(), { name: "p", namespace: "ml", annotations });
      expect([value, appArmorProfile.check(t)]).toEqual([value, { allowed: true }]);
    }
  });

  it("seLinuxOptions: a role is forbidden as a user is, and the detail says which", () => {
    const role = seLinuxOptions.check(
      template(restrictedSpec([container({ seLinuxOptions: { role: "sysadm_r" } })])),
    );
    expect(role.allowed).toBe(false);
    expect(role.forbiddenDetail).toContain("role may not be set");
    expect(role.forbiddenDetail).not.toContain("user may not be set");
    const user = seLinuxOptions.check(
      template(restrictedSpec([container({ seLinuxOptions: { user: "system_u" } })])),
    );
    expect(user.allowed).toBe(false);
    expect(user.forbiddenDetail).toContain("user may not be set");
    expect(user.forbiddenDetail).not.toContain("role may not be set");
  });

  it("hostPorts and procMount: a null value counts as unset", () => {
    const nullPort = template(
      restrictedSpec([container({}, { ports: [{ containerPort: 80, hostPort: null }, null] })]),
    );
    expect(hostPorts.check(nullPort)).toEqual({ allowed: true });
    const nullProcMount = template(restrictedSpec([container({ procMount: null })]));
    expect(procMountRestricted.check(nullProcMount)).toEqual({ allowed: true });
  });

  it("windowsHostProcess: a container's hostProcess is forbidden, not only the pod's", () => {
    const t = template({
      securityContext: { runAsNonRoot: true },
      containers: [container({ windowsOptions: { hostProcess: true } })],
      os: { name: "windows" },
    });
    const result = windowsHostProcess.check(t);
    expect(result.allowed).toBe(false);
    expect(result.forbiddenDetail).toContain('container "app"');
  });

  it("values of the wrong type count as unset, and no check throws on them", () => {
    // Containers without a securityContext, a null sysctl, a numeric probe host, a non-string
    // annotation, a pod without metadata.
    const bare = { name: "bare", image: "registry.example/app:1.0" };
    const spec: Obj = {
      securityContext: {
        runAsNonRoot: true,
        seccompProfile: { type: "RuntimeDefault" },
        sysctls: [null],
      },
      containers: [
        { ...bare, livenessProbe: { httpGet: { host: 123, port: 80 } } },
        { ...bare, name: "other" },
      ],
    };
    const t = template(spec, {
      name: "p",
      annotations: { "container.apparmor.security.beta.kubernetes.io/bare": 5 },
    });
    for (const check of ALL_CHECKS) expect(() => check.check(t)).not.toThrow();
    expect(capabilitiesBaseline.check(t)).toEqual({ allowed: true });
    expect(seccompProfileRestricted.check(t)).toEqual({ allowed: true });
    expect(hostProbesAndHostLifecycle.check(t)).toEqual({ allowed: true });
    expect(appArmorProfile.check(t)).toEqual({ allowed: true });
    expect(capabilitiesRestricted.check(t).forbiddenReason).toBe("unrestricted capabilities");
    expect(sysctls.check(t).allowed).toBe(false);
    const noMetadata: PodTemplateRef = { ...t, metadata: undefined as never };
    for (const check of ALL_CHECKS) expect(() => check.check(noMetadata)).not.toThrow();
  });
});

describe("the check registry's levels", () => {
  it("baseline runs exactly the baseline checks, restricted names its checks by id", () => {
    expect(checksFor("baseline").map(c => c.id)).toEqual(
      ALL_CHECKS.filter(c => c.level === "baseline").map(c => c.id),
    );
    expect(checksFor("baseline").length).toBe(12);
    expect(RESTRICTED_CHECK_IDS).toEqual(checksFor("restricted").map(c => c.id));
    expect(RESTRICTED_CHECK_IDS).toContain("runAsNonRoot");
  });

  it("a check that throws counts as forbidden, never as allowed", () => {
    const t = template(restrictedSpec());
    const throwing: PodTemplateRef = {
      ...t,
      get spec(): never {
        throw new Error("unreadable");
      },
    };
    const outcomes = evaluatePod(throwing);
    expect(outcomes.length).toBeGreaterThan(0);
    for (const outcome of outcomes) {
      expect(outcome.allowed).toBe(false);
      expect(outcome.forbiddenReason).toBe("check failed");
      expect(outcome.forbiddenDetail).toContain("unreadable");
    }
  });
});

const numericUser = (uid: number, gid?: number): ImageUser => ({
  kind: "numeric",
  image: "i",
  uid,
  gid,
  workingDir: "/",
});
const rootUser: ImageUser = { kind: "root", image: "i", workingDir: "/" };

/** fixPodSecurity with each container's image user, by container name. */
function fixWith(t: PodTemplateRef, users: Record<string, ImageUser>, s = settings) {
  const map = new Map<V1Container, ImageUser>();
  for (const c of [...(t.spec.containers ?? []), ...(t.spec.initContainers ?? [])])
    if (users[c.name]) map.set(c, users[c.name]);
  return fixPodSecurity(t, s, { users: map });
}

describe("fix conditions", () => {
  it("a template without a spec, or with malformed fields, is left alone and never crashes", () => {
    const noSpec: PodTemplateRef = { metadata: {}, spec: undefined as never, path: "" };
    expect(fixPodSecurity(noSpec, settings)).toEqual([]);
    const t = template({
      volumes: [null, { name: "data", emptyDir: {} }],
      containers: [
        {
          name: "app",
          image: "i",
          securityContext: { capabilities: { drop: "NET_RAW" } },
          volumeMounts: [null, { name: "data", mountPath: 5 }],
        },
        { name: "caps", image: "i", securityContext: { capabilities: "bogus" } },
        { name: "mounts", image: "i", volumeMounts: "bogus" },
      ],
    });
    expect(() => fixPodSecurity(t, FILL)).not.toThrow();
    const [app, caps, mounts] = t.spec.containers as Obj[];
    expect(app.securityContext.capabilities.drop).toBe("NET_RAW");
    // A mountPath that is not a string covers nothing: /tmp still gets its scratch volume.
    expect(app.volumeMounts.some((m: Obj) => m?.mountPath === "/tmp")).toBe(true);
    expect(caps.securityContext.capabilities).toBe("bogus");
    expect(mounts.volumeMounts).toBe("bogus");
    expect(mounts.securityContext.readOnlyRootFilesystem).toBeUndefined();
    // Malformed volumes: nothing that needs a volume is done.
    const badVolumes = template({ volumes: "bogus", containers: [{ name: "app", image: "i" }] });
    expect(() => fixPodSecurity(badVolumes, FILL)).not.toThrow();
    expect(badVolumes.spec.volumes).toBe("bogus");
    expect(
      (badVolumes.spec.containers[0] as Obj).securityContext.readOnlyRootFilesystem,
    ).toBeUndefined();
    // Malformed env: no HOME is added to it.
    const badEnv = template({
      containers: [
        { name: "a", image: "a", env: "bogus" },
        { name: "b", image: "b", env: [null] },
      ],
    });
    expect(() => fixWith(badEnv, { a: rootUser, b: rootUser })).not.toThrow();
    const [a, b] = badEnv.spec.containers as Obj[];
    expect(a.env).toBe("bogus");
    expect(b.env).toEqual([null, { name: "HOME", value: settings.homePath }]);
  });

  it("a null securityContext is filled as an unset one", () => {
    const t = template({ containers: [{ name: "app", image: "i", securityContext: null }] });
    fixPodSecurity(t, settings);
    expect((t.spec.containers[0] as Obj).securityContext.allowPrivilegeEscalation).toBe(false);
  });

  it("a user-namespaced pod gets no UID, at the pod or on its containers", () => {
    const t = template({ hostUsers: false, containers: [{ name: "app", image: "i" }] });
    fixPodSecurity(t, settings);
    expect(t.spec.securityContext?.runAsUser).toBeUndefined();
    expect((t.spec.containers[0] as Obj).securityContext.runAsUser).toBeUndefined();
  });

  it("an empty pod securityContext the fix made is removed, one the user wrote is kept", () => {
    const own = { seccompProfile: { type: "RuntimeDefault" } };
    const made = template({
      hostUsers: false,
      containers: [{ name: "a", image: "i", securityContext: own }],
    });
    fixPodSecurity(made, settings);
    expect("securityContext" in made.spec).toBe(false);
    const written = template({
      hostUsers: false,
      securityContext: {},
      containers: [{ name: "a", image: "i", securityContext: { ...own } }],
    });
    fixPodSecurity(written, settings);
    expect(written.spec.securityContext).toEqual({});
  });

  it("a pod with no containers yet gets the configured user and a pod seccompProfile", () => {
    const t = template({ containers: [] });
    fixPodSecurity(t, settings);
    expect(t.spec.securityContext).toMatchObject({
      runAsUser: settings.runAsUser,
      runAsGroup: settings.runAsGroup,
      seccompProfile: { type: "RuntimeDefault" },
    });
  });

  it("containers whose images run as different users get their own, not one at the pod", () => {
    for (const [a, b] of [
      [numericUser(1001, 1001), numericUser(1002, 1001)],
      [numericUser(1001, 1001), numericUser(1001, 1002)],
    ]) {
      const t = template({
        containers: [
          { name: "a", image: "a" },
          { name: "b", image: "b" },
        ],
      });
      fixWith(t, { a, b });
      expect(t.spec.securityContext?.runAsUser).toBeUndefined();
      const [ca, cb] = t.spec.containers as Obj[];
      expect([ca.securityContext.runAsUser, ca.securityContext.runAsGroup]).toEqual([
        a.kind === "numeric" && a.uid,
        a.kind === "numeric" && a.gid,
      ]);
      expect([cb.securityContext.runAsUser, cb.securityContext.runAsGroup]).toEqual([
        b.kind === "numeric" && b.uid,
        b.kind === "numeric" && b.gid,
      ]);
    }
  });

  it("a container whose image names no group gets no runAsGroup, and fsGroup follows the first", () => {
    const t = template({
      volumes: [{ name: "data", emptyDir: {} }],
      containers: [
        { name: "a", image: "a" },
        { name: "b", image: "b" },
      ],
    });
    const changes = fixWith(t, { a: numericUser(1001), b: numericUser(1002, 7) });
    const [ca, cb] = t.spec.containers as Obj[];
    expect("runAsGroup" in ca.securityContext).toBe(false);
    expect(cb.securityContext.runAsGroup).toBe(7);
    expect(changes.map(c => c.message)).not.toContain(
      "spec.containers[0].securityContext.runAsGroup=undefined",
    );
    expect(t.spec.securityContext?.fsGroup).toBe(1001);
  });

  it("containers get no group of ours when the pod names one or the image names none", () => {
    const t = template({
      securityContext: { runAsGroup: 4242 },
      containers: [
        { name: "a", image: "a" },
        { name: "b", image: "b" },
      ],
    });
    fixWith(t, { a: numericUser(1001), b: numericUser(1002, 7) });
    const [ca, cb] = t.spec.containers as Obj[];
    expect(ca.securityContext.runAsGroup).toBeUndefined();
    expect(cb.securityContext.runAsGroup).toBeUndefined();
    const own = template({
      containers: [
        { name: "a", image: "a", securityContext: { runAsGroup: 9 } },
        { name: "b", image: "b" },
      ],
    });
    fixWith(own, { a: numericUser(1001, 1001), b: numericUser(1002, 1002) });
    expect((own.spec.containers[0] as Obj).securityContext.runAsGroup).toBe(9);
  });

  it("fsGroup is the pod's group, else its non-root user, else the configured group", () => {
    const fsGroupOf = (sc: Obj) => {
      const t = template({
        securityContext: sc,
        volumes: [{ name: "data", emptyDir: {} }],
        containers: [{ name: "app", image: "i" }],
      });
      fixPodSecurity(t, settings);
      return t.spec.securityContext?.fsGroup;
    };
    expect(fsGroupOf({ runAsUser: 5000, runAsGroup: 4242 })).toBe(4242);
    expect(fsGroupOf({ runAsUser: 5000 })).toBe(5000);
    expect(fsGroupOf({ runAsUser: 0 })).toBe(settings.runAsGroup);
    expect(fsGroupOf({ runAsUser: "5000" })).toBe(settings.runAsGroup);
  });

  it("keeps the user's fsGroupChangePolicy", () => {
    const t = template({
      securityContext: { fsGroupChangePolicy: "Always" },
      volumes: [{ name: "data", persistentVolumeClaim: { claimName: "c" } }],
      containers: [{ name: "app", image: "i" }],
    });
    fixPodSecurity(t, settings);
    expect(t.spec.securityContext?.fsGroupChangePolicy).toBe("Always");
    expect(t.spec.securityContext?.fsGroup).toBe(settings.runAsGroup);
  });

  it("a root image's container gets HOME even when it has other env vars, not when it has HOME", () => {
    const t = template({
      containers: [
        { name: "a", image: "a", env: [{ name: "FOO", value: "1" }] },
        { name: "b", image: "b", env: [{ name: "HOME", value: "/data" }] },
      ],
    });
    fixWith(t, { a: rootUser, b: rootUser });
    const [ca, cb] = t.spec.containers as Obj[];
    expect(ca.env).toEqual([
      { name: "FOO", value: "1" },
      { name: "HOME", value: settings.homePath },
    ]);
    expect(cb.env).toEqual([{ name: "HOME", value: "/data" }]);
  });

  it("a mount at / already covers every writable path", () => {
    const t = template({
      volumes: [{ name: "root", emptyDir: {} }],
      containers: [{ name: "app", image: "i", volumeMounts: [{ name: "root", mountPath: "/" }] }],
    });
    fixPodSecurity(t, FILL);
    expect((t.spec.containers[0] as Obj).volumeMounts).toEqual([{ name: "root", mountPath: "/" }]);
  });

  it("normalizes paths and names scratch volumes exactly", () => {
    expect(normalizePath("/tmp//")).toBe("/tmp");
    expect(normalizePath("///")).toBe("/");
    expect(scratchVolumeName("/a//b")).toBe("ag-writable-a-b");
    expect(scratchVolumeName("//tmp//")).toBe("ag-writable-tmp");
    const exact = `/${"a".repeat(51)}`; // "ag-writable-" + 51 letters: 63, the longest label
    expect(scratchVolumeName(exact)).toBe(`ag-writable-${"a".repeat(51)}`);
    const long = `/${"b".repeat(60)}/`;
    const name = scratchVolumeName(long);
    expect(name).toBe(scratchVolumeName(long));
    expect(name).toMatch(/^ag-writable-b{42}-[0-9a-f]{8}$/);
    expect(name).toBe(`ag-writable-${"b".repeat(42)}-${LONG_HASH}`);
  });
});

// FNV-1a of "/bbb…b/" (60 b's), as the scratch volume name's suffix.
const LONG_HASH = (() => {
  let h = 0x811c9dc5;
  const s = `/${"b".repeat(60)}/`;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return h.toString(16).padStart(8, "0");
})();

describe("image users", () => {
  const lookup = (user: string): ImageLookup => ({
    state: "known",
    config: { user, workingDir: "/", env: [] } as never,
  });
  it("reads only an all-digit user as a UID", () => {
    expect(imageUserOf("i", lookup("1001")).kind).toBe("numeric");
    expect(imageUserOf("i", lookup("app1")).kind).toBe("named");
    expect(imageUserOf("i", lookup("1001x")).kind).toBe("named");
  });
});
