// A gang against ResourceQuotas (capabilities/resource-quota/gang.ts), rule by rule: totals over
// roles, scopes per role, the fixes offered, updates, Kueue.
import type { V1PodSpec, V1ResourceQuota } from "@kubernetes/client-node";
import { checkGangQuotas, type GangRole } from "../../../capabilities/resource-quota/gang";
import {
  isBestEffort,
  limitRangeDefaults,
  podResources,
} from "../../../capabilities/resource-quota/resources";

function role(
  name: string,
  pods: number,
  limits: Record<string, string>,
  extra: Partial<V1PodSpec> = {},
): GangRole {
  const spec = {
    containers: [{ name: "c", image: "i", resources: { limits } }],
    ...extra,
  } as V1PodSpec;
  const pod = podResources(
    { metadata: {}, spec, path: `spec.roles.${name}.template` },
    limitRangeDefaults(undefined),
  );
  return {
    name,
    spec,
    pod,
    bestEffort: isBestEffort(pod, spec),
    pods,
    field: `spec.roles.${name}.replicas`,
  };
}
const quota = (
  hard: Record<string, string>,
  used: Record<string, string> = {},
  scopes?: string[],
): V1ResourceQuota => ({
  metadata: { name: "q" },
  spec: { hard, ...(scopes ? { scopes } : {}) },
  status: { hard, used },
});
const demand = (roles: GangRole[], more = {}) => ({
  subject: "TrainingRun ml/r",
  namespace: "ml",
  roles,
  ...more,
});

test("the totals of every role; the largest role lowered to what fits every resource short", () => {
  const roles = [
    role("head", 1, { cpu: "4", "nvidia.com/gpu": "0" }),
    role("worker", 8, { cpu: "8", "nvidia.com/gpu": "4" }),
  ];
  const { violations } = checkGangQuotas(
    [quota({ "requests.cpu": "40", "requests.nvidia.com/gpu": "24" })],
    demand(roles),
  );
  expect(violations).toHaveLength(1);
  const [v] = violations;
  expect(v.message).toContain("requests.cpu: its pods ask 68 at once (head: 1 × 4, worker: 8 × 8)");
  expect(v.message).toContain("requests.nvidia.com/gpu: its pods ask 32 at once (worker: 8 × 4)");
  // cpu: (40 - 4) / 8 = 4 workers; gpu: 24 / 4 = 6: the fewest, 4.
  expect(v.fix).toContain("lower spec.roles.worker.replicas from 8 to at most 4");
  expect(v.fix).toContain("lower each role's requests.cpu, requests.nvidia.com/gpu");
  expect(v.fix).toContain(`"hard":{"requests.cpu":"68","requests.nvidia.com/gpu":"32"}`);
});

test("no lowering of the largest role when it does not ask for what is short; a pod count quota asks for no lower request", () => {
  const roles = [role("ps", 2, { memory: "64Gi" }), role("worker", 8, { cpu: "1", memory: "1Gi" })];
  const { violations } = checkGangQuotas(
    [quota({ "requests.memory": "100Gi", pods: "5" })],
    demand(roles),
  );
  const [v] = violations;
  expect(v.message).toContain("pods: its pods ask 10 at once");
  expect(v.fix).not.toMatch(/lower spec\.roles\.worker\.replicas/);
  expect(v.fix).not.toContain("requests.pods");
  expect(v.fix).toContain("lower each role's requests.memory");
});

test("only the roles whose pods a quota's scopes match count against it", () => {
  const roles = [
    role("train", 4, { cpu: "2" }, { activeDeadlineSeconds: 3600 }),
    role("serve", 4, { cpu: "2" }),
  ];
  const terminating = checkGangQuotas([quota({ cpu: "6" }, {}, ["Terminating"])], demand(roles));
  expect(terminating.violations[0].message).toContain("(train: 4 × 2)");
  expect(terminating.violations[0].message).not.toContain("serve");
});

