// The API server's own admission around the module's webhooks (test/support/built-in-admission.ts),
// through a real controller: LimitRanger's defaults reach the module before its fixes, a fix the
// reinvoked Priority plugin refuses is caught here and not first on a cluster, and LimitRanger's
// max refuses what passes the mutating webhook. The controller is a copy of the module with one
// capability added whose fix sets priorityClassName (none of the module's own fixes does), bundled
// as `pepr build` does; every other capability is the module's own.
import { Agent } from "node:https";
import type { KubeObject } from "../../lib/objects/pod";
import { admit } from "../support/admission";
import { LIMIT_RANGER_ANNOTATION } from "../support/built-in-admission";
import { startEnvironment, type Environment } from "../support/environment";
import { sendHttps } from "../support/https";
import { copyModule, type ModuleCopy } from "../support/module-copy";

let copy: ModuleCopy;
let env: Environment;

const NS = "ml";
const LIMITED = "limited";
const namespace = (name: string): KubeObject => ({
  apiVersion: "v1",
  kind: "Namespace",
  metadata: { name },
});
const pod = (
  name: string,
  ns: string,
  labels: Record<string, string> = {},
  resources: Record<string, unknown> = {},
): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: ns, labels },
  spec: { containers: [{ name: "main", image: "busybox:1.36", resources }] },
});
type Spec = {
  priority?: number;
  priorityClassName?: string;
  containers: { resources?: { limits?: Record<string, string> } }[];
  volumes?: { name: string; emptyDir?: { medium?: string; sizeLimit?: string } }[];
};
const specOf = (p: KubeObject) => p.spec as Spec;

beforeAll(async () => {
  copy = copyModule("built-in-admission");
  // A fix that sets priorityClassName, and on request the priority that goes with it.
  copy.write(
    "capabilities/tiering/index.ts",
    [
      'import { capabilityOf } from "../../lib/pepr/adapter";',
      'import { policyOf } from "../../lib/engine/policy";',
      "const policy = policyOf(",
      "  {",
      '    name: "tiering",',
      '    description: "Puts pods labelled tier=batch in the batch PriorityClass",',
      "    rules: [],",
      "    fix({ template }) {",
      "      const tier = template.metadata.labels?.tier;",
      '      if (tier !== "batch" && tier !== "batch-with-priority") return [];',
      '      template.spec.priorityClassName = "batch";',
      '      if (tier === "batch-with-priority") template.spec.priority = 500;',
      '      return [{ rule: "tier", message: "spec.priorityClassName=batch" }];',
      "    },",
      "  },",
      '  { fix: { pods: ["CREATE"] } },',
      ");",
      "export const Tiering = capabilityOf(policy);",
      "",
    ].join("\n"),
  );
  copy.write(
    "capabilities/index.ts",
    copy
      .read("capabilities/index.ts")
      .replace(
        'import { ServiceAccount } from "./service-account";',
        'import { ServiceAccount } from "./service-account";\nimport { Tiering } from "./tiering";',
      )
      .replace("  PayloadSize,\n", "  PayloadSize,\n  Tiering,\n"),
  );
  expect(copy.read("capabilities/index.ts")).toContain("  Tiering,\n");
  const bundle = await copy.bundle();
  env = await startEnvironment({
    bundle,
    objects: [
      namespace(NS),
      namespace(LIMITED),
      {
        apiVersion: "scheduling.k8s.io/v1",
        kind: "PriorityClass",
        metadata: { name: "batch" },
        value: 500,
      },
      {
        apiVersion: "v1",
        kind: "LimitRange",
        metadata: { name: "memory", namespace: LIMITED },
        spec: {
          limits: [{ type: "Container", default: { memory: "4Gi" }, max: { memory: "8Gi" } }],
        },
      },
    ],
  });
}, 120_000);

afterAll(async () => {
  await env?.stop();
  copy?.remove();
});

