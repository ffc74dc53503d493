// Parity with the real Pod Security Admission (issue 27). For each level and policy version, every
// pod of the generated fixture set (test/fixtures/security-context/levels.ts) and a node exporter
// is created with --dry-run=server in namespaces enforcing that level: once with the module off
// there (admission-guard.dev/mode=off: the API server's PodSecurity alone), once with it on. The
// module must never deny what PSA admits (false denials) nor admit what PSA denies (unsafe
// admits); "latest" and a version newer than the API server included, which PSA evaluates as its
// own version: the controller reads it from /version.
//
// The API server runs PodSecurity before the validating webhooks, so a pod PSA denies never reaches
// the module there. The module's own verdict on every pod is therefore also asked of the same
// controller directly, with the pod as the API server stores it (a dry-run in a privileged
// namespace) in the same namespace; for each pod that did reach the module through the API server,
// both verdicts must be the same. securityContext.mutate is off: a fix is not what makes a pod
// pass. The ServiceAccount area is off too: only the security-context verdict is compared.
import type { KubeObject } from "../../lib/objects/pod";
import { LEVEL_CASES } from "../fixtures/security-context/levels";
import { admit } from "../support/admission";
import { applyObjects, connect, namespace, useModule } from "./support/cluster";
import { statusMessage } from "./support/kube-client";

const cluster = connect();
const guard = useModule(cluster, {
  env: {
    ADMISSION_GUARD_SECURITY_CONTEXT_MUTATE: "false",
    ADMISSION_GUARD_SERVICE_ACCOUNT_ENABLED: "false",
  },
});

const LEVELS = ["privileged", "baseline", "restricted"] as const;
// latest (the API server's own, v1.32); v1.18 (before seccomp was required); v1.23 (before
// runAsUser 0 was refused, the old safe sysctls); v1.30; v1.35, newer than the API server.
const VERSIONS = ["latest", "v1.18", "v1.23", "v1.30", "v1.35"];
const ENFORCE = "pod-security.kubernetes.io/enforce";
const MODE = "admission-guard.dev/mode";

/** A node-exporter pod as its DaemonSet makes it: host network and PID, / read-only. */
const nodeExporter: KubeObject = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "node-exporter" },
  spec: {
    hostNetwork: true,
    hostPID: true,
    containers: [
      {
        name: "node-exporter",
        image: "ghcr.io/example/node-exporter:1.8",
        args: ["--path.rootfs=/host"],
        volumeMounts: [{ name: "root", mountPath: "/host", readOnly: true }],
      },
    ],
    volumes: [{ name: "root", hostPath: { path: "/" } }],
  },
};

/** Every case with a pod name the API accepts (the fixtures' names are sentences). */
const CASES = [
  ...LEVEL_CASES.map(c => ({ name: c.name, pod: c.pod })),
  { name: "node exporter", pod: nodeExporter },
].map((c, i) => ({
  name: c.name,
  pod: { ...c.pod, metadata: { ...c.pod.metadata, name: `case-${i}` } } as KubeObject,
}));

const slug = (version: string) => version.replace(".", "-");
const psaOnly = (level: string, version: string) => `psa15-${level}-${slug(version)}`;
const withModule = (level: string, version: string) => `ag15-${level}-${slug(version)}`;
/** Where each pod is stored as the API server stores it (defaulted, disabled fields dropped). */
const SERVED = "psa15-served";

const COMBOS = LEVELS.flatMap(level => VERSIONS.map(version => ({ level, version })));

type Outcome = "admitted" | "psa" | "module" | "invalid";
interface DryRun {
  outcome: Outcome;
  message: string;
  object?: KubeObject;
}

/** `kubectl create --dry-run=server` of a pod, and who (if anyone) refused it. */
async function dryRun(ns: string, pod: KubeObject): Promise<DryRun> {
  const body = { ...pod, metadata: { ...pod.metadata, namespace: ns } };
  const res = await cluster.admin.create(`/api/v1/namespaces/${ns}/pods`, body, "?dryRun=All");
  const message = statusMessage(res);
  if (res.status < 300) return { outcome: "admitted", message, object: res.body };
  if (message.includes("violates PodSecurity")) return { outcome: "psa", message };
  if (/admission webhook "[^"]+" denied the request/.test(message))
    return { outcome: "module", message };
  if (res.status === 422) return { outcome: "invalid", message };
  throw new Error(`${ns}/${pod.metadata?.name}: HTTP ${res.status} ${message || res.text}`);
}

/** A few at a time: the API server, the controller and jest share two cores. */
async function eachLimited<T>(items: T[], work: (item: T) => Promise<void>, limit = 6) {
  const queue = [...items];
  await Promise.all(
    Array.from({ length: limit }, async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await work(item);
    }),
  );
}

interface Row {
  level: string;
  version: string;
  fixtures: number;
  psaAdmits: number;
  moduleAdmits: number;
  falseDenials: string[];
  unsafeAdmits: string[];
  /** Pods that reached the module through the API server, whose direct verdict differed. */
  disagreements: string[];
  /** With the module, the API server's answer where PSA alone answered otherwise (PSA's part). */
  psaChanged: string[];
}

