// The Pepr front door alone: Pepr's own request objects in, Pepr's answers out, with the engine
// behind (lib/pepr/adapter.ts). What it must add: nothing of its own but the translation.
import { randomUUID } from "node:crypto";
import { Capability, PeprMutateRequest, PeprValidateRequest } from "pepr";
import type { KubernetesObject } from "kubernetes-fluent-client";
import { HELLO_DENY_LABEL, HELLO_LABEL, helloPeprPolicy } from "../../../hello-pepr";
import { SnapshotCluster, type ClusterView } from "../../../lib/cluster/view";
import {
  bindAdmission,
  capabilityOf,
  configureAdmission,
  policiesOf,
} from "../../../lib/pepr/adapter";
import type { KubeObject } from "../../../lib/objects/pod";
import type { Policy } from "../../../lib/engine/policy";
import { asArea } from "../../support/policies";
import { defaultSettings } from "../../../lib/settings";

const NS = "pepr-demo";
const pod = (labels: Record<string, string> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p", namespace: NS, labels },
  spec: { containers: [{ name: "c", image: "nginx:1.25" }] },
});
const cluster = new SnapshotCluster([{ kind: "Namespace", metadata: { name: NS } }]);

/** The AdmissionRequest Pepr hands its request classes. */
function request(object: KubeObject, operation = "CREATE") {
  return {
    uid: randomUUID(),
    kind: { group: "", version: "v1", kind: "Pod" },
    resource: { group: "", version: "v1", resource: "pods" },
    name: "p",
    namespace: NS,
    operation,
    userInfo: { username: "admin" },
    object,
    dryRun: false,
  } as unknown as ConstructorParameters<typeof PeprMutateRequest<KubernetesObject>>[0];
}

const configure = (policies: Policy[], view: ClusterView = cluster) =>
  configureAdmission({ settings: defaultSettings(), cluster: view, policies });

// The module's shared capability, bound as capabilities/admission binds it; its actions answer
// with the policies configured.
const Admission = new Capability({ name: "admission", description: "test" });
bindAdmission(Admission, [helloPeprPolicy], defaultSettings().workloads);
const ofPods = (step: "mutate" | "validate") =>
  Admission.bindings.find(
    b => b.kind.kind === "Pod" && (step === "mutate" ? b.isMutate : b.isValidate),
  )!;
const mutatePod = (req: PeprMutateRequest<KubernetesObject>) =>
  ofPods("mutate").mutateCallback!(req);
const validate = (req: PeprValidateRequest<KubernetesObject>) =>
  ofPods("validate").validateCallback!(req) as Promise<{
    allowed: boolean;
    statusMessage?: string;
  }>;

describe("the admission actions", () => {
  beforeEach(() => configure([helloPeprPolicy]));

  it("mutatePod fixes Pepr's copy of the pod in place and leaves the trace", async () => {
    const req = new PeprMutateRequest(request(pod()));
    await mutatePod(req);
    expect(req.Raw.metadata?.labels?.[HELLO_LABEL]).toBe("true");
    expect(req.Raw.metadata?.annotations?.["admission-guard.dev/fixed"]).toBe("hello-pepr/greet");
  });

  it("validate approves with the warnings the engine gives", async () => {
    const fixed = new PeprMutateRequest(request(pod()));
    await mutatePod(fixed);
    const answer = await validate(new PeprValidateRequest(request(fixed.Raw as KubeObject)));
    expect(answer).toEqual({
      allowed: true,
      warnings: ["admission-guard/hello-pepr: fixed greet"],
    });
  });

  it("validate denies with the engine's message, in the one format", async () => {
    const answer = await validate(
      new PeprValidateRequest(request(pod({ [HELLO_DENY_LABEL]: "true" }))),
    );
    expect(answer.allowed).toBe(false);
    expect(answer.statusMessage).toBe(
      `admission-guard/hello-pepr: the pod carries ${HELLO_DENY_LABEL}=true, which asks to be refused. Fix: remove the label ${HELLO_DENY_LABEL} from metadata.labels; ` +
        "admission-guard: if the workload must run as it is, a platform admin (whoever may write Exemptions in namespace admission-guard-exemptions) can waive hello-pepr/no-deny-label for it with an Exemption (kubectl explain exemptions.spec)",
    );
  });

  it("a mutation that fails inside does not throw to Pepr (which would refuse without a word)", async () => {
    const broken = new SnapshotCluster([]);
    broken.namespace = () => {
      throw new Error("cache exploded");
    };
    configure([helloPeprPolicy], broken);
    const req = new PeprMutateRequest(request(pod()));
    await expect(mutatePod(req)).resolves.toBeUndefined();
    expect(req.Raw.metadata?.labels?.[HELLO_LABEL]).toBeUndefined();
  });

  it("says what went wrong when the engine itself fails, instead of Pepr's empty error", async () => {
    const broken = new SnapshotCluster([]);
    broken.namespace = () => {
      throw new Error("cache exploded");
    };
    configure([helloPeprPolicy], broken);
    const answer = await validate(new PeprValidateRequest(request(pod())));
    expect(answer.allowed).toBe(false);
    expect(answer.statusMessage).toBe(
      "admission-guard: internal error (cache exploded). Fix: report this bug; meanwhile label the namespace admission-guard.dev/mode=warn",
    );
  });
});

