import { answerSubjectAccessReview } from "../../support/authorization";
import {
  evaluateSecretAccess,
  RbacIndex,
  serviceAccountUser,
  type AccessRequest,
} from "../../../lib/cluster/rbac";
import { SnapshotCluster } from "../../../lib/cluster/view";
import type { KubeObject } from "../../../lib/objects/pod";

const role = (ns: string, name: string, rules: object[]): KubeObject => ({
  kind: "Role",
  metadata: { namespace: ns, name },
  rules,
});
const clusterRole = (name: string, rules: object[]): KubeObject => ({
  kind: "ClusterRole",
  metadata: { name },
  rules,
});
const roleBinding = (
  ns: string,
  name: string,
  roleRef: { kind: string; name: string },
  subjects: object[],
): KubeObject => ({
  kind: "RoleBinding",
  metadata: { namespace: ns, name },
  roleRef: { apiGroup: "rbac.authorization.k8s.io", ...roleRef },
  subjects,
});
const clusterRoleBinding = (name: string, roleName: string, subjects: object[]): KubeObject => ({
  kind: "ClusterRoleBinding",
  metadata: { name },
  roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: roleName },
  subjects,
});
const getSecret = { verbs: ["get"], apiGroups: [""], resources: ["secrets"] };
const sa = (ns: string, name: string) => ({ kind: "ServiceAccount", name, namespace: ns });

const getSecretReq = (ns: string, saName: string, name: string): AccessRequest => ({
  ...serviceAccountUser(ns, saName),
  namespace: ns,
  verb: "get",
  group: "",
  resource: "secrets",
  name,
});

const allowed = (objects: KubeObject[], ns: string, saName: string, secret: string) =>
  new RbacIndex(objects).decide(getSecretReq(ns, saName, secret)).allowed;

