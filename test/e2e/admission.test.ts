// Real AdmissionReview requests through the real controller (dist/, `npm run build` first),
// against the stand-in API. Assertions use hello-pepr (acts in pepr-demo) plus properties every
// capability must keep: the patch applies, fixes are recorded and reported, nothing crashes.
import { HELLO_DENY_LABEL, HELLO_LABEL } from "../../hello-pepr";
import { useEnvironment } from "../support/environment";
import { recordedFixes } from "../../lib/engine";
import type { KubeObject } from "../../lib/objects/pod";
import { NS_KEYS } from "../../lib/settings";
import { admit, podCreateReview, workloadReview, type AdmitResult } from "../support/admission";
import { withoutPeprAnnotations, canonical } from "../support/parity";
import {
  clusterObjects,
  DEMO_NS,
  demoDeployment,
  demoPod,
  deniedDemoPod,
  inNamespace,
  kubeSystemPod,
  podWithoutContainers,
  podWithoutSpec,
  replicaSetPod,
  seedPods,
  seedWorkloadObjects,
  unknownKind,
} from "./cases";

const env = useEnvironment({ objects: clusterObjects });

const DENIAL_FORMAT = /^admission-guard\/[a-z0-9-]+: .+\. Fix: .+/;

/** What every admitted pod must satisfy, whatever the capabilities do. */
function expectWellFormedOutcome(result: AdmitResult) {
  // Every fix is recorded in the annotation and reported as a warning by its capability.
  for (const [capability, rules] of recordedFixes(result.patched)) {
    expect(rules.length).toBeGreaterThan(0);
    expect(result.warnings.some(w => w.startsWith(`admission-guard/${capability}: fixed`))).toBe(
      true,
    );
  }
  // Every denial, however many capabilities deny, is in the one format.
  if (result.message)
    for (const line of result.message.split(/; (?=admission-guard\/)/))
      expect(line).toMatch(DENIAL_FORMAT);
}

describe("seed pods (Pod CREATE, defaulted by the API server)", () => {
  it.each(seedPods.map(p => [`${p.metadata?.namespace}/${p.metadata?.name}`, p]))(
    "%s: mutate answers a patch that applies, validate answers a well-formed verdict",
    async (_name, pod) => {
      const result = await admit(env.controller, pod as KubeObject);
      expect(result.mutateResponse?.allowed).toBe(true);
      expect(result.validateResponse.uid).toBeTruthy();
      expectWellFormedOutcome(result);
      // The request pod was defaulted: the API server's token volume and mounts are in it.
      const spec = result.request.object?.spec as { volumes?: { name: string }[] };
      expect(spec.volumes?.some(v => v.name.startsWith("kube-api-access-"))).toBe(true);
    },
  );

  it.each(seedPods.map(p => [p.metadata?.name, p]))(
    "%s in the demo namespace: greeted, the fix recorded and reported, user labels kept",
    async (_name, pod) => {
      const moved = inNamespace(pod as KubeObject, DEMO_NS);
      const result = await admit(env.controller, moved);
      expect(result.patched.metadata?.labels?.[HELLO_LABEL]).toBe("true");
      for (const [key, value] of Object.entries(moved.metadata?.labels ?? {}))
        expect(result.patched.metadata?.labels?.[key]).toBe(value);
      expect(recordedFixes(result.patched).get("hello-pepr")).toEqual(["greet"]);
      expect(result.patched.metadata?.annotations?.[NS_KEYS.fixed]).toContain("hello-pepr/greet");
      expect(result.warnings).toContain("admission-guard/hello-pepr: fixed greet");
      expectWellFormedOutcome(result);
    },
  );
});

describe("hello-pepr through the controller", () => {
  it("denies a pod that asks to be refused, naming the capability and the fix", async () => {
    const result = await admit(env.controller, deniedDemoPod());
    expect(result.mutateResponse?.allowed).toBe(true);
    expect(result.allowed).toBe(false);
    expect(result.message).toMatch(DENIAL_FORMAT);
    expect(result.message).toContain("admission-guard/hello-pepr:");
    expect(result.message).toContain(`Fix: remove the label ${HELLO_DENY_LABEL}`);
    // Pepr drops the code our adapter gives (403) and answers 422.
    expect(result.validateResponse.status?.code).toBe(422);
  });

  it("fixes a pod once: sending the fixed pod again changes nothing of ours", async () => {
    const first = await admit(env.controller, demoPod());
    const second = await admit(env.controller, first.patched, { defaulted: false });
    expect(canonical(withoutPeprAnnotations(second.patched))).toBe(
      canonical(withoutPeprAnnotations(first.patched)),
    );
  });

  it("handles a ReplicaSet's pod (generateName, no name, owner, controller's userInfo)", async () => {
    const result = await admit(env.controller, replicaSetPod());
    expect(result.request.userInfo.username).toContain("replicaset-controller");
    expect(result.patched.metadata?.labels?.[HELLO_LABEL]).toBe("true");
    expect(result.patched.metadata?.labels?.["pod-template-hash"]).toBe("7d9f8b6c5");
    expect(result.patched.metadata?.ownerReferences).toEqual(
      replicaSetPod().metadata?.ownerReferences,
    );
    expect(result.allowed).toBe(true);
  });
});

