// The controller's /metrics through the real built controller: after a known set of reviews, the
// request counters, the review histograms and the decision counters moved by exactly the answers
// the test got; an unauthenticated caller's made-up kinds never become a label.
import { randomUUID } from "node:crypto";
import { admit, workloadReview, type AdmissionReview } from "../support/admission";
import { useEnvironment } from "../support/environment";
import { clusterObjects, demoDeployment, demoPod, deniedDemoPod } from "./cases";
import { answerOfUnread } from "../support/https";

const env = useEnvironment({ objects: clusterObjects });

/** Every sample of /metrics, keyed `name{labels}` as Prometheus' text format writes it. */
async function scrape(): Promise<Map<string, number>> {
  const res = await env.controller.get("/metrics");
  expect(res.status).toBe(200);
  const samples = new Map<string, number>();
  for (const line of res.body.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*(?:\{.*\})?) (\S+)$/.exec(line);
    if (m) samples.set(m[1], Number(m[2]));
  }
  return samples;
}

const delta = (before: Map<string, number>, after: Map<string, number>, key: string) =>
  (after.get(key) ?? 0) - (before.get(key) ?? 0);

const requests = (step: string, kind: string, operation: string, outcome: string) =>
  `admission_guard_admission_requests_total{step="${step}",kind="${kind}",operation="${operation}",outcome="${outcome}"}`;
const decision = (capability: string, rule: string, outcome: string) =>
  `admission_guard_decisions_total{capability="${capability}",rule="${rule}",outcome="${outcome}"}`;

describe("admission metrics on the controller's /metrics", () => {
  it("count every review by step, kind, operation and outcome, as answered", async () => {
    const before = await scrape();
    const answers = { patched: 0, mutateAllowed: 0, allowed: 0, denied: 0 };
    for (const pod of [demoPod({ run: randomUUID() }), demoPod({ run: randomUUID() })]) {
      const result = await admit(env.controller, pod);
      expect(result.allowed).toBe(true);
      if (result.mutateResponse?.patch) answers.patched++;
      else answers.mutateAllowed++;
      answers.allowed++;
    }
    const denied = await admit(env.controller, deniedDemoPod());
    expect(denied.allowed).toBe(false);
    if (denied.mutateResponse?.patch) answers.patched++;
    else answers.mutateAllowed++;
    answers.denied++;
    // A Deployment goes to the validating webhook only (workloads.mutate is off by default).
    const deployment = await env.controller.validate(workloadReview(demoDeployment(), "CREATE"));
    expect(deployment.response?.allowed).toBe(true);
    const after = await scrape();

    expect(delta(before, after, requests("mutate", "Pod", "CREATE", "patched"))).toBe(
      answers.patched,
    );
    expect(answers.patched).toBeGreaterThan(0);
    expect(delta(before, after, requests("mutate", "Pod", "CREATE", "allowed"))).toBe(
      answers.mutateAllowed,
    );
    expect(delta(before, after, requests("validate", "Pod", "CREATE", "allowed"))).toBe(
      answers.allowed,
    );
    expect(delta(before, after, requests("validate", "Pod", "CREATE", "denied"))).toBe(
      answers.denied,
    );
    expect(delta(before, after, requests("validate", "Deployment", "CREATE", "allowed"))).toBe(1);
    // One histogram observation per review, per step.
    const count = (step: string) =>
      delta(
        before,
        after,
        `admission_guard_admission_review_duration_seconds_count{step="${step}"}`,
      );
    expect(count("mutate")).toBe(3);
    expect(count("validate")).toBe(4);
    // Every review fell in a bucket below the webhook's timeout.
    const within = (step: string) =>
      delta(
        before,
        after,
        `admission_guard_admission_review_duration_seconds_bucket{le="10",step="${step}"}`,
      );
    expect(within("mutate")).toBe(3);
    expect(within("validate")).toBe(4);
  });

  it("count fixes, allowed and denied decisions per capability and rule", async () => {
    const before = await scrape();
    await admit(env.controller, demoPod({ run: randomUUID() }));
    await admit(env.controller, deniedDemoPod());
    const after = await scrape();
    expect(delta(before, after, decision("hello-pepr", "greet", "fixed"))).toBe(2);
    expect(delta(before, after, decision("hello-pepr", "no-deny-label", "denied"))).toBe(1);
    expect(delta(before, after, decision("hello-pepr", "", "allowed"))).toBe(1);
  });

  it("a review on a wrong API path counts as unauthorized, its kind never a label", async () => {
    const before = await scrape();
    const kinds = Array.from({ length: 80 }, (_, i) => `Forged${i}${randomUUID().slice(0, 8)}`);
    for (const kind of kinds) {
      const review: AdmissionReview = workloadReview(demoDeployment(), "CREATE");
      review.request!.kind = { group: "", version: "v1", kind };
      const res = await env.controller.post("/validate/not-the-api-path", JSON.stringify(review));
      expect(res.status).toBe(401);
    }
    const after = await scrape();
    expect(delta(before, after, requests("validate", "other", "other", "unauthorized"))).toBe(80);
    const forged = [...after.keys()].filter(key => key.includes("Forged"));
    expect(forged).toEqual([]);
  });

  it("requests off the API path (no path, a malformed or oversize body) are unauthorized, untimed", async () => {
    const histogramCount =
      'admission_guard_admission_review_duration_seconds_count{step="validate"}';
    const before = await scrape();
    const forged: AdmissionReview = workloadReview(demoDeployment(), "CREATE");
    forged.request!.kind = { group: "", version: "v1", kind: `Forged${randomUUID().slice(0, 8)}` };
    // Express answers 404 where Pepr has no route; on a wrong path no body is read (issue 40), so
    // a malformed or oversize one gets Pepr's 401 too, not the parser's 400 or 413.
    const noPath = await env.controller.post("/validate/", JSON.stringify(forged));
    expect(noPath.status).toBe(404);
    const malformed = await env.controller.post("/validate/not-the-api-path", "{not json");
    expect(malformed.status).toBe(401);
    // Answered before the body is read, then closed: answerOfUnread reads the answer.
    const { answer: oversize, sent } = await answerOfUnread(() =>
      env.controller.post(
        "/validate/not-the-api-path",
        JSON.stringify({ padding: "x".repeat(9 * 1024 * 1024) }),
      ),
    );
    expect(oversize.status).toBe(401);
    const after = await scrape();
    expect(delta(before, after, requests("validate", "other", "other", "unauthorized"))).toBe(
      2 + sent,
    );
    expect(delta(before, after, requests("validate", "other", "other", "error"))).toBe(0);
    expect(delta(before, after, histogramCount)).toBe(0);
    expect([...after.keys()].filter(key => key.includes("Forged"))).toEqual([]);
  });

  it("serves Node's process metrics and Pepr's own series next to ours", async () => {
    const samples = await scrape();
    expect(samples.get("process_resident_memory_bytes")).toBeGreaterThan(0);
    expect([...samples.keys()].some(key => key.startsWith("pepr_errors"))).toBe(true);
  });
});
