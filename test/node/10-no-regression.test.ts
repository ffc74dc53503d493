// The no-regression table: for every image shape ML teams run, what a training probe pod does on a
// real node — first with Kubernetes alone, then with the module — in a namespace without policy
// and in one enforcing Pod Security "restricted". The rule it proves: a pod that Succeeds in a
// restricted namespace with only the fields Pod Security asks for must still Succeed after the
// module; and an image that can run as a non-root user runs with the module wherever it ran before.
// A root-built image writing its root-owned WORKDIR runs too: the module copies WORKDIR to an
// emptyDir there first (ADR 0033), and says so at admission.
//
// Where the namespace asks for less than restricted (issue 27), the module asks no more: in a
// namespace enforcing Pod Security "baseline", and in an unlabelled one with
// securityContext.defaultLevel "privileged" (a second controller, those settings), every shape
// that Succeeds with no policy Succeeds with the module, unfixed.
//
// Three more rows (issue 46, ADR 0038), in restricted with no securityContext, with the module: a
// server on port 80 Running and answering (the low-port sysctl), an environment under /root warned
// at admission with the fix, a Hugging Face cache in a root-owned place Succeeded (an emptyDir).
//
// Three more rows (issue 41), each an image of its own, in restricted with no securityContext,
// with the module (given securityContext.workdirCopyBytes 16 KiB, so one row's WORKDIR is over it
// and root-built's 8 bytes are not): a named user whose /etc/passwd sits under a 256 MiB layer
// resolved or warned within the request's deadline, a name the image does not list running as the
// configured UID (warned), a root-built WORKDIR over the bound warned and not copied. USER
// name:group is the nonroot-named-group shape.
//
// One more row (issue 29): a PyTorch-style job whose DataLoader workers share 256 MiB through
// /dev/shm fails on the runtime's 64 MiB alone, and Succeeds with the module's shared-memory fix
// (turned on for every pod by its namespace label: the node has no GPU).
import { applyObjects, connect, namespace, useModule } from "../cluster/support/cluster";
import { installModule, type InstalledModule } from "../cluster/support/module";
import type { KubeObject } from "../../lib/objects/pod";
import {
  ROWS,
  ROW_USERS,
  ROW_WORKDIR_COPY_BYTES,
  rowImage,
  SHAPES,
  SHAPE_USERS,
  type Row,
  type Shape,
} from "./support/shapes";
import {
  describeOutcome,
  nodeModuleEnv,
  probePod,
  runPods,
  table,
  type Outcome,
  removeNamespaces,
  runJob,
  sharedMemoryJob,
  ML_SHAPE_IMAGES,
} from "./support/workloads";

const cluster = connect();
const registry = cluster.node!.registry!;
const guard = useModule(cluster, {
  env: {
    ...nodeModuleEnv(registry),
    ADMISSION_GUARD_SECURITY_CONTEXT_WORKDIR_COPY_BYTES: String(ROW_WORKDIR_COPY_BYTES),
  },
});

const OPEN = "node-open";
const RESTRICTED = "node-restricted";
const BASELINE = "node-baseline";
/** Opted in to the shared-memory fix for every pod (it acts on GPU pods by default). */
const SHM = "node-shm";

type Column =
  | "open"
  | "minimal"
  | "bare"
  | "baseline"
  | "open+module"
  | "minimal+module"
  | "bare+module"
  | "open+privileged-default"
  | "baseline+module";
const COLUMNS: Record<Column, string> = {
  open: "no policy, as built",
  minimal: "restricted, PSA's fields only",
  bare: "restricted, no securityContext",
  baseline: "baseline, as built",
  "open+module": "no policy, as built, with module",
  "minimal+module": "restricted, PSA's fields only, with module",
  "bare+module": "restricted, no securityContext, with module",
  "open+privileged-default":
    "no policy (unlabelled), as built, with module, securityContext.defaultLevel privileged",
  "baseline+module": "baseline, as built, with module",
};
const WITH_MODULE: Column[] = ["open+module", "minimal+module", "bare+module"];
/** The columns where the namespace's own level asks for less than restricted. */
const AT_NAMESPACE_LEVEL: Column[] = ["open+privileged-default", "baseline+module"];
const namespaceOf = (column: Column) =>
  column.startsWith("open") ? OPEN : column.startsWith("baseline") ? BASELINE : RESTRICTED;
