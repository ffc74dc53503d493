// The dedicated ServiceAccount over its life, through the real built controller against the
// stand-in, with the API server's ServiceAccount admission modelled (`admit(..., { api })`: a pod
// whose account does not exist after the mutating webhook is refused with the API server's own
// message). An account deleted by an admin is created again by the next pod; a dry run creates
// nothing and never gets that refusal; pods admitted at once share one create.
import type { KubeObject } from "../../lib/objects/pod";
import { admit, serviceAccountNotFound, type AdmitResult } from "../support/admission";
import { useEnvironment } from "../support/environment";
import { eventually } from "../support/wait";

const NS = "team-b";
const env = useEnvironment();

const pod = (name: string): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: NS },
  spec: { containers: [{ name: "main", image: "busybox:1.36", command: ["sleep", "3600"] }] },
});
const accountOf = (r: AdmitResult) =>
  (r.patched.spec as { serviceAccountName?: string }).serviceAccountName;
const workload = () => env.api.get("ServiceAccount", "workload", NS);
/** Server-side applies of team-b/workload the controller sent (how the module creates it). */
const creates = () =>
  env.api.requests.filter(
    r =>
      r.method === "PATCH" &&
      r.path.startsWith(`/api/v1/namespaces/${NS}/serviceaccounts/workload`),
  ).length;

const DRY_RUN_NOTE = `admission-guard/service-account: dry run: Pod ${NS}/dry would be moved off ServiceAccount "default" to ServiceAccount ${NS}/workload, which does not exist yet and would be created by the real request`;

/** Deletes the account as an admin would, and waits until the controller's watch has seen it go. */
async function deleteAccount(): Promise<void> {
  expect(env.api.remove("ServiceAccount", "workload", NS)).toBe(true);
  // The dry-run answer tells whether the controller knows the account is gone (it says so only then).
  await eventually(async () => {
    const r = await admit(env.controller, pod("dry"), { api: env.api, dryRun: true });
    expect(r.warnings).toContain(DRY_RUN_NOTE);
  });
}

beforeAll(async () => {
  env.api.put({ apiVersion: "v1", kind: "Namespace", metadata: { name: NS } });
  env.api.put({
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: { name: "default", namespace: NS },
  });
  // A namespace that just appeared gets its account at once.
  await eventually(() => expect(workload()).toBeDefined());
});

describe("the dedicated ServiceAccount, deleted and needed again", () => {
  it("a pod of a namespace with the account is moved to it", async () => {
    const r = await admit(env.controller, pod("first"), { api: env.api });
    expect(r.message).toBe("");
    expect(r.allowed).toBe(true);
    expect(accountOf(r)).toBe("workload");
  });

  it("without the module's fix, the API server would refuse the moved pod: the model is real", async () => {
    // What the stand-in's ServiceAccount admission says of a pod on an account that is missing.
    const ghost = {
      ...pod("ghost"),
      spec: { ...(pod("ghost").spec as object), serviceAccountName: "ghost" },
    };
    const r = await admit(env.controller, ghost, { api: env.api });
    expect(r.allowed).toBe(false);
    expect(r.message).toBe(serviceAccountNotFound("ghost", NS, "ghost"));
  });

  it("a dry run after the account was deleted: admitted on its own account, told what the real request would do, nothing created", async () => {
    await deleteAccount();
    const before = creates();
    const r = await admit(env.controller, pod("dry"), { api: env.api, dryRun: true });
    expect(r.allowed).toBe(true);
    expect(accountOf(r)).toBe("default");
    expect(r.warnings).toContain(DRY_RUN_NOTE);
    expect(creates()).toBe(before);
    expect(workload()).toBeUndefined();
  });

  it("the next real pod creates the account again before it is moved there", async () => {
    const r = await admit(env.controller, pod("after-delete"), { api: env.api });
    expect(r.message).toBe("");
    expect(r.allowed).toBe(true);
    expect(accountOf(r)).toBe("workload");
    expect(workload()?.metadata?.labels).toEqual({
      "app.kubernetes.io/managed-by": "admission-guard",
    });
  });

  it("two pods created at once while it is missing: both admitted, on the same account, with one create", async () => {
    await deleteAccount();
    const before = creates();
    const [a, b] = await Promise.all([
      admit(env.controller, pod("racer-a"), { api: env.api }),
      admit(env.controller, pod("racer-b"), { api: env.api }),
    ]);
    expect([a.message, b.message]).toEqual(["", ""]);
    expect([a.allowed, b.allowed]).toEqual([true, true]);
    expect([accountOf(a), accountOf(b)]).toEqual(["workload", "workload"]);
    expect(creates() - before).toBe(1);
  });
});
