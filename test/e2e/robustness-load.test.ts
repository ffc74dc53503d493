// 10,000 admission requests at concurrency 100 through the real controller, over HTTPS with
// keep-alive as the API server sends them: every one answered, with its own uid, without errors.
import { randomUUID } from "node:crypto";
import { Agent } from "node:https";
import { podCreateReview, workloadReview, type AdmissionReview } from "../support/admission";
import { useEnvironment } from "../support/environment";
import { sendHttps } from "../support/https";
import { clusterObjects, demoDeployment, demoPod, seedPods } from "./cases";

const env = useEnvironment({ objects: clusterObjects });

const TOTAL = 10_000;
const CONCURRENCY = 100;

/** Reviews to cycle through: pod mutations and validations, seed pods, a Deployment. */
function templates(): { path: "mutate" | "validate"; review: AdmissionReview }[] {
  const pods = [demoPod(), ...seedPods].map(p => podCreateReview(p));
  return [
    ...pods.map(review => ({ path: "mutate" as const, review })),
    ...pods.map(review => ({ path: "validate" as const, review })),
    { path: "validate", review: workloadReview(demoDeployment()) },
  ];
}

async function post(agent: Agent, path: string, body: string) {
  const reply = await sendHttps(`${env.controller.url}${path}`, {
    method: "POST",
    agent,
    headers: { "Content-Type": "application/json" },
    body,
    timeoutMs: 30_000,
  });
  return { status: reply.status, body: reply.text };
}

it(`answers ${TOTAL} requests at concurrency ${CONCURRENCY}: no errors, none dropped`, async () => {
  const agent = new Agent({
    keepAlive: true,
    maxSockets: CONCURRENCY,
    ca: env.api.certs.caPem,
  });
  const kinds = templates();
  // Bodies prepared up front, each with its own uid: the answer must carry the same one.
  const jobs = Array.from({ length: TOTAL }, (_, i) => {
    const { path, review } = kinds[i % kinds.length];
    const uid = randomUUID();
    const body = JSON.stringify({ ...review, request: { ...review.request, uid } });
    return { path: `/${path}/${env.controller.apiPath}`, uid, body };
  });
  const answered = new Set<string>();
  const failures: string[] = [];
  let next = 0;
  async function worker() {
    while (next < jobs.length) {
      const job = jobs[next++];
      try {
        const res = await post(agent, job.path, job.body);
        const uid = (JSON.parse(res.body) as AdmissionReview).response?.uid;
        if (res.status !== 200 || uid !== job.uid)
          failures.push(`HTTP ${res.status} uid ${uid}: ${res.body.slice(0, 200)}`);
        else answered.add(uid);
      } catch (e) {
        failures.push(String(e));
      }
    }
  }
  try {
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  } finally {
    agent.destroy();
  }
  expect(failures.slice(0, 5)).toEqual([]);
  expect(failures.length).toBe(0);
  expect(answered.size).toBe(TOTAL);
  // Still serving.
  expect((await env.controller.get("/healthz")).status).toBe(200);
}, 240_000);