describe("workloads", () => {
  it("a Deployment CREATE is not mutated and is warned what its pods will get", async () => {
    const review = workloadReview(demoDeployment());
    const mutated = await env.controller.mutate(review);
    expect(mutated.response?.allowed).toBe(true);
    expect(mutated.response?.patch).toBeUndefined();
    const result = await admit(env.controller, demoDeployment());
    expect(result.allowed).toBe(true);
    expect(result.patched).toEqual(result.request.object);
    expect(result.warnings).toContainEqual(
      expect.stringMatching(
        /^admission-guard\/hello-pepr: its pods will get .*greeted.*Deployment/,
      ),
    );
  });

  it("a Deployment whose pods would be refused is denied early, on CREATE and UPDATE", async () => {
    const bad = demoDeployment({ [HELLO_DENY_LABEL]: "true" });
    const created = await admit(env.controller, bad);
    expect(created.allowed).toBe(false);
    expect(created.message).toContain(`spec.template.metadata.labels`);
    const updated = await admit(env.controller, bad, {
      operation: "UPDATE",
      oldObject: demoDeployment(),
    });
    expect(updated.allowed).toBe(false);
  });

  it.each(seedWorkloadObjects.map(w => [`${w.kind} ${w.metadata?.name}`, w]))(
    "seed %s: validated, never patched",
    async (_name, workload) => {
      const result = await admit(env.controller, workload as KubeObject);
      expect(result.mutateResponse).toBeUndefined();
      expect(result.validateResponse.uid).toBeTruthy();
      // The seed's template breaks what the pods' fixes put right (securityContext, labels, the
      // ServiceAccount): judged with the fixes simulated, it is admitted.
      expect(result.allowed).toBe(true);
      const mutated = await env.controller.mutate(workloadReview(workload as KubeObject));
      expect(mutated.response?.patch).toBeUndefined();
    },
  );
});

describe("objects admission-guard leaves alone", () => {
  it("a kube-system pod is allowed and untouched, even one carrying the deny label", async () => {
    const result = await admit(env.controller, kubeSystemPod());
    expect(result.allowed).toBe(true);
    expect(canonical(withoutPeprAnnotations(result.patched))).toBe(
      canonical(result.request.object),
    );
    expect(result.warnings).toEqual([]);
  });

  it("an unknown kind is allowed without a patch or a warning", async () => {
    const mutated = await env.controller.mutate(workloadReview(unknownKind()));
    expect(mutated.response).toMatchObject({ allowed: true });
    expect(mutated.response?.patch).toBeUndefined();
    const validated = await env.controller.validate(workloadReview(unknownKind()));
    expect(validated.response?.allowed).toBe(true);
    expect(validated.response?.warnings ?? []).toEqual([]);
  });
});

describe("bad input gets an answer, never a crash or a hang", () => {
  it("a pod without containers is answered, and the controller keeps serving", async () => {
    // Fixed and allowed as any pod: the API server's own validation (after the mutating webhooks,
    // before the validating ones) is what refuses a pod without containers in a cluster.
    const result = await admit(env.controller, podWithoutContainers());
    expect(result.mutateResponse?.allowed).toBe(true);
    expect(result.allowed).toBe(true);
    expect((await admit(env.controller, demoPod())).allowed).toBe(true);
  });

  it("a pod without spec is denied with a message saying what is missing", async () => {
    const result = await admit(env.controller, podWithoutSpec());
    expect(result.allowed).toBe(false);
    expect(result.message).toMatch(DENIAL_FORMAT);
    // One problem, said once (by the first capability that acts), not once per capability.
    expect(result.message.match(/Pod has no spec/g)).toHaveLength(1);
  });

  it("a body that is not JSON gets HTTP 400 (from Pepr's body parser)", async () => {
    for (const path of [
      `/mutate/${env.controller.apiPath}`,
      `/validate/${env.controller.apiPath}`,
    ]) {
      const res = await env.controller.post(path, "this is not json");
      expect(res.status).toBe(400);
      // NODE_ENV=production (package.json pepr.env) keeps Express from sending a stack trace.
      expect(res.body).not.toMatch(/node_modules|\.js:\d+/);
    }
  });

  it("JSON without a request gets HTTP 500 from Pepr, before any module code runs", async () => {
    // Pepr 1.1.4 reads request.operation unguarded; the API server always sends a request, so
    // this only matters to a hand-made call. The controller keeps serving afterwards.
    for (const body of [
      "{}",
      "[]",
      JSON.stringify({ ...podCreateReview(demoPod()), request: undefined }),
    ]) {
      const res = await env.controller.post(`/validate/${env.controller.apiPath}`, body);
      expect(res.status).toBe(500);
    }
    expect((await env.controller.get("/healthz")).status).toBe(200);
  });

  it("HTTP 500 too: no operation, object null on CREATE, a body not sent as JSON", async () => {
    // None of these comes from a real API server (object is null only on DELETE, which we do not
    // register); the controller answers 500 and keeps serving.
    const review = podCreateReview(demoPod());
    const bodies = [
      JSON.stringify({ ...review, request: { ...review.request, operation: undefined } }),
      JSON.stringify({ ...review, request: { ...review.request, object: null } }),
    ];
    for (const endpoint of ["mutate", "validate"]) {
      for (const body of bodies)
        expect(
          (await env.controller.post(`/${endpoint}/${env.controller.apiPath}`, body)).status,
        ).toBe(500);
      const asText = await env.controller.post(
        `/${endpoint}/${env.controller.apiPath}`,
        JSON.stringify(review),
        "text/plain",
      );
      expect(asText.status).toBe(500);
    }
    expect((await admit(env.controller, demoPod())).allowed).toBe(true);
  });
});