test("an update is judged on what it adds; one that adds nothing is not refused", () => {
  const before = [role("worker", 4, { cpu: "2" })];
  const full = quota({ cpu: "8" }, { cpu: "8" });
  expect(
    checkGangQuotas([full], demand([role("worker", 4, { cpu: "2" })], { old: before })).violations,
  ).toEqual([]);
  expect(
    checkGangQuotas([full], demand([role("worker", 2, { cpu: "2" })], { old: before })).violations,
  ).toEqual([]);
  const [v] = checkGangQuotas(
    [full],
    demand([role("worker", 5, { cpu: "2" })], { old: before }),
  ).violations;
  expect(v.message).toContain("the update adds 2");
  expect(v.fix).toContain("lower spec.roles.worker.replicas from 5 to at most 4");
});

test("queued by Kueue: the same finding as a warning, and no advice to queue it", () => {
  const [v] = checkGangQuotas(
    [quota({ cpu: "1" })],
    demand([role("w", 2, { cpu: "1" })], { queued: "it is queued by Kueue (q)" }),
  ).violations;
  expect(v.severity).toBe("warn");
  expect(v.message).toContain(
    "it is queued by Kueue (q): Kueue starts it when its ClusterQueue has room",
  );
  expect(v.fix).not.toContain("queue it with Kueue");
});

test("a container that does not set what the quota tracks is named with its role", () => {
  const roles = [role("w", 2, {}), role("ok", 1, { cpu: "1", memory: "1Gi" })];
  const { violations } = checkGangQuotas([quota({ "requests.cpu": "10" })], demand(roles));
  expect(violations.map(v => v.rule)).toEqual(["quota-must-specify"]);
  expect(violations[0].message).toMatch(/^TrainingRun ml\/r \(role w\): container "c"/);
});

test("a role that makes no pods is not asked to specify what the quota tracks, and asks nothing", () => {
  const roles = [role("idle", 0, {}), role("w", 1, { cpu: "1" })];
  expect(checkGangQuotas([quota({ "requests.cpu": "1" })], demand(roles)).violations).toEqual([]);
});

test("an exact fit is no violation; one unit more is", () => {
  const fits = checkGangQuotas(
    [quota({ cpu: "4" }, { cpu: "2" })],
    demand([role("w", 2, { cpu: "1" })]),
  );
  expect(fits.violations).toEqual([]);
  const over = checkGangQuotas(
    [quota({ cpu: "4" }, { cpu: "3" })],
    demand([role("w", 2, { cpu: "1" })]),
  );
  expect(over.violations[0].message).toContain("quota q has 1 of 4 left (3 used)");
});

test("growth to atMost: a warning only when it would not fit, naming what it can grow to", () => {
  const grows = (atMost: number, hard: string) =>
    checkGangQuotas([quota({ cpu: hard })], demand([{ ...role("g", 2, { cpu: "1" }), atMost }]))
      .warnings;
  expect(grows(4, "4")).toEqual([]); // grows to exactly the quota
  expect(grows(5, "4")).toEqual([
    expect.stringContaining(
      "TrainingRun ml/r can outgrow quota q when it scales: cpu up to 5 at maxReplicas, 4 left",
    ),
  ]);
  expect(grows(2, "1").join()).not.toContain("outgrow"); // atMost no more than now: the denial says it
});

test("in a quota already over-used (lowered below its usage), an update that adds nothing is not refused", () => {
  const before = [role("worker", 4, { cpu: "2" })];
  const overUsed = quota({ cpu: "6" }, { cpu: "8" });
  expect(
    checkGangQuotas([overUsed], demand([role("worker", 4, { cpu: "2" })], { old: before }))
      .violations,
  ).toEqual([]);
  const [v] = checkGangQuotas(
    [overUsed],
    demand([role("worker", 5, { cpu: "2" })], { old: before }),
  ).violations;
  expect(v.message).toContain("quota q has 0 of 6 left (8 used)");
});
