// workloads.mutate: a Deployment's pod template fixed when it is applied, through the real
// controller (its mutating webhook receives workloads when the module is built with the setting),
// answered as the offline review answers it.
import type { V1PodSpec } from "@kubernetes/client-node";
import type { KubeObject } from "../../lib/objects/pod";
import { admit } from "../support/admission";
import { useEnvironment } from "../support/environment";
import { checkParity, settingsEnv } from "../support/parity";

const NS = "gpt4-canary";
const SETTINGS = { workloads: { mutate: true } };
const env = useEnvironment({
  // A namespace from long ago: the controller makes no ServiceAccount for it on its own.
  objects: [
    {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: NS, creationTimestamp: new Date("2024-05-12T14:00:00Z") },
    },
  ],
  env: settingsEnv(SETTINGS),
});

const deployment: KubeObject = {
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "gpt4-canary", namespace: NS },
  spec: {
    replicas: 2,
    selector: { matchLabels: { app: "gpt4" } },
    template: {
      metadata: { labels: { app: "gpt4" } },
      spec: { containers: [{ name: "inference", image: "openai/gpt4-inference:1.0" }] },
    },
  },
};
const templateOf = (obj: KubeObject) =>
  (obj.spec as { template: { metadata: KubeObject["metadata"]; spec: V1PodSpec } }).template;

it("the template is fixed on apply, recorded on it, and the answer says fixed", async () => {
  const report = await checkParity(env.controller, deployment, {
    objects: env.api.objects(),
    settings: SETTINGS,
    workloadsMutated: true,
  });
  expect(report.differences).toEqual([]);
  const { e2e } = report;
  expect(e2e.allowed).toBe(true);
  const template = templateOf(e2e.patched);
  expect(template.spec.securityContext).toMatchObject({ runAsNonRoot: true });
  expect(template.spec.containers[0].securityContext).toMatchObject({
    allowPrivilegeEscalation: false,
    capabilities: { drop: ["ALL"] },
  });
  expect(template.metadata?.labels).toMatchObject({
    app: "gpt4",
    "app.kubernetes.io/component": "gpt4",
  });
  // The account is not written into the template (see moveOffDefault): its pods are moved to it.
  expect(template.spec.serviceAccountName).toBeUndefined();
  expect(e2e.warnings.join("\n")).toMatch(
    /admission-guard\/service-account: its pods will get spec\.template\.spec\.serviceAccountName="workload"/,
  );
  expect(template.metadata?.annotations?.["admission-guard.dev/fixed"]).toContain(
    "security-context/",
  );
  expect(e2e.warnings.join("\n")).toMatch(/admission-guard\/security-context: fixed /);
  // The selector's label is kept; nothing outside the template changes but Pepr's own mark.
  expect(e2e.patched.spec).toMatchObject({
    replicas: 2,
    selector: { matchLabels: { app: "gpt4" } },
  });
  // A template is not a pod: no ServiceAccount is created for it.
  expect(env.api.get("ServiceAccount", "workload", NS)).toBeUndefined();
});

it("applying the fixed Deployment again changes nothing (the webhook may be called twice)", async () => {
  const first = await admit(env.controller, deployment, { workloadsMutated: true });
  const again = await admit(env.controller, first.patched, {
    operation: "UPDATE",
    oldObject: first.patched,
    workloadsMutated: true,
  });
  expect(again.allowed).toBe(true);
  expect(again.patched).toEqual(first.patched);
});

it("its pods, made from the fixed template, are moved to the account, made for them first", async () => {
  const first = await admit(env.controller, deployment, { workloadsMutated: true });
  const template = templateOf(first.patched);
  const pod: KubeObject = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      generateName: "gpt4-canary-7d9f8-",
      namespace: NS,
      labels: template.metadata?.labels,
      annotations: template.metadata?.annotations,
      ownerReferences: [
        {
          apiVersion: "apps/v1",
          kind: "ReplicaSet",
          name: "gpt4-canary-7d9f8",
          uid: "u-rs",
          controller: true,
        },
      ],
    },
    spec: structuredClone(template.spec),
  };
  const r = await admit(env.controller, pod, { api: env.api });
  expect(r.message).toBe("");
  expect(r.allowed).toBe(true);
  expect(env.api.get("ServiceAccount", "workload", NS)).toBeDefined();
});
