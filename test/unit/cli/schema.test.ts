// cli/schema.ts: `check` refuses as input errors what the API server refuses, and only that. The
// cases and the server's answers are in test/support/api-server-cases.ts (each answer asserted on
// a real kube-apiserver by test/cluster/95-check-vs-api-server.test.ts); here, offline, check must
// give the same answers, and name the field of what it refuses.
import { policies } from "../../../capabilities";
import { schemaProblems } from "../../../cli/schema";
import type { KubeObject } from "../../../lib/objects/pod";
import { knownDifferences, serverCases } from "../../support/api-server-cases";
import { run, tempTree } from "./check-helpers";

const pod = (spec: Record<string, unknown>, extra: Record<string, unknown> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p" },
  spec: { containers: [{ name: "c", image: "busybox" }], ...spec },
  ...extra,
});
const volume = (source: Record<string, unknown>) => pod({ volumes: [{ name: "v", ...source }] });
const container = (extra: Record<string, unknown>) =>
  pod({ containers: [{ name: "c", image: "busybox", ...extra }] });

describe("schemaProblems gives the API server's answer", () => {
  it.each(serverCases.map(c => [c.name, c] as const))("%s", (_name, c) => {
    const problems = schemaProblems(c.object);
    expect(problems.length === 0 ? "accepted" : problems).toEqual(
      c.accepted ? "accepted" : expect.arrayContaining([expect.any(String)]),
    );
  });

  it.each(knownDifferences.map(c => [c.name, c] as const))(
    "known difference, %s: the opposite",
    (_name, c) => expect(schemaProblems(c.object).length === 0).toBe(!c.accepted),
  );
});

describe("null is an absent field, as the server's decoder reads it", () => {
  it("accepts a scaleIO volume with secretRef: null (a Pod Security fixture), and without it", () => {
    const source = { gateway: "g", system: "s", volumeName: "v" };
    expect(schemaProblems(volume({ scaleIO: { ...source, secretRef: null } }))).toEqual([]);
    expect(schemaProblems(volume({ scaleIO: source }))).toEqual([]);
  });

  it("refuses a null field the server requires, as missing", () => {
    expect(schemaProblems(volume({ scaleIO: { gateway: null, system: "s" } }))).toEqual([
      "spec.volumes[0].scaleIO: must have required property gateway",
    ]);
    expect(schemaProblems(pod({ containers: [{ name: null, image: "busybox" }] }))).toEqual([
      "spec.containers[0]: must have required property name",
    ]);
  });

  it("accepts null for an enumeration (the server defaults it) and for map entries", () => {
    expect(schemaProblems(container({ imagePullPolicy: null }))).toEqual([]);
    expect(schemaProblems(pod({ restartPolicy: null, nodeSelector: { a: null } }))).toEqual([]);
    expect(
      schemaProblems(
        pod({}, { metadata: { name: "p", labels: { a: null }, annotations: { b: null } } }),
      ),
    ).toEqual([]);
    expect(schemaProblems(container({ resources: { limits: { cpu: null } } }))).toEqual([]);
  });

  it('makes a null string item "" (accepted) but refuses a null object item', () => {
    expect(schemaProblems(container({ args: [null], command: ["sh", null] }))).toEqual([]);
    expect(schemaProblems(pod({ containers: [{ name: "c", image: "busybox" }, null] }))).toEqual([
      "spec.containers[1]: must be object",
    ]);
  });

  it("still refuses a field Kubernetes does not know, even set to null", () => {
    expect(schemaProblems(pod({ securityContext: { readOnlyRootFilesystem: null } }))).toEqual([
      expect.stringMatching(/^spec\.securityContext\.readOnlyRootFilesystem: unknown field/),
    ]);
  });

  it("does not change the object it judges", () => {
    const object = volume({ scaleIO: { gateway: "g", system: "s", secretRef: null } });
    const before = structuredClone(object);
    schemaProblems(object);
    expect(object).toEqual(before);
  });
});

