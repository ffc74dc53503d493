// What "latest" means on a cluster (issue 27): Pod Security Admission evaluates "latest" (and any
// version newer than itself) as the API server's own version, so the live view reads /version once
// and the level code uses it while securityContext.clusterVersion is "latest"; `check` (a
// snapshot) keeps the setting.
import { policies } from "../../../capabilities";
import { clusterPolicyVersion, evaluated } from "../../../capabilities/security-context/policy";
import { SnapshotCluster, type ClusterView } from "../../../lib/cluster/view";
import {
  LiveCluster,
  policyVersionOf,
  VERSION_READ_ATTEMPTS,
  VERSION_RETRY_MS,
} from "../../../lib/cluster/live";
import { review } from "../../../lib/engine";
import type { RuleContext } from "../../../lib/engine/policy";
import type { KubeObject } from "../../../lib/objects/pod";
import { parseSettings, type SettingsInput } from "../../../lib/settings";

const ENFORCE = "pod-security.kubernetes.io/enforce";

/** A snapshot that knows the API server's version, as the live view does once it read /version. */
class SnapshotOfServer extends SnapshotCluster {
  constructor(
    objects: KubeObject[],
    readonly serverVersion: string,
  ) {
    super(objects);
  }
}

const contextOn = (cluster: Partial<ClusterView>, settings: SettingsInput = {}) =>
  ({ settings: parseSettings(settings, "test"), cluster }) as unknown as RuleContext;

describe("the API server's /version as a policy version", () => {
  it.each([
    [{ major: "1", minor: "32", gitVersion: "v1.32.13" }, "v1.32"],
    [{ major: "1", minor: "29+", gitVersion: "v1.29.8-eks-a737599" }, "v1.29"],
    [{ major: "1", minor: "30+" }, "v1.30"],
    [{ gitVersion: "v1.31.0-stand-in" }, "v1.31"],
    [{ major: "2", minor: "0" }, undefined],
    [{ major: "1", minor: "abc" }, undefined],
    [{}, undefined],
    [undefined, undefined],
  ])("%j is %s", (info, expected) => {
    expect(policyVersionOf(info)).toBe(expected);
  });
});

describe("the live view reads /version", () => {
  it("keeps the API server's version", async () => {
    const live = new LiveCluster(undefined, {
      readVersion: async () => ({ major: "1", minor: "32", gitVersion: "v1.32.13" }),
    });
    expect(live.serverVersion).toBeUndefined();
    await live.readServerVersion();
    expect(live.serverVersion).toBe("v1.32");
  });

  it("after a failed read, tries again later (a few times), and knows nothing meanwhile", async () => {
    jest.useFakeTimers();
    try {
      let calls = 0;
      const live = new LiveCluster(undefined, {
        readVersion: async () => {
          if (++calls < 3) throw new Error("connect ECONNREFUSED");
          return { gitVersion: "v1.30.2" };
        },
      });
      await live.readServerVersion();
      expect(live.serverVersion).toBeUndefined();
      await jest.advanceTimersByTimeAsync(VERSION_RETRY_MS);
      expect([calls, live.serverVersion]).toEqual([2, undefined]);
      await jest.advanceTimersByTimeAsync(VERSION_RETRY_MS);
      expect([calls, live.serverVersion]).toEqual([3, "v1.30"]);
      // Known: no more reads.
      await jest.advanceTimersByTimeAsync(10 * VERSION_RETRY_MS);
      expect(calls).toBe(3);
    } finally {
      jest.useRealTimers();
    }
  });

  it("gives up after its last attempt", async () => {
    jest.useFakeTimers();
    try {
      let calls = 0;
      const live = new LiveCluster(undefined, {
        readVersion: async () => {
          calls++;
          throw new Error("HTTP 503");
        },
      });
      await live.readServerVersion(VERSION_READ_ATTEMPTS);
      await jest.advanceTimersByTimeAsync(10 * VERSION_RETRY_MS);
      expect([calls, live.serverVersion]).toEqual([1, undefined]);
    } finally {
      jest.useRealTimers();
    }
  });
});

describe("which version latest is evaluated as", () => {
  const latest = { level: "baseline", version: "latest" } as const;

  it("the API server's, when the view knows it and the setting is latest", () => {
    const ctx = contextOn({ serverVersion: "v1.32" });
    expect(clusterPolicyVersion(ctx)).toBe(32);
    expect(evaluated(latest, ctx)).toEqual({ level: "baseline", version: 32 });
    // A pinned version newer than the API server is its version too, as PSA evaluates it.
    expect(evaluated({ level: "restricted", version: 35 }, ctx).version).toBe(32);
    expect(evaluated({ level: "restricted", version: 30 }, ctx).version).toBe(30);
  });

  it("the setting's, when it names a version (the admin's word wins over /version)", () => {
    const ctx = contextOn(
      { serverVersion: "v1.32" },
      { securityContext: { clusterVersion: "v1.29" } },
    );
    expect(clusterPolicyVersion(ctx)).toBe(29);
    expect(evaluated(latest, ctx).version).toBe(29);
  });

  it("the newest policy known, when the view does not know it (check, or /version unread)", () => {
    expect(clusterPolicyVersion(contextOn({}))).toBe("latest");
    expect(evaluated(latest, contextOn({})).version).toBe(37);
    // A garbled version from the view is not trusted either.
    expect(clusterPolicyVersion(contextOn({ serverVersion: "v2.0" }))).toBe("latest");
  });
});

describe("through the engine: a probe with a host (hostProbesAndHostLifecycle, from policy 1.34)", () => {
  const probePod = (): KubeObject => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "probe", namespace: "ml" },
    spec: {
      containers: [
        {
          name: "app",
          image: "ghcr.io/example/app:1.0",
          livenessProbe: { tcpSocket: { host: "10.0.0.1", port: 80 } },
        },
      ],
    },
  });
  const ns: KubeObject = {
    kind: "Namespace",
    metadata: { name: "ml", labels: { [ENFORCE]: "baseline" } },
  };
  const judged = async (cluster: ClusterView, settings: SettingsInput = {}) => {
    const r = await review(policies, probePod(), {
      settings: parseSettings(settings, "test"),
      cluster,
    });
    return r.violations.filter(v => v.capability === "security-context").map(v => v.rule);
  };

  it("admitted on a v1.32 API server, as its PSA admits it at baseline latest", async () => {
    expect(await judged(new SnapshotOfServer([ns], "v1.32"))).toEqual([]);
  });

  it("denied on a v1.34 API server, and offline (check: latest is v1.37)", async () => {
    expect(await judged(new SnapshotOfServer([ns], "v1.34"))).toEqual([
      "hostProbesAndHostLifecycle",
    ]);
    expect(await judged(new SnapshotCluster([ns]))).toEqual(["hostProbesAndHostLifecycle"]);
  });

  it("a pinned securityContext.clusterVersion decides over the API server's", async () => {
    const settings = { securityContext: { clusterVersion: "v1.34" } };
    expect(await judged(new SnapshotOfServer([ns], "v1.32"), settings)).toEqual([
      "hostProbesAndHostLifecycle",
    ]);
  });
});