const outcomes = new Map<string, Outcome>();
const warnings = new Map<string, string[]>();
const key = (shape: Shape, column: Column) => `${shape}/${column}`;
const outcome = (shape: Shape, column: Column) => outcomes.get(key(shape, column))!;
const podName = (shape: Shape, column: Column) => `${shape}-${column.replace("+", "-")}`;
/** The shared-memory row: the job's pod, by column, with the Job's admission warnings. */
const SHM_ROW = "shm-loader";
const shmRuns = new Map<Column, Awaited<ReturnType<typeof runJob>>>();
async function runShm(column: "open" | "open+module") {
  const job = sharedMemoryJob(`${SHM_ROW}-${column.replace("+", "-")}`, SHM, registry);
  shmRuns.set(column, await runJob(cluster, job));
}

/** Issue 46's rows: each image's pod in restricted, no securityContext, with the module. */
const ML_ROWS = {
  lowPort: "server on port 80 (Env PORT=80), root-built",
  rootHome: "PATH=/root/miniconda3/bin..., root-built",
  hfCache: "HF_HOME=/data/hf (no layer makes it), root-built",
} as const;
type MlRow = keyof typeof ML_ROWS;
const mlPod = (row: MlRow): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: `ml-${row.toLowerCase()}`, namespace: RESTRICTED },
  spec: {
    ...(row === "lowPort" ? {} : { restartPolicy: "Never" }),
    containers: [
      {
        name: "probe",
        image: ML_SHAPE_IMAGES[row].tags[0],
        imagePullPolicy: "IfNotPresent",
        terminationMessagePolicy: "FallbackToLogsOnError",
        // Ready only once it answers on its port.
        ...(row === "lowPort"
          ? { readinessProbe: { httpGet: { path: "/model.txt", port: 80 }, periodSeconds: 2 } }
          : {}),
      },
    ],
  },
});
const mlOutcomes = new Map<MlRow, Outcome>();
async function runMlRows() {
  const rows = Object.keys(ML_ROWS) as MlRow[];
  const server = await runPods(cluster, [mlPod("lowPort")], "running", 90_000, warnings);
  const jobs = await runPods(
    cluster,
    rows.filter(r => r !== "lowPort").map(mlPod),
    "completion",
    90_000,
    warnings,
  );
  for (const row of rows) {
    const name = mlPod(row).metadata!.name!;
    mlOutcomes.set(row, (server.get(name) ?? jobs.get(name))!);
  }
}
type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const storedPodSpec = async (pod: KubeObject): Promise<Obj> => {
  const path = `/api/v1/namespaces/${RESTRICTED}/pods/${pod.metadata!.name}`;
  return ((await cluster.admin.get(path)).body as Obj).spec;
};
const storedSpec = (row: MlRow) => storedPodSpec(mlPod(row));

/** Issue 41's rows: each image's training probe in restricted, no securityContext, with the module. */
const rowPod = (row: Row): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: `row-${row}`, namespace: RESTRICTED },
  spec: {
    restartPolicy: "Never",
    containers: [
      {
        name: "probe",
        image: rowImage(registry, row),
        imagePullPolicy: "IfNotPresent",
        terminationMessagePolicy: "FallbackToLogsOnError",
      },
    ],
  },
});
const rowOutcomes = new Map<Row, Outcome>();
async function runRows() {
  const pods = ROWS.map(rowPod);
  const results = await runPods(cluster, pods, "completion", 90_000, warnings);
  for (const row of ROWS) rowOutcomes.set(row, results.get(rowPod(row).metadata!.name!)!);
}
const rowWarnings = (row: Row) => (warnings.get(rowPod(row).metadata!.name!) ?? []).join("\n");

async function run(columns: Column[]) {
  const planned = SHAPES.flatMap(shape =>
    columns.map(column => ({
      key: key(shape, column),
      pod: probePod({
        name: podName(shape, column),
        namespace: namespaceOf(column),
        registry,
        shape,
        securityContext: column.startsWith("minimal") ? "minimal" : "none",
      }),
    })),
  );
  const results = await runPods(
    cluster,
    planned.map(p => p.pod),
    "completion",
    90_000,
    warnings,
  );
  for (const { key: k, pod } of planned) outcomes.set(k, results.get(pod.metadata!.name!)!);
}