describe("required by OpenAPI, not by the server", () => {
  it.each([
    [
      "iscsi lun (0 is a valid LUN)",
      volume({ iscsi: { targetPortal: "t:1", iqn: "iqn.2001-04.com.example:s" } }),
    ],
    [
      "an HTTP header's value",
      container({ readinessProbe: { httpGet: { port: 80, httpHeaders: [{ name: "X" }] } } }),
    ],
    [
      "a sysctl's value",
      pod({ securityContext: { sysctls: [{ name: "kernel.shm_rmid_forced" }] } }),
    ],
    [
      "a preferred node term's preference",
      pod({
        affinity: {
          nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 1 }] },
        },
      }),
    ],
  ])("accepts a missing %s", (_what, object) => expect(schemaProblems(object)).toEqual([]));

  it("accepts a Job's podFailurePolicy without rules, and an onPodConditions pattern without status (defaulted to True)", () => {
    const job = (podFailurePolicy: unknown): KubeObject => ({
      apiVersion: "batch/v1",
      kind: "Job",
      metadata: { name: "j" },
      spec: {
        podFailurePolicy,
        template: {
          spec: { restartPolicy: "Never", containers: [{ name: "c", image: "busybox" }] },
        },
      },
    });
    expect(schemaProblems(job({}))).toEqual([]);
    expect(
      schemaProblems(
        job({ rules: [{ action: "Ignore", onPodConditions: [{ type: "DisruptionTarget" }] }] }),
      ),
    ).toEqual([]);
    // what the server does require still is
    expect(
      schemaProblems(job({ rules: [{ onPodConditions: [{ type: "DisruptionTarget" }] }] })),
    ).toEqual(["spec.podFailurePolicy.rules[0]: must have required property action"]);
  });

  it("still refuses the other fields of the same objects the server requires", () => {
    expect(schemaProblems(volume({ iscsi: { iqn: "iqn.2001-04.com.example:s" } }))).toEqual([
      "spec.volumes[0].iscsi: must have required property targetPortal",
    ]);
    expect(
      schemaProblems(
        pod({
          affinity: {
            nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ preference: {} }] },
          },
        }),
      ),
    ).toEqual([
      "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]: must have required property weight",
    ]);
  });

  it("ignores required fields and enumerations under status (the server resets it), not its types or unknown fields", () => {
    expect(
      schemaProblems(pod({}, { status: { phase: "Bogus", conditions: [{ type: "Ready" }] } })),
    ).toEqual([]);
    expect(schemaProblems(pod({}, { status: { conditions: "x" } }))).toEqual([
      "status.conditions: must be array",
    ]);
    expect(schemaProblems(pod({}, { status: { bogus: 1 } }))).toEqual([
      "status.bogus: unknown field, which the API server refuses",
    ]);
  });
});

describe("required by the server, not by OpenAPI", () => {
  it('refuses a container (or init container, or a template\'s) without image, null or ""', () => {
    expect(schemaProblems(pod({ containers: [{ name: "c" }] }))).toEqual([
      "spec.containers[0]: must have required property image",
    ]);
    expect(schemaProblems(pod({ initContainers: [{ name: "i", image: null }] }))).toEqual([
      "spec.initContainers[0]: must have required property image",
    ]);
    const deployment: KubeObject = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "d" },
      spec: {
        selector: { matchLabels: { app: "a" } },
        template: {
          metadata: { labels: { app: "a" } },
          spec: { containers: [{ name: "c", image: "" }] },
        },
      },
    };
    expect(schemaProblems(deployment)).toEqual([
      "spec.template.spec.containers[0]: must have required property image",
    ]);
  });
});

describe('"" of an enumeration held in a plain Go string is unset', () => {
  it("accepts it where the server defaults or allows it", () => {
    expect(
      schemaProblems(container({ imagePullPolicy: "", terminationMessagePolicy: "" })),
    ).toEqual([]);
    expect(
      schemaProblems(
        pod({
          restartPolicy: "",
          dnsPolicy: "",
          tolerations: [{ key: "k", operator: "", effect: "" }],
        }),
      ),
    ).toEqual([]);
  });

  it('refuses it for a pointer field, where "" is a value the server refuses', () => {
    expect(schemaProblems(pod({ securityContext: { fsGroupChangePolicy: "" } }))).toEqual([
      'spec.securityContext.fsGroupChangePolicy: must be equal to one of the allowed values ("Always", "OnRootMismatch")',
    ]);
  });

  it("refuses a value outside the enumeration", () => {
    expect(schemaProblems(container({ imagePullPolicy: "Sometimes" }))).toEqual([
      'spec.containers[0].imagePullPolicy: must be equal to one of the allowed values ("Always", "IfNotPresent", "Never")',
    ]);
  });
});

describe("check on manifests with nulls the server accepts", () => {
  it("judges them with its rules, with no input or internal error", async () => {
    const dir = tempTree({
      "all.yaml": `apiVersion: v1
kind: Pod
metadata: {name: psa-fixture, namespace: team}
spec:
  containers:
  - name: c
    image: busybox
    imagePullPolicy: ""
    securityContext:
    volumeMounts: [{name: v, mountPath: /data}]
  securityContext:
  volumes:
  - name: v
    scaleIO: {gateway: "https://localhost:443/api", system: scaleio, volumeName: vol-0, secretRef: null}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: team
  labels: {app: web, empty:}
spec:
  replicas:
  selector: {matchLabels: {app: web}}
  strategy: {type: ""}
  template:
    metadata: {labels: {app: web}}
    spec:
      restartPolicy:
      nodeSelector: {pool:}
      tolerations: [{key: gpu, operator: Exists, effect: ""}]
      containers:
      - name: web
        image: nginx:1.27
        args: [--flag, null]
        resources: {limits: {cpu: null}}
        readinessProbe: {httpGet: {port: 80, httpHeaders: [{name: X-Probe}]}}
`,
    });
    const r = await run(["check", "-o", "json", "all.yaml"], { cwd: dir, policies });
    expect(r.stderr).toBe("");
    expect(r.code).not.toBe(2);
    expect(r.json.map(j => [j.kind, j.name])).toEqual([
      ["Pod", "psa-fixture"],
      ["Deployment", "web"],
    ]);
    // The rules ran: the scaleIO volume is one the restricted level does not allow.
    expect(JSON.stringify(r.json[0])).toContain("restrictedVolumes");
  });
});