describe("Priority, re-run after the mutating webhook's patch", () => {
  it("a fix that sets priorityClassName alone: the webhook allows it, the API server refuses the pod", async () => {
    const r = await admit(env.controller, pod("batch-job", NS, { tier: "batch" }), {
      api: env.api,
    });
    // The webhook itself fixed and allowed it...
    expect(r.mutateResponse?.allowed).toBe(true);
    expect(specOf(r.patched).priorityClassName).toBe("batch");
    // ...and the Priority plugin, run again on the patched pod, refuses what the first pass set.
    expect(r.allowed).toBe(false);
    expect(r.message).toBe(
      'pods "batch-job" is forbidden: the integer value of priority (0) must not be provided in pod spec; priority admission controller computed 500 from the given PriorityClass name',
    );
  });

  it("a fix that sets the class's priority with it is admitted", async () => {
    const r = await admit(env.controller, pod("batch-job", NS, { tier: "batch-with-priority" }), {
      api: env.api,
    });
    expect(r.message).toBe("");
    expect(r.allowed).toBe(true);
    expect(specOf(r.patched)).toMatchObject({ priorityClassName: "batch", priority: 500 });
  });

  it("a pod that names the class itself is resolved before the webhook sees it", async () => {
    const manifest = pod("named", NS);
    specOf(manifest).priorityClassName = "batch";
    const r = await admit(env.controller, manifest, { api: env.api });
    expect(specOf(r.request.object!).priority).toBe(500);
    expect(r.allowed).toBe(true);
  });
});

describe("LimitRanger around the webhooks", () => {
  it("the namespace's default limit is in the pod the module fixes: /dev/shm sized from it", async () => {
    const r = await admit(
      env.controller,
      pod("gpu", LIMITED, {}, { limits: { "nvidia.com/gpu": "1" } }),
      { api: env.api },
    );
    expect(r.message).toBe("");
    // What the mutating webhook received already carries LimitRanger's default and its note.
    expect(specOf(r.request.object!).containers[0].resources?.limits?.memory).toBe("4Gi");
    expect(r.request.object!.metadata?.annotations?.[LIMIT_RANGER_ANNOTATION]).toBe(
      "LimitRanger plugin set: memory request for container main; memory limit for container main",
    );
    const shm = specOf(r.patched).volumes?.find(v => v.emptyDir?.medium === "Memory");
    expect(shm?.emptyDir?.sizeLimit).toBe("2Gi");
  });

  it("a limit over the namespace's max is refused by LimitRanger after the mutating webhook, before the validating one", async () => {
    const r = await admit(env.controller, pod("big", LIMITED, {}, { limits: { memory: "16Gi" } }), {
      api: env.api,
    });
    expect(r.mutateResponse?.allowed).toBe(true);
    expect(r.allowed).toBe(false);
    expect(r.message).toBe(
      'pods "big" is forbidden: maximum memory usage per Container is 8Gi, but limit is 16Gi',
    );
  });
});

describe("the stand-in's own create of a Pod", () => {
  it("goes through the same built-ins: defaults set, a refusal answered 403 with the API server's message", async () => {
    const agent = new Agent({ ca: env.api.certs.caPem });
    const post = async (body: KubeObject) =>
      sendHttps(`${env.api.url}/api/v1/namespaces/${body.metadata!.namespace}/pods`, {
        method: "POST",
        agent,
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
    try {
      const created = await post(pod("posted", LIMITED));
      expect(created.status).toBe(201);
      const stored = env.api.get("Pod", "posted", LIMITED)!;
      expect(specOf(stored)).toMatchObject({
        priority: 0,
        serviceAccountName: "default",
        containers: [{ resources: { limits: { memory: "4Gi" } } }],
      });
      const refused = await post({
        ...pod("classy", NS),
        spec: { ...specOf(pod("classy", NS)), priorityClassName: "missing" },
      });
      expect(refused.status).toBe(403);
      expect((refused.json as { message: string }).message).toBe(
        'pods "classy" is forbidden: no PriorityClass with name missing was found',
      );
      expect(env.api.get("Pod", "classy", NS)).toBeUndefined();
    } finally {
      agent.destroy();
    }
  });
});
