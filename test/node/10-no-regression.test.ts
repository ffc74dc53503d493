// The no-regression table: for every image shape ML teams run, what a training probe pod does on a
// real node — first with Kubernetes alone, then with the module — in a namespace without policy
// and in one enforcing Pod Security "restricted". The rule it proves: a pod that Succeeds in a
// restricted namespace with only the fields Pod Security asks for must still Succeed after the
// module. Where it does not today, the test says so in its name and is a `test.failing`.
import { applyObjects, connect, namespace, useModule } from "../cluster/support/cluster";
import { SHAPES, SHAPE_USERS, type Shape } from "./support/shapes";
import { describeOutcome, probePod, runPods, table, type Outcome } from "./support/workloads";

const cluster = connect();
const guard = useModule(cluster);

const OPEN = "node-open";
const RESTRICTED = "node-restricted";

type Column = "open" | "minimal" | "bare" | "open+module" | "minimal+module" | "bare+module";
const COLUMNS: Record<Column, string> = {
  open: "no policy, as built",
  minimal: "restricted, PSA's fields only",
  bare: "restricted, no securityContext",
  "open+module": "no policy, as built, with module",
  "minimal+module": "restricted, PSA's fields only, with module",
  "bare+module": "restricted, no securityContext, with module",
};
const outcomes = new Map<string, Outcome>();
const key = (shape: Shape, column: Column) => `${shape}/${column}`;
const outcome = (shape: Shape, column: Column) => outcomes.get(key(shape, column))!;

function podsFor(columns: Column[]) {
  return SHAPES.flatMap(shape =>
    columns.map(column => ({
      key: key(shape, column),
      pod: probePod({
        name: `${shape}-${column.replace("+", "-")}`,
        namespace: column.startsWith("open") ? OPEN : RESTRICTED,
        shape,
        securityContext: column.startsWith("minimal") ? "minimal" : "none",
      }),
    })),
  );
}

async function run(columns: Column[]) {
  const planned = podsFor(columns);
  const results = await runPods(
    cluster,
    planned.map(p => p.pod),
  );
  for (const { key: k, pod } of planned) outcomes.set(k, results.get(pod.metadata!.name!)!);
}

beforeAll(async () => {
  await applyObjects(cluster, [
    namespace(OPEN),
    namespace(RESTRICTED, { "pod-security.kubernetes.io/enforce": "restricted" }),
  ]);
});

afterAll(() => {
  const rows = SHAPES.map(shape => [
    shape,
    SHAPE_USERS[shape],
    ...(Object.keys(COLUMNS) as Column[]).map(c =>
      outcomes.has(key(shape, c)) ? describeOutcome(outcome(shape, c)) : "-",
    ),
  ]);
  process.stdout.write(
    `\nThe no-regression table (a training probe per image shape, on the real node):\n\n${table(
      ["shape", "image user", ...Object.values(COLUMNS)],
      rows,
    )}\n\n`,
  );
});

describe("Kubernetes alone", () => {
  beforeAll(() => run(["open", "minimal", "bare"]));

  test("every image shape runs as built where no policy applies", () => {
    for (const shape of SHAPES)
      expect([shape, outcome(shape, "open")]).toEqual([shape, { kind: "Succeeded" }]);
  });

  test("restricted with only Pod Security's fields: numeric non-root images run, root and named users are stopped by the kubelet", () => {
    expect(outcome("nonroot-numeric", "minimal")).toEqual({ kind: "Succeeded" });
    expect(outcome("user-1000", "minimal")).toEqual({ kind: "Succeeded" });
    expect(outcome("root-built", "minimal")).toMatchObject({
      kind: "NotStarted",
      reason: "CreateContainerConfigError",
      message: expect.stringContaining("runAsNonRoot and image will run as root"),
    });
    expect(outcome("nonroot-named", "minimal")).toMatchObject({
      kind: "NotStarted",
      reason: "CreateContainerConfigError",
      message: expect.stringContaining("non-numeric user (ml)"),
    });
  });

  test("restricted without a securityContext: Pod Security refuses every pod", () => {
    for (const shape of SHAPES)
      expect(outcome(shape, "bare")).toMatchObject({
        kind: "Denied",
        message: expect.stringContaining('violates PodSecurity "restricted:latest"'),
      });
  });
});

describe("with admission-guard", () => {
  beforeAll(async () => {
    await guard.install();
    await run(["open+module", "minimal+module", "bare+module"]);
  }, 180_000);

  test("restricted without a securityContext: every pod is fixed and admitted", () => {
    for (const shape of SHAPES)
      expect([shape, outcome(shape, "bare+module").kind]).not.toEqual([shape, "Denied"]);
  });

  test.failing(
    "no regression (fails today: the forced runAsUser 1000/runAsGroup 3000 and read-only root take its HOME and WORKDIR away): nonroot-numeric with only Pod Security's fields still Succeeds",
    () => {
      expect(outcome("nonroot-numeric", "minimal+module")).toEqual({ kind: "Succeeded" });
    },
  );

  test.failing(
    "no regression (fails today: the read-only root takes its HOME and WORKDIR away): user-1000 with only Pod Security's fields still Succeeds",
    () => {
      expect(outcome("user-1000", "minimal+module")).toEqual({ kind: "Succeeded" });
    },
  );

  test.failing(
    "well-built non-root images (nonroot-numeric, user-1000) without a securityContext, fixed by the module, Succeed (fails today: the forced user and read-only root take their HOME and WORKDIR away)",
    () => {
      expect([
        outcome("nonroot-numeric", "bare+module"),
        outcome("user-1000", "bare+module"),
      ]).toEqual([{ kind: "Succeeded" }, { kind: "Succeeded" }]);
    },
  );

  test.failing(
    "no regression (fails today: runAsUser 1000 has no HOME in a root-built image, and the root is read-only): a root-built image that runs where no policy applies still Succeeds there",
    () => {
      expect(outcome("root-built", "open+module")).toEqual({ kind: "Succeeded" });
    },
  );
});