const served = new Map<string, KubeObject>();
const invalid: string[] = [];
const rows: Row[] = [];

beforeAll(async () => {
  await applyObjects(cluster, [
    namespace(SERVED, { [ENFORCE]: "privileged", [MODE]: "off" }),
    ...COMBOS.flatMap(({ level, version }) => {
      const labels = { [ENFORCE]: level, [`${ENFORCE}-version`]: version };
      return [
        namespace(psaOnly(level, version), { ...labels, [MODE]: "off" }),
        namespace(withModule(level, version), labels),
      ];
    }),
  ]);
  await guard.install();
  // The stored form of each pod: what the module is asked about directly. A pod the API server
  // refuses as invalid (a field of a disabled feature, a rule of the API) is no Pod Security case.
  await eachLimited(CASES, async c => {
    const result = await dryRun(SERVED, c.pod);
    if (result.outcome === "admitted") served.set(c.name, result.object!);
    else if (result.outcome === "invalid") invalid.push(`${c.name} (${result.message})`);
    else throw new Error(`${c.name} refused in a privileged namespace: ${result.message}`);
  });
}, 120_000);

afterAll(async () => {
  const line = (cells: (string | number)[]) => `| ${cells.join(" | ")} |`;
  const header = [
    "level",
    "version",
    "fixtures",
    "PSA admits",
    "module admits",
    "false denials",
    "unsafe admits",
  ];
  process.stdout.write(
    [
      "\nParity with the real Pod Security Admission (kube-apiserver, --dry-run=server):\n",
      line(header),
      line(header.map(() => "---")),
      ...rows.map(r =>
        line([
          r.level,
          r.version,
          r.fixtures,
          r.psaAdmits,
          r.moduleAdmits,
          r.falseDenials.length ? r.falseDenials.join("; ") : 0,
          r.unsafeAdmits.length ? r.unsafeAdmits.join("; ") : 0,
        ]),
      ),
      `\nNot Pod Security cases (refused as invalid by the API server, in every namespace): ${
        invalid.length ? invalid.map(i => i.slice(0, 160)).join("; ") : "none"
      }\n\n`,
    ].join("\n"),
  );
  for (const ns of [
    SERVED,
    ...COMBOS.flatMap(c => [psaOnly(c.level, c.version), withModule(c.level, c.version)]),
  ])
    await cluster.admin.delete(`/api/v1/namespaces/${ns}`);
}, 60_000);

describe.each(COMBOS)("Pod Security $level, $version", ({ level, version }) => {
  test("the module denies nothing PSA admits, and admits nothing PSA denies", async () => {
    const row: Row = {
      level,
      version,
      fixtures: served.size,
      psaAdmits: 0,
      moduleAdmits: 0,
      falseDenials: [],
      unsafeAdmits: [],
      disagreements: [],
      psaChanged: [],
    };
    const controller = guard.module!.controller;
    const ns = withModule(level, version);
    await eachLimited(
      CASES.filter(c => served.has(c.name)),
      async c => {
        const psa = await dryRun(psaOnly(level, version), c.pod);
        const both = await dryRun(ns, c.pod);
        const stored = served.get(c.name)!;
        const direct = await admit(
          controller,
          { ...stored, metadata: { ...stored.metadata, namespace: ns } },
          { defaulted: false, dryRun: true },
        );
        const psaAdmits = psa.outcome === "admitted";
        if (psaAdmits) row.psaAdmits++;
        if (direct.allowed) row.moduleAdmits++;
        if (psaAdmits && both.outcome === "module")
          row.falseDenials.push(`${c.name}: ${both.message.slice(0, 300)}`);
        if (!psaAdmits && direct.allowed) row.unsafeAdmits.push(`${c.name}: ${psa.message}`);
        // Through the API server the module answers only what PSA let through.
        if (psaAdmits !== (both.outcome !== "psa"))
          row.psaChanged.push(`${c.name}: ${both.outcome}`);
        if (psaAdmits && direct.allowed !== (both.outcome === "admitted"))
          row.disagreements.push(`${c.name}: API server ${both.outcome}, direct ${direct.allowed}`);
      },
    );
    rows.push(row);
    expect(row.psaChanged).toEqual([]);
    expect(row.disagreements).toEqual([]);
    expect(row.falseDenials).toEqual([]);
    expect(row.unsafeAdmits).toEqual([]);
  });
});

test("the table covers every level and version, and PSA's verdicts differ between them", () => {
  expect(rows).toHaveLength(COMBOS.length);
  // The set tells levels and versions apart (else a module that ignored them would pass).
  const admits = (level: string, version: string) =>
    rows.find(r => r.level === level && r.version === version)!.psaAdmits;
  expect(admits("privileged", "latest")).toBe(served.size);
  expect(admits("baseline", "latest")).toBeLessThan(served.size);
  expect(admits("restricted", "latest")).toBeLessThan(admits("baseline", "latest"));
  expect(new Set(VERSIONS.map(v => admits("restricted", v))).size).toBeGreaterThan(2);
  expect(new Set(VERSIONS.map(v => admits("baseline", v))).size).toBeGreaterThan(1);
});