describe("RBAC evaluation", () => {
  it("a RoleBinding of a Role grants the ServiceAccount in that namespace only", () => {
    const objects = [
      role("ml", "r", [getSecret]),
      roleBinding("ml", "rb", { kind: "Role", name: "r" }, [sa("ml", "workload")]),
    ];
    expect(allowed(objects, "ml", "workload", "s")).toBe(true);
    expect(allowed(objects, "other", "workload", "s")).toBe(false);
    expect(allowed(objects, "ml", "default", "s")).toBe(false);
  });

  it("the ServiceAccount subject's namespace matters; without one it means the binding's namespace", () => {
    const other = [
      role("ml", "r", [getSecret]),
      roleBinding("ml", "rb", { kind: "Role", name: "r" }, [sa("other", "workload")]),
    ];
    expect(allowed(other, "ml", "workload", "s")).toBe(false);
    const noNs = [
      role("ml", "r", [getSecret]),
      roleBinding("ml", "rb", { kind: "Role", name: "r" }, [
        { kind: "ServiceAccount", name: "workload" },
      ]),
    ];
    expect(allowed(noNs, "ml", "workload", "s")).toBe(true);
  });

  it("a Role of another namespace is not used by a RoleBinding", () => {
    const objects = [
      role("other", "r", [getSecret]),
      roleBinding("ml", "rb", { kind: "Role", name: "r" }, [sa("ml", "workload")]),
    ];
    expect(allowed(objects, "ml", "workload", "s")).toBe(false);
  });

  it("a RoleBinding of a ClusterRole grants in its namespace only; a ClusterRoleBinding everywhere", () => {
    const viaRb = [
      clusterRole("secret-reader", [getSecret]),
      roleBinding("ml", "rb", { kind: "ClusterRole", name: "secret-reader" }, [
        sa("ml", "workload"),
      ]),
    ];
    expect(allowed(viaRb, "ml", "workload", "s")).toBe(true);
    const viaCrb = [
      clusterRole("secret-reader", [getSecret]),
      clusterRoleBinding("crb", "secret-reader", [sa("ml", "workload")]),
    ];
    // The ServiceAccount ml/workload reading a secret in namespace "other".
    const elsewhere = { ...getSecretReq("ml", "workload", "s"), namespace: "other" };
    expect(new RbacIndex(viaCrb).decide(elsewhere).allowed).toBe(true);
    expect(new RbacIndex(viaRb).decide(elsewhere).allowed).toBe(false);
  });

  it("resourceNames restrict to the named secrets", () => {
    const objects = [
      role("ml", "r", [{ ...getSecret, resourceNames: ["a", "b"] }]),
      roleBinding("ml", "rb", { kind: "Role", name: "r" }, [sa("ml", "workload")]),
    ];
    expect(allowed(objects, "ml", "workload", "a")).toBe(true);
    expect(allowed(objects, "ml", "workload", "c")).toBe(false);
    // A list (no name) is not granted by a rule with resourceNames.
    const index = new RbacIndex(objects);
    expect(index.decide({ ...getSecretReq("ml", "workload", ""), verb: "get" }).allowed).toBe(
      false,
    );
  });

  it('resourceNames [""] matches only requests without a name, as the API server compares them', () => {
    const objects = [
      role("ml", "r", [{ ...getSecret, verbs: ["get", "list"], resourceNames: [""] }]),
      roleBinding("ml", "rb", { kind: "Role", name: "r" }, [sa("ml", "workload")]),
    ];
    const index = new RbacIndex(objects);
    expect(index.decide({ ...getSecretReq("ml", "workload", ""), verb: "list" }).allowed).toBe(
      true,
    );
    expect(allowed(objects, "ml", "workload", "a")).toBe(false);
  });

  it("verbs, apiGroups and resources must all match; * is a wildcard for each", () => {
    const bind = (rules: object[]) => [
      role("ml", "r", rules),
      roleBinding("ml", "rb", { kind: "Role", name: "r" }, [sa("ml", "workload")]),
    ];
    expect(allowed(bind([{ ...getSecret, verbs: ["list"] }]), "ml", "workload", "s")).toBe(false);
    expect(allowed(bind([{ ...getSecret, apiGroups: ["apps"] }]), "ml", "workload", "s")).toBe(
      false,
    );
    expect(
      allowed(bind([{ ...getSecret, resources: ["configmaps"] }]), "ml", "workload", "s"),
    ).toBe(false);
    expect(
      allowed(bind([{ verbs: ["*"], apiGroups: ["*"], resources: ["*"] }]), "ml", "workload", "s"),
    ).toBe(true);
    // A subresource rule does not grant the resource itself.
    expect(
      allowed(bind([{ ...getSecret, resources: ["secrets/status"] }]), "ml", "workload", "s"),
    ).toBe(false);
  });

  it("matches subresources: exact, and */sub", () => {
    const objects = [
      role("ml", "r", [{ verbs: ["get"], apiGroups: [""], resources: ["*/log"] }]),
      roleBinding("ml", "rb", { kind: "Role", name: "r" }, [sa("ml", "workload")]),
    ];
    const req = { ...getSecretReq("ml", "workload", "p"), resource: "pods", subresource: "log" };
    expect(new RbacIndex(objects).decide(req).allowed).toBe(true);
    expect(new RbacIndex(objects).decide({ ...req, subresource: "exec" }).allowed).toBe(false);
  });

  it("group subjects: all ServiceAccounts, those of a namespace, all authenticated", () => {
    for (const group of [
      "system:serviceaccounts",
      "system:serviceaccounts:ml",
      "system:authenticated",
    ]) {
      const objects = [
        clusterRole("secret-reader", [getSecret]),
        roleBinding("ml", "rb", { kind: "ClusterRole", name: "secret-reader" }, [
          { kind: "Group", name: group, apiGroup: "rbac.authorization.k8s.io" },
        ]),
      ];
      expect(allowed(objects, "ml", "workload", "s")).toBe(true);
    }
    const otherNs = [
      clusterRole("secret-reader", [getSecret]),
      clusterRoleBinding("crb", "secret-reader", [
        { kind: "Group", name: "system:serviceaccounts:other" },
      ]),
    ];
    expect(allowed(otherNs, "ml", "workload", "s")).toBe(false);
  });

  it("a User subject naming the ServiceAccount's username", () => {
    const objects = [
      clusterRole("secret-reader", [getSecret]),
      clusterRoleBinding("crb", "secret-reader", [
        { kind: "User", name: "system:serviceaccount:ml:workload" },
      ]),
    ];
    expect(allowed(objects, "ml", "workload", "s")).toBe(true);
    expect(allowed(objects, "ml", "other", "s")).toBe(false);
  });

  it("a missing role, a ClusterRoleBinding of a Role and malformed objects grant nothing and do not throw", () => {
    const objects: unknown[] = [
      roleBinding("ml", "rb", { kind: "Role", name: "missing" }, [sa("ml", "workload")]),
      {
        kind: "ClusterRoleBinding",
        metadata: { name: "x" },
        roleRef: { kind: "Role", name: "r" },
        subjects: [sa("ml", "workload")],
      },
      role("ml", "r", [getSecret]),
      { kind: "Role", metadata: { namespace: "ml", name: "bad" }, rules: "nope" },
      { kind: "RoleBinding", metadata: { namespace: "ml" }, subjects: [null, 3, {}] },
      null,
      "string",
      { kind: 7 },
    ];
    expect(new RbacIndex(objects).decide(getSecretReq("ml", "workload", "s")).allowed).toBe(false);
  });

  it("evaluateSecretAccess answers per secret, and undefined without RBAC objects", () => {
    const objects = [
      role("ml", "r", [{ ...getSecret, resourceNames: ["a"] }]),
      roleBinding("ml", "rb", { kind: "Role", name: "r" }, [sa("ml", "workload")]),
    ];
    const access = evaluateSecretAccess(objects, "ml", "workload", ["a", "b"]);
    expect(access && Object.fromEntries(access.allowed)).toEqual({ a: true, b: false });
    expect(
      evaluateSecretAccess([{ kind: "ServiceAccount", metadata: { name: "w" } }], "ml", "w", ["a"]),
    ).toBeUndefined();
  });

  it("SnapshotCluster answers secret access with this evaluator by default", async () => {
    const cluster = new SnapshotCluster([
      role("ml", "r", [getSecret]),
      roleBinding("ml", "rb", { kind: "Role", name: "r" }, [sa("ml", "workload")]),
    ]);
    const access = await cluster.secretAccess("ml", "workload", ["x"]);
    expect(access?.allowed.get("x")).toBe(true);
    expect(await new SnapshotCluster([]).secretAccess("ml", "workload", ["x"])).toBeUndefined();
  });

  it("answers a SubjectAccessReview body as the API server would", () => {
    const objects = [
      role("ml", "r", [getSecret]),
      roleBinding("ml", "rb", { kind: "Role", name: "r" }, [sa("ml", "workload")]),
    ];
    const review = {
      apiVersion: "authorization.k8s.io/v1",
      kind: "SubjectAccessReview",
      spec: {
        user: "system:serviceaccount:ml:workload",
        groups: ["system:serviceaccounts"],
        resourceAttributes: { namespace: "ml", verb: "get", resource: "secrets", name: "s" },
      },
    };
    const yes = answerSubjectAccessReview(objects, review);
    expect(yes.status.allowed).toBe(true);
    expect(yes.status.reason).toMatch(/RoleBinding "rb"/);
    expect(yes.spec).toEqual(review.spec);
    const no = answerSubjectAccessReview(objects, {
      ...review,
      spec: { ...review.spec, user: "system:serviceaccount:ml:default" },
    });
    expect(no.status.allowed).toBe(false);
    expect(answerSubjectAccessReview(objects, "garbage").status.allowed).toBe(false);
    expect(answerSubjectAccessReview(objects, { spec: { user: "u" } }).status.allowed).toBe(false);
  });
});