describe("the capabilities `check` reads", () => {
  it("lists each capability's policy in capability order, capabilities without one left out", () => {
    const p1 = asArea({ name: "first", description: "", rules: [] });
    const p2 = asArea({ name: "second", description: "", rules: [] });
    const second = capabilityOf(p2);
    const first = capabilityOf(p1);
    const shared = new Capability({ name: "shared", description: "" });
    expect(policiesOf([first, shared, second])).toEqual([p1, p2]);
    // A policy area's capability has no binding of its own: the shared admission runs it.
    expect(first.bindings).toEqual([]);
  });

  it("the shared Pod validation answers for every configured policy at once", async () => {
    const other: Policy = asArea({
      name: "other",
      description: "",
      rules: [],
      check: () => ({
        changes: [],
        violations: [{ rule: "always", message: "no", fix: "nothing" }],
        warnings: [],
      }),
    });
    configure([helloPeprPolicy, other]);
    const answer = await validate(
      new PeprValidateRequest(request(pod({ [HELLO_DENY_LABEL]: "true" }))),
    );
    expect(answer.statusMessage?.split("; ").map(m => m.split(":")[0])).toEqual([
      "admission-guard/hello-pepr",
      "admission-guard/other",
      // The way out, once for the action: an Exemption, and who grants it.
      "admission-guard",
    ]);
  });
});

describe("a binding of a whole API group (lib/engine/routes.ts bindingsOf)", () => {
  const apps = Admission.bindings.find(b => b.isValidate && b.kind.group === "apps")!;
  const inApps = (kind: string, labels: Record<string, string> = {}) =>
    new PeprValidateRequest({
      ...request({
        apiVersion: "apps/v1",
        kind,
        metadata: { name: "w", namespace: NS, labels },
        spec: { template: { metadata: { labels }, spec: pod().spec } },
      }),
      kind: { group: "apps", version: "v1", kind },
    } as unknown as ConstructorParameters<typeof PeprValidateRequest<KubernetesObject>>[0]);
  // A cluster view that fails whenever the engine asks it anything: judging means failing.
  const failing: ClusterView = Object.assign(
    new SnapshotCluster([{ kind: "Namespace", metadata: { name: NS } }]),
    {
      settle: async () => {
        throw new Error("the engine was asked");
      },
    },
  );

  it("is one binding, kind-less, of every kind the module declares in the group", () => {
    expect(apps.kind).toEqual({ group: "apps", version: "", kind: "", plural: "*" });
    expect(Admission.bindings.filter(b => b.isValidate && b.kind.group === "apps")).toHaveLength(1);
  });

  it("passes over a kind of the group the module does not declare, without judging it", async () => {
    configure([helloPeprPolicy], failing);
    expect(await apps.validateCallback!(inApps("ControllerRevision"))).toEqual({
      allowed: true,
      warnings: undefined,
    });
    // A declared kind of the group is judged (and the failing view shows it was).
    const judged = await apps.validateCallback!(inApps("Deployment"));
    expect(judged).toMatchObject({ allowed: false, statusCode: 500 });
    expect((judged as { statusMessage: string }).statusMessage).toContain("the engine was asked");
  });

  it("judges a declared kind as a binding of its own would", async () => {
    configure([helloPeprPolicy]);
    const denied = await apps.validateCallback!(
      inApps("Deployment", { [HELLO_DENY_LABEL]: "true" }),
    );
    expect(denied).toMatchObject({ allowed: false, statusCode: 403 });
    expect(await apps.validateCallback!(inApps("Deployment"))).toMatchObject({ allowed: true });
  });
});
