// A server on a privileged port, run non-root with every capability dropped, gets the pod-level
// sysctl net.ipv4.ip_unprivileged_port_start (capabilities/security-context/fix-low-ports.ts).
import { fixPodSecurity } from "../../../capabilities/security-context/fix";
import {
  LOW_PORT_SYSCTL,
  lowPortWarning,
  sysctlAllowed,
} from "../../../capabilities/security-context/fix-low-ports";
import { imageUserOf, type ImageUser } from "../../../capabilities/security-context/image-user";
import { evaluatePod } from "../../../capabilities/security-context/checks";
import { shapesOf } from "../../../lib/images/config-shapes";
import type { KubeObject } from "../../../lib/objects/pod";
import { podTemplateOf } from "../../../lib/workload-kinds/built-in";
import { defaultSettings, parseSettings } from "../../../lib/settings";
import { policies } from "../../../capabilities";
import { SnapshotCluster } from "../../../lib/cluster/view";
import { review } from "../../../lib/engine";
import type { LevelVersion } from "../../../capabilities/security-context/checks";

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const settings = defaultSettings().securityContext;
/** A root-built image with this config (Env, ExposedPorts) as the registry serves it. */
const rootImage = (config: Record<string, unknown>, user = ""): ImageUser => {
  const shapes = shapesOf(config);
  return imageUserOf("img", {
    state: "known",
    config: { digest: "sha256:x", user, workingDir: "", ...(shapes ? { shapes } : {}) },
  });
};
const TGI = rootImage({ Env: ["PORT=80"] });
const NGINX = rootImage({ ExposedPorts: { "80/tcp": {}, "443/tcp": {} } });
const PLAIN = rootImage({});

const pod = (container: Obj = {}, spec: Obj = {}): Obj => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p", namespace: "ml" },
  spec: { containers: [{ name: "server", image: "img", ...container }], ...spec },
});

function fix(
  p: Obj,
  user: ImageUser = PLAIN,
  level: LevelVersion = { level: "restricted", version: "latest" },
  s = settings,
) {
  const template = podTemplateOf(p as KubeObject)!;
  const users = new Map([[p.spec.containers[0], user]]);
  const changes = fixPodSecurity(template, s, { users, level });
  return { changes, template, users };
}

const sysctlsOf = (p: Obj) => p.spec.securityContext?.sysctls;