beforeAll(async () => {
  await applyObjects(cluster, [
    namespace(OPEN),
    namespace(RESTRICTED, { "pod-security.kubernetes.io/enforce": "restricted" }),
    namespace(BASELINE, { "pod-security.kubernetes.io/enforce": "baseline" }),
    namespace(SHM, { "admission-guard.dev/shared-memory": "all" }),
  ]);
});

afterAll(() => {
  const rows = SHAPES.map(shape => [
    shape,
    SHAPE_USERS[shape],
    ...(Object.keys(COLUMNS) as Column[]).map(c =>
      outcomes.has(key(shape, c)) ? describeOutcome(outcome(shape, c), 70) : "-",
    ),
  ]);
  rows.push([
    SHM_ROW,
    "Job: 4 workers × 64 MiB in /dev/shm at once (USER 1001; namespace label shared-memory=all)",
    ...(Object.keys(COLUMNS) as Column[]).map(c => {
      const ran = shmRuns.get(c);
      return ran ? describeOutcome(ran.outcome, 70) : "-";
    }),
  ]);
  for (const [row, image] of Object.entries(ML_ROWS) as [MlRow, string][])
    rows.push([
      mlPod(row).metadata!.name!,
      image,
      ...(Object.keys(COLUMNS) as Column[]).map(c => {
        const ran = c === "bare+module" ? mlOutcomes.get(row) : undefined;
        return ran ? describeOutcome(ran, 70) : "-";
      }),
    ]);
  for (const row of ROWS)
    rows.push([
      rowPod(row).metadata!.name!,
      ROW_USERS[row],
      ...(Object.keys(COLUMNS) as Column[]).map(c => {
        const ran = c === "bare+module" ? rowOutcomes.get(row) : undefined;
        return ran ? describeOutcome(ran, 70) : "-";
      }),
    ]);
  process.stdout.write(
    `\nThe no-regression table (a training probe per image shape, on the real node):\n\n${table(
      ["shape", "image", ...Object.values(COLUMNS)],
      rows,
    )}\n\n`,
  );
});

