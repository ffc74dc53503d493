// The Exemptions namespace as the running module sees it: the log and /metrics say once when it is
// not the install's own, and `pepr dev` creates it labelled but never labels one that exists.
import { LiveCluster } from "../../../lib/cluster/live";
import {
  createExemptionsNamespace,
  type NamespaceClient,
} from "../../../lib/cluster/exemptions-namespace";
import { exemptionsNamespaceOwnership, observeExemptionsNamespace } from "../../../lib/metrics";
import type { KubeObject } from "../../../lib/objects/pod";
import { OWNED_BY_LABEL as OWNED_BY } from "../../../lib/settings";
import cfg from "../../../package.json";
import { valueOf } from "../metrics/support";

// The module's own uuid, as the controller is started with it (lib/pepr/module-start.ts).
const { uuid: UUID } = cfg.pepr;
const NS = "admission-guard-exemptions";
const namespace = (labels: Record<string, string> = {}, name = NS) =>
  ({ apiVersion: "v1", kind: "Namespace", metadata: { name, labels } }) as never;

const recordingLog = () => {
  const lines: { level: string; message: string }[] = [];
  return {
    lines,
    info: (_: object, message: string) => void lines.push({ level: "info", message }),
    warn: (_: object, message: string) => void lines.push({ level: "warn", message }),
  };
};

describe("the controller says when its Exemptions namespace is not the install's own", () => {
  const listed = (live: LiveCluster) => {
    live.namespaces.synced = true;
    for (const listener of live.namespaces.listListeners) listener();
  };

  it("warns once per change, with the label, its value and the admin's command; not per event", async () => {
    const log = recordingLog();
    const live = new LiveCluster(log, { exemptionsNamespace: NS, exemptionsOwner: UUID });
    live.namespaces.apply(namespace({}), "ADDED");
    expect(live.exemptionsNamespaceState()).toBeUndefined(); // not listed yet: not judged
    listed(live);
    expect(live.exemptionsNamespaceState()).toBe("not-owned");
    // Other namespaces, and the same state again (a relist, an unrelated label), say nothing more.
    live.namespaces.apply(namespace({}, "team-a"), "ADDED");
    live.namespaces.apply(namespace({ team: "platform" }), "MODIFIED");
    listed(live);
    expect(log.lines).toEqual([
      {
        level: "warn",
        message: expect.stringContaining(
          `exemptions: namespace ${NS} lacks the label ${OWNED_BY}=${UUID}`,
        ),
      },
    ]);
    expect(log.lines[0].message).toContain("and new ones there are refused");
    expect(log.lines[0].message).toContain(`kubectl get rolebindings,roles -n ${NS}`);
    expect(log.lines[0].message).toContain(`kubectl label namespace ${NS} ${OWNED_BY}=${UUID}`);

    live.namespaces.apply(namespace({ [OWNED_BY]: UUID }), "MODIFIED");
    expect(log.lines[1]).toEqual({
      level: "info",
      message: `exemptions: namespace ${NS} is the install's own: its Exemptions count`,
    });
    live.namespaces.apply(namespace({ [OWNED_BY]: UUID }), "DELETED");
    expect(log.lines[2].level).toBe("warn");
    expect(log.lines[2].message).toContain(
      `namespace ${NS} does not exist, so no Exemption counts`,
    );
    expect(log.lines).toHaveLength(3);
  });

  it("admission_guard_exemptions_namespace{state}: owned, not-owned or absent; none before the list", async () => {
    const live = new LiveCluster(undefined, { exemptionsNamespace: NS, exemptionsOwner: UUID });
    observeExemptionsNamespace(() => live.exemptionsNamespaceState());
    const states = async () => ({
      owned: await valueOf(exemptionsNamespaceOwnership, { state: "owned" }),
      "not-owned": await valueOf(exemptionsNamespaceOwnership, { state: "not-owned" }),
      absent: await valueOf(exemptionsNamespaceOwnership, { state: "absent" }),
    });
    const none = { owned: undefined, "not-owned": undefined, absent: undefined };
    expect(await states()).toEqual(none);
    listed(live);
    expect(await states()).toEqual({ ...none, absent: 1 });
    live.namespaces.apply(namespace({ [OWNED_BY]: UUID }), "ADDED");
    expect(await states()).toEqual({ ...none, owned: 1 });
    live.namespaces.apply(namespace({ [OWNED_BY]: "another-uuid" }), "MODIFIED");
    expect(await states()).toEqual({ ...none, "not-owned": 1 });
  });
});

describe("pepr dev creates the Exemptions namespace, and never labels one that exists", () => {
  /** A fake API: namespaces by name; create fails with 409 as the API server does. */
  const fakeApi = (existing: KubeObject[] = []) => {
    const stored = new Map(existing.map(ns => [ns.metadata!.name!, structuredClone(ns)]));
    const calls: string[] = [];
    const client: NamespaceClient = {
      async create(ns) {
        calls.push(`create ${ns.metadata?.name}`);
        if (stored.has(ns.metadata!.name!))
          throw { status: 409, statusText: "Conflict", data: { reason: "AlreadyExists" } };
        stored.set(ns.metadata!.name!, structuredClone(ns));
      },
      async get(name) {
        calls.push(`get ${name}`);
        const ns = stored.get(name);
        if (!ns) throw { status: 404, statusText: "Not Found" };
        return ns;
      },
    };
    return { stored, calls, client };
  };

  it("absent: created, labelled as the install's own", async () => {
    const api = fakeApi();
    const log = recordingLog();
    expect(await createExemptionsNamespace(NS, UUID, log, api.client)).toBe("created");
    expect(api.stored.get(NS)?.metadata?.labels).toEqual({
      "app.kubernetes.io/managed-by": "admission-guard",
      [OWNED_BY]: UUID,
    });
  });

  it("created first by a tenant: left as it is (no label), and the log says what an admin runs", async () => {
    const squatted = namespace({ team: "a" }) as KubeObject;
    const api = fakeApi([squatted]);
    const log = recordingLog();
    expect(await createExemptionsNamespace(NS, UUID, log, api.client)).toBe("exists-not-owned");
    expect(api.stored.get(NS)).toEqual(squatted);
    expect(api.calls).toEqual([`create ${NS}`, `get ${NS}`]); // no update, no patch
    expect(log.lines).toHaveLength(1);
    expect(log.lines[0].level).toBe("warn");
    expect(log.lines[0].message).toContain("The module never labels a namespace it did not create");
    expect(log.lines[0].message).toContain(`kubectl get rolebindings,roles -n ${NS}`);
    expect(log.lines[0].message).toContain(`kubectl label namespace ${NS} ${OWNED_BY}=${UUID}`);
  });

  it("already the install's own (an earlier pepr dev): nothing to say", async () => {
    const api = fakeApi([namespace({ [OWNED_BY]: UUID })]);
    const log = recordingLog();
    expect(await createExemptionsNamespace(NS, UUID, log, api.client)).toBe("exists-owned");
    expect(log.lines).toEqual([]);
  });

  it("a create the API server refuses otherwise (RBAC): failed, said, nothing read", async () => {
    const log = recordingLog();
    const client: NamespaceClient = {
      create: async () => {
        throw {
          status: 403,
          statusText: "Forbidden",
          data: { message: "cannot create namespaces" },
        };
      },
      get: async () => {
        throw new Error("not called");
      },
    };
    expect(await createExemptionsNamespace(NS, UUID, log, client)).toBe("failed");
    expect(log.lines[0].message).toContain(`could not create namespace ${NS}`);
  });
});