describe("the low-port sysctl", () => {
  test.each([
    ["the image's Env PORT=80", {}, TGI, "80"],
    ["the image's EXPOSE 80 and 443: the lowest", {}, NGINX, "80"],
    ["the container's containerPort", { ports: [{ containerPort: 443 }] }, PLAIN, "443"],
    ["the container's env PORT", { env: [{ name: "HTTP_PORT", value: "8" }] }, PLAIN, "8"],
  ])("%s: set at the pod, recorded with its path; restricted passes it", (_, c, user, value) => {
    const p = pod(c, {});
    const { changes, template } = fix(p, user);
    expect(sysctlsOf(p)).toEqual([{ name: LOW_PORT_SYSCTL, value }]);
    expect(changes).toContainEqual({
      rule: "lowPorts",
      message: `spec.securityContext.sysctls[0]=${JSON.stringify({ name: LOW_PORT_SYSCTL, value })}`,
    });
    expect(evaluatePod(template, "restricted", "latest").filter(o => !o.allowed)).toEqual([]);
    // Idempotent: fixing again adds nothing.
    expect(fix(p, user).changes).toEqual([]);
  });

  test("the container's env replaces the image's PORT (8080: nothing to do)", () => {
    const p = pod({ env: [{ name: "PORT", value: "8080" }] });
    fix(p, TGI);
    expect(sysctlsOf(p)).toBeUndefined();
  });

  test("no privileged port, or a port above 1023: nothing", () => {
    const p = pod({ ports: [{ containerPort: 8080 }, { containerPort: 1024 }] });
    fix(p);
    expect(sysctlsOf(p)).toBeUndefined();
  });

  test("a container that adds NET_BIND_SERVICE, or runs as root, or drops nothing (baseline): nothing", () => {
    const withCap = pod({ securityContext: { capabilities: { add: ["NET_BIND_SERVICE"] } } });
    fix(withCap, TGI);
    expect(sysctlsOf(withCap)).toBeUndefined();
    const asRoot = pod({}, { securityContext: { runAsUser: 0 } });
    fix(asRoot, TGI, { level: "baseline", version: "latest" });
    expect(sysctlsOf(asRoot)).toBeUndefined();
    // Baseline fills no drop ALL: a non-root container keeps its capabilities (none by default
    // as non-root, but that is the runtime's business, not a capability it dropped).
    const baseline = pod({}, { securityContext: { runAsUser: 1000 } });
    fix(baseline, TGI, { level: "baseline", version: "latest" });
    expect(sysctlsOf(baseline)).toBeUndefined();
  });

  test("baseline, a container that drops ALL itself as a non-root UID: set", () => {
    const p = pod({ securityContext: { runAsUser: 1000, capabilities: { drop: ["ALL"] } } }, {});
    fix(p, TGI, { level: "baseline", version: 30 });
    expect(sysctlsOf(p)).toEqual([{ name: LOW_PORT_SYSCTL, value: "80" }]);
  });

  test("hostNetwork: never (the node's namespace)", () => {
    const p = pod({}, { hostNetwork: true });
    fix(p, TGI, { level: "baseline", version: "latest" });
    expect(JSON.stringify(p.spec)).not.toContain(LOW_PORT_SYSCTL);
  });

  test("a namespace pinned below v1.22 (enforce-version): not set", () => {
    expect(sysctlAllowed({ level: "restricted", version: 21 })).toBe(false);
    expect(sysctlAllowed({ level: "restricted", version: 22 })).toBe(true);
    expect(sysctlAllowed({ level: "baseline", version: "latest" })).toBe(true);
    const p = pod();
    fix(p, TGI, { level: "restricted", version: 21 });
    expect(sysctlsOf(p)).toBeUndefined();
  });

  test("the pod's own value is never changed (another sysctl of its own is kept)", () => {
    const own = { name: LOW_PORT_SYSCTL, value: "1024" };
    const p = pod({}, { securityContext: { sysctls: [own] } });
    fix(p, TGI);
    expect(sysctlsOf(p)).toEqual([own]);
    const other = pod(
      {},
      { securityContext: { sysctls: [{ name: "kernel.shm_rmid_forced", value: "1" }] } },
    );
    fix(other, TGI);
    expect(sysctlsOf(other)).toEqual([
      { name: "kernel.shm_rmid_forced", value: "1" },
      { name: LOW_PORT_SYSCTL, value: "80" },
    ]);
  });

  test("the pod's own value above the port: warned with the fix; at or below it: nothing", () => {
    const p = pod({}, { securityContext: { sysctls: [{ name: LOW_PORT_SYSCTL, value: "1024" }] } });
    const { template, users } = fix(p, TGI);
    expect(lowPortWarning(template, users)).toBe(
      `container "server" listens on port 80 (its image's Env PORT=80) as a non-root UID with every capability dropped, but the pod sets ${LOW_PORT_SYSCTL}=1024 in spec.securityContext.sysctls, above it, so the bind will fail (the module never changes a sysctl the pod sets). Fix: set ${LOW_PORT_SYSCTL} to 80 or lower in spec.securityContext.sysctls`,
    );
    const low = pod({}, { securityContext: { sysctls: [{ name: LOW_PORT_SYSCTL, value: "0" }] } });
    const fixed = fix(low, TGI);
    expect(lowPortWarning(fixed.template, fixed.users)).toBeUndefined();
  });

  test("securityContext.lowPorts off: nothing", () => {
    const p = pod();
    fix(p, TGI, undefined, { ...settings, lowPorts: "off" });
    expect(sysctlsOf(p)).toBeUndefined();
  });
});

describe("where the fix may not set it: said at admission", () => {
  const server: KubeObject = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "web", namespace: "ml" },
    spec: {
      securityContext: { runAsUser: 1000 },
      containers: [
        {
          name: "web",
          image: "img",
          ports: [{ containerPort: 80 }],
          // Its own drop ALL: below v1.22 restricted does not ask for it (the fix adds none).
          securityContext: { capabilities: { drop: ["ALL"] } },
        },
      ],
    },
  };
  const ns = (labels: Record<string, string>) =>
    new SnapshotCluster([{ kind: "Namespace", metadata: { name: "ml", labels } } as KubeObject]);

  test("a namespace pinned below v1.22: not set, warned with the port and the fix", async () => {
    const r = await review(policies, server, {
      settings: defaultSettings(),
      cluster: ns({
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "v1.21",
      }),
    });
    expect(JSON.stringify(r.object)).not.toContain(LOW_PORT_SYSCTL);
    expect(r.warnings).toContainEqual(
      expect.stringContaining(
        `container "web" listens on port 80 (containerPort 80) as a non-root UID with every capability dropped, and ${LOW_PORT_SYSCTL} is not set (namespace ml enforces Pod Security restricted`,
      ),
    );
    expect(r.warnings.join("\n")).toContain(
      `Fix: set ${LOW_PORT_SYSCTL} to 80 in spec.securityContext.sysctls`,
    );
  });

  test("securityContext.lowPorts off: warned; where the fix sets it: nothing said", async () => {
    const off = await review(policies, server, {
      settings: parseSettings({ securityContext: { lowPorts: "off" } }),
      cluster: ns({}),
    });
    expect(off.warnings).toContainEqual(
      expect.stringContaining("is not set (securityContext.lowPorts is off)"),
    );
    const on = await review(policies, server, { settings: defaultSettings(), cluster: ns({}) });
    expect(JSON.stringify(on.object)).toContain(LOW_PORT_SYSCTL);
    expect(on.warnings.join("\n")).not.toContain(LOW_PORT_SYSCTL);
  });
});
