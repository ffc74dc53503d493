// Robustness through the real controller: malformed and unusual AdmissionReviews always get an
// answer (a well-formed review, or an HTTP error from Pepr's front door), never a crash or a hang,
// and the process keeps serving afterwards (its metrics: test/e2e/metrics.test.ts).
import { randomUUID } from "node:crypto";
import { admit, podCreateReview, workloadReview, type AdmissionReview } from "../support/admission";
import type { HttpResult } from "../support/controller";
import { answerOfUnread } from "../support/https";
import { useEnvironment } from "../support/environment";
import { clusterObjects, demoPod, deniedDemoPod, unknownKind } from "./cases";

/** A namespace that existed long before the controller started: no ServiceAccount is made for it. */
const OLD_NS = "robustness-old";
const env = useEnvironment({
  objects: [
    ...clusterObjects,
    {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: OLD_NS, creationTimestamp: new Date("2024-05-12T14:00:00Z") },
    },
  ],
});

/** Longest any answer may take: the webhook timeout in package.json (10 s). */
const WEBHOOK_TIMEOUT_MS = 10_000;

/** A POST that must be answered before the webhook timeout (a hang fails the test, it does not stall it). */
async function send(kind: "mutate" | "validate", body: string): Promise<HttpResult> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${kind}: no answer within ${WEBHOOK_TIMEOUT_MS} ms`)),
      WEBHOOK_TIMEOUT_MS,
    );
  });
  try {
    return await Promise.race([
      env.controller.post(`/${kind}/${env.controller.apiPath}`, body),
      hang,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * What the API server can act on: HTTP 200 with a response for the request's uid (allowed, or
 * denied with a message), or an HTTP error. Pepr 1.1.4 answers 500 "Internal Server Error" when a
 * review breaks its own request handling before or around our code (no `request`, an object it
 * cannot clone or annotate); the API server then applies the failure policy (Fail: denied).
 */
function expectAnswer(res: HttpResult, uid?: string) {
  if (res.status === 200) {
    const review = res.json as AdmissionReview;
    expect(review.kind).toBe("AdmissionReview");
    expect(review.response).toBeDefined();
    if (uid) expect(review.response!.uid).toBe(uid);
    expect(typeof review.response!.allowed).toBe("boolean");
    if (!review.response!.allowed)
      expect(review.response!.status?.message).toMatch(/^admission-guard\/[a-z0-9-]+: .+ Fix: /);
  } else if (res.status === 500) {
    expect(res.body).toBe("Internal Server Error");
  } else {
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
  }
}

const base = () => podCreateReview(demoPod());
const withRequest = (patch: Record<string, unknown>) => {
  const review = base();
  return { review, body: JSON.stringify({ ...review, request: { ...review.request, ...patch } }) };
};
const withObject = (patch: Record<string, unknown>) => {
  const review = base();
  const object = { ...review.request!.object, ...patch };
  return { review, body: JSON.stringify({ ...review, request: { ...review.request, object } }) };
};
/** A pod with `depth` levels of nesting under spec (built as text: too deep for JSON.stringify). */
const deeplyNested = (depth: number) => {
  const review = base();
  const nested = '{"a":'.repeat(depth) + "{}" + "}".repeat(depth);
  return { review, body: JSON.stringify(review).replace('"spec":{', `"spec":{"deep":${nested},`) };
};

const malformed: [string, () => { review?: AdmissionReview; body: string }][] = [
  ["a body that is not JSON", () => ({ body: "{not json" })],
  ["an empty body", () => ({ body: "" })],
  ["JSON that is not an object", () => ({ body: "[1,2,3]" })],
  ["JSON without request", () => ({ body: JSON.stringify({ kind: "AdmissionReview" }) })],
  ["a request that is a string", () => ({ body: JSON.stringify({ request: "pod" }) })],
  ["a request without object", () => withRequest({ object: undefined })],
  ["a request with object null", () => withRequest({ object: null })],
  ["a request without kind", () => withRequest({ kind: undefined })],
  ["an object that is a string", () => withRequest({ object: "pod" })],
  ["metadata that is a number", () => withObject({ metadata: 5 })],
  ["metadata that is an empty array", () => withObject({ metadata: [] })],
  ["spec that is an empty array", () => withObject({ spec: [] })],
  ["containers that is a string", () => withObject({ spec: { containers: "app" } })],
  [
    "containers of null, numbers, strings",
    () => withObject({ spec: { containers: [null, 5, "x"] } }),
  ],
  [
    "a container whose fields have the wrong types",
    () =>
      withObject({
        spec: {
          containers: [{ name: 7, image: [], securityContext: [], env: {}, resources: "1" }],
        },
      }),
  ],
  ["labels that are an array", () => withObject({ metadata: { name: "x", labels: ["a"] } })],
  ["5,000 levels of nesting", () => deeplyNested(5_000)],
  ["100,000 levels of nesting", () => deeplyNested(100_000)],
  [
    "an unknown kind",
    () => {
      const review = workloadReview(unknownKind());
      return { review, body: JSON.stringify(review) };
    },
  ],
  [
    "a DELETE (object null, oldObject set)",
    () => withRequest({ operation: "DELETE", object: null, oldObject: base().request!.object }),
  ],
  [
    "a CONNECT (pods/exec)",
    () =>
      withRequest({
        operation: "CONNECT",
        kind: { group: "", version: "v1", kind: "PodExecOptions" },
        resource: { group: "", version: "v1", resource: "pods" },
        subResource: "exec",
        object: { apiVersion: "v1", kind: "PodExecOptions", command: ["sh"], stdin: true },
      }),
  ],
  [
    "a 2.5 MB pod (an annotation of 2.5 million bytes)",
    () => withObject({ metadata: { name: "big", annotations: { blob: "x".repeat(2_500_000) } } }),
  ],
];

describe("malformed and unusual reviews", () => {
  it.each(malformed)("%s: answered on /mutate and /validate", async (_name, make) => {
    const { review, body } = make();
    for (const kind of ["mutate", "validate"] as const) {
      const res = await send(kind, body);
      expectAnswer(res, review?.request?.uid);
    }
  });

  it("answers unusual but valid operations with a review, not an error", async () => {
    for (const name of ["a DELETE (object null, oldObject set)", "a CONNECT (pods/exec)"]) {
      const { review, body } = malformed.find(([n]) => n === name)![1]();
      for (const kind of ["mutate", "validate"] as const) {
        const res = await send(kind, body);
        expect(res.status).toBe(200);
        expect((res.json as AdmissionReview).response).toMatchObject({
          uid: review!.request!.uid,
          allowed: true,
        });
      }
    }
  });

  it("a 2.5 MB object, over Pepr's own 2mb body limit, reaches the payload-size rule and is denied by it", async () => {
    const { body } = malformed.find(([n]) => n.startsWith("a 2.5 MB"))![1]();
    const res = await send("validate", body);
    expect(res.status).toBe(200);
    expect((res.json as AdmissionReview).response?.allowed).toBe(false);
    expect(res.body).toContain("admission-guard/payload-size");
  });

  it("a body above the raised limit (8mb) is refused with 413, and the controller serves on", async () => {
    const { body } = withObject({
      metadata: { name: "huge", annotations: { blob: "x".repeat(9 * 1024 * 1024) } },
    });
    // Answered before the body is read, then closed: answerOfUnread reads the answer.
    const { answer: refused } = await answerOfUnread(() => send("validate", body));
    expect(refused.status).toBe(413);
    const { body: small } = withObject({ metadata: { name: "after" } });
    expect((await send("validate", small)).status).toBe(200);
  });

  it("dry-run requests: answered like the others, without side effects in the cluster", async () => {
    const seen = env.api.requests.length;
    const pod = { ...demoPod(), metadata: { name: "dry", namespace: OLD_NS } };
    const result = await admit(env.controller, pod, { dryRun: true });
    expect(typeof result.allowed).toBe("boolean");
    const writes = env.api.requests
      .slice(seen)
      .filter(r => r.method !== "GET" && r.path.includes("/serviceaccounts"));
    expect(writes).toEqual([]);
    expect(env.api.get("ServiceAccount", "workload", OLD_NS)).toBeUndefined();
  });

  it("keeps serving afterwards: healthz, then a normal pod is fixed and a bad one denied", async () => {
    expect((await env.controller.get("/healthz")).status).toBe(200);
    const fixed = await admit(env.controller, demoPod({ run: randomUUID() }));
    expect(fixed.mutateResponse?.patchType).toBe("JSONPatch");
    const denied = await admit(env.controller, deniedDemoPod());
    expect(denied.allowed).toBe(false);
    expect(denied.message).toContain("admission-guard/hello-pepr");
  });
});