describe("Kubernetes alone", () => {
  beforeAll(
    () => Promise.all([run(["open", "minimal", "bare", "baseline"]), runShm("open")]),
    180_000,
  );

  test("every image shape runs as built where no policy applies", () => {
    for (const shape of SHAPES)
      expect([shape, outcome(shape, "open")]).toEqual([shape, { kind: "Succeeded" }]);
  });

  test("restricted with only Pod Security's fields: numeric non-root images run, root and named users are stopped by the kubelet", () => {
    expect(outcome("nonroot-numeric", "minimal")).toEqual({ kind: "Succeeded" });
    expect(outcome("user-1000", "minimal")).toEqual({ kind: "Succeeded" });
    for (const shape of ["root-built", "root-built-scratch"] as const)
      expect(outcome(shape, "minimal")).toMatchObject({
        kind: "NotStarted",
        reason: "CreateContainerConfigError",
        message: expect.stringContaining("runAsNonRoot and image will run as root"),
      });
    for (const shape of ["nonroot-named", "nonroot-named-group"] as const)
      expect(outcome(shape, "minimal")).toMatchObject({
        kind: "NotStarted",
        reason: "CreateContainerConfigError",
        message: expect.stringContaining("non-numeric user (ml)"),
      });
  });

  test("baseline: every image shape runs as built (Pod Security baseline asks nothing of them)", () => {
    for (const shape of SHAPES)
      expect([shape, outcome(shape, "baseline")]).toEqual([shape, { kind: "Succeeded" }]);
  });

  test("a PyTorch-style job whose workers share 256 MiB through /dev/shm fails: the runtime's /dev/shm is 64 MiB", () => {
    expect(shmRuns.get("open")?.outcome).toEqual({
      kind: "Failed",
      message: expect.stringMatching(
        /^probe failed: shm \(\d+ bytes read back\) worker\d: dd: error writing '\/dev\/shm\/batch\.\d': No space left on device;/m,
      ),
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
    await Promise.all([run(WITH_MODULE), runShm("open+module"), runMlRows(), runRows()]);
  }, 240_000);

  test("a server on port 80 (TGI's Env PORT=80) runs as UID 1000 with drop ALL and answers: the low-port sysctl at 80 (issue 46)", async () => {
    expect(mlOutcomes.get("lowPort")).toEqual({ kind: "Running" });
    const spec = await storedSpec("lowPort");
    expect(spec.securityContext).toMatchObject({
      runAsUser: 1000,
      sysctls: [{ name: "net.ipv4.ip_unprivileged_port_start", value: "80" }],
    });
    expect(spec.containers[0].securityContext.capabilities.drop).toEqual(["ALL"]);
  });

  test("an environment under /root is said at admission with the fix, never left to crash silently (issue 46)", () => {
    const said = (warnings.get(mlPod("rootHome").metadata!.name!) ?? []).join("\n");
    expect(said).toContain(
      "keeps its interpreter or environment under /root (PATH /root/miniconda3/bin), which is mode 700: run as UID 1000 it cannot start. Fix: install it outside /root",
    );
  });

  test("an image whose Env names a cache no layer makes (HF_HOME=/data/hf) Succeeds: a writable emptyDir there (issue 46)", async () => {
    expect(mlOutcomes.get("hfCache")).toEqual({ kind: "Succeeded" });
    const spec = await storedSpec("hfCache");
    expect(spec.containers[0].volumeMounts).toContainEqual(
      expect.objectContaining({ mountPath: "/data/hf" }),
    );
  });

  test("no regression: every image that Succeeds with only Pod Security's fields still Succeeds", () => {
    const succeededAlone = SHAPES.filter(s => outcome(s, "minimal").kind === "Succeeded");
    expect(succeededAlone).toEqual(["nonroot-numeric", "user-1000"]);
    for (const shape of succeededAlone)
      expect([shape, outcome(shape, "minimal+module")]).toEqual([shape, { kind: "Succeeded" }]);
  });

  test("images that can run as a non-root user run with the module wherever they ran before, a root-built one with a HOME of its own", () => {
    for (const shape of ["root-built-scratch", "nonroot-numeric", "user-1000"] as const)
      for (const column of WITH_MODULE)
        expect([shape, column, outcome(shape, column)]).toEqual([
          shape,
          column,
          { kind: "Succeeded" },
        ]);
  });

  test("the same job Succeeds with the module: /dev/shm a memory-backed emptyDir sized from its memory limit, said when applied", () => {
    const ran = shmRuns.get("open+module")!;
    expect(ran.outcome).toEqual({
      kind: "Succeeded",
    });
    const spec = ran.pod!.spec as {
      volumes?: { name: string; emptyDir?: unknown }[];
      containers: { volumeMounts?: { name: string; mountPath: string }[] }[];
    };
    expect(spec.volumes).toContainEqual({
      name: "ag-shared-memory",
      emptyDir: { medium: "Memory", sizeLimit: "512Mi" },
    });
    expect(spec.containers[0].volumeMounts).toContainEqual({
      name: "ag-shared-memory",
      mountPath: "/dev/shm",
    });
    // kubectl apply of the Job printed what its pod would get, and what counts its pages.
    const said = ran.warnings.join("\n");
    expect(said).toContain("admission-guard/shared-memory: its pods will get");
    expect(said).toContain(
      "will get /dev/shm as a memory-backed emptyDir (ag-shared-memory) of 512Mi (the namespace label admission-guard.dev/shared-memory=all): what is written there counts within the memory limit of the container that writes it",
    );
  });

  test("a named USER (and USER name:group) runs as the UID and GID its image's files give: Succeeded, unwarned (issue 41)", () => {
    for (const shape of ["nonroot-named", "nonroot-named-group"] as const)
      for (const column of WITH_MODULE) {
        expect([shape, column, outcome(shape, column)]).toEqual([
          shape,
          column,
          { kind: "Succeeded" },
        ]);
        expect((warnings.get(podName(shape, column)) ?? []).join("\n")).not.toContain("a name");
      }
  });

  test("a named user whose /etc/passwd sits under a 256 MiB layer is resolved or warned within the request's deadline, never past it (issue 41)", async () => {
    const spec = await storedPodSpec(rowPod("named-large-layer"));
    const said = rowWarnings("named-large-layer");
    // Either its layers were read in time (UID 1002, its own HOME and WORKDIR: Succeeded, nothing
    // said), or the pod was answered at the deadline with the configured UID and a warning saying
    // what was not known (its WORKDIR, 1002's, then fails the probe). Past the deadline the API
    // server would have refused the pod: neither of these.
    const answer = {
      runAsUser: spec.securityContext?.runAsUser,
      kind: rowOutcomes.get("named-large-layer")?.kind,
      warned:
        /probe-named-large-layer:1" \(container "probe"\) (was not inspected \(|runs as user "ml", a name \()/.test(
          said,
        ),
    };
    expect([
      { runAsUser: 1002, kind: "Succeeded", warned: false },
      { runAsUser: 1000, kind: "Failed", warned: true },
    ]).toContainEqual(answer);
  });

  test("a name the image does not list runs as the configured UID, warned with the name (issue 41)", async () => {
    expect(rowOutcomes.get("named-unlisted")).toEqual({ kind: "Succeeded" });
    expect((await storedPodSpec(rowPod("named-unlisted"))).securityContext).toMatchObject({
      runAsUser: 1000,
    });
    expect(rowWarnings("named-unlisted")).toContain(
      `runs as user "mlsvc", a name (the image's /etc/passwd does not list "mlsvc")`,
    );
  });

  test("a root-built WORKDIR over securityContext.workdirCopyBytes is warned with why and the fix, not copied (issue 41)", async () => {
    const spec = await storedPodSpec(rowPod("root-workdir-over"));
    expect(spec.initContainers).toBeUndefined();
    expect(JSON.stringify(spec)).not.toContain("ag-workdir");
    expect(rowWarnings("root-workdir-over")).toMatch(
      new RegExp(
        `not copied to a writable emptyDir: \\d+ bytes under /workspace are over securityContext\\.workdirCopyBytes \\(${ROW_WORKDIR_COPY_BYTES}\\)\\)\\. Fix: .*or mount a writable volume at /workspace`,
      ),
    );
    // What the warning said may happen: its first write into WORKDIR fails.
    expect(rowOutcomes.get("root-workdir-over")).toEqual({
      kind: "Failed",
      message: expect.stringContaining("probe failed: outputs"),
    });
  });

  test("a root-built image writing its root-owned WORKDIR runs: an init container copies WORKDIR to an emptyDir there, said at admission (ADR 0033)", () => {
    for (const shape of ["root-built"] as const)
      for (const column of WITH_MODULE) {
        expect([shape, column, outcome(shape, column)]).toEqual([
          shape,
          column,
          { kind: "Succeeded" },
        ]);
        const said = (warnings.get(podName(shape, column)) ?? []).join("\n");
        expect(said).toContain(
          'its WORKDIR /workspace belongs to root, so init container "ag-copy-probe" copies it to an emptyDir mounted there',
        );
      }
  });
});

describe("with admission-guard, at the level the namespace enforces", () => {
  let atDefaultPrivileged: InstalledModule | undefined;
  beforeAll(async () => {
    // One controller at a time (the webhook configurations have one name): the file's own
    // goes, one with securityContext.defaultLevel privileged comes.
    await guard.module?.uninstall();
    guard.module = undefined;
    atDefaultPrivileged = await installModule(cluster.admin, cluster.caPem, {
      env: {
        ...nodeModuleEnv(registry),
        ADMISSION_GUARD_SECURITY_CONTEXT_DEFAULT_LEVEL: "privileged",
      },
    });
    await run(AT_NAMESPACE_LEVEL);
  }, 240_000);
  afterAll(() => atDefaultPrivileged?.uninstall());

  test("no regression: every shape that Succeeds with no policy Succeeds there, unfixed", () => {
    const succeededAlone = SHAPES.filter(s => outcome(s, "open").kind === "Succeeded");
    expect(succeededAlone).toEqual([...SHAPES]);
    for (const shape of succeededAlone)
      for (const column of AT_NAMESPACE_LEVEL) {
        expect([shape, column, outcome(shape, column)]).toEqual([
          shape,
          column,
          { kind: "Succeeded" },
        ]);
        // Nothing of restricted imposed: no fix, no word about the image's user.
        const said = (warnings.get(podName(shape, column)) ?? []).join("\n");
        expect([shape, column, said]).toEqual([
          shape,
          column,
          expect.not.stringContaining("admission-guard/security-context"),
        ]);
      }
  });
});

// The node is shared by the files that follow.
afterAll(() => removeNamespaces(cluster, [OPEN, RESTRICTED, BASELINE, SHM]), 60_000);
