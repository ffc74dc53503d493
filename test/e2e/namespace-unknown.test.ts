// A controller that has just started, before its namespace watch has listed (a slow first list,
// as on a large cluster or a busy API server): a namespace's mode and labels are unknown, not
// "unlabelled". A request in a namespace labelled warn is judged in warn mode all the same — the
// controller reads that namespace once through the API — and never enforced by mistake.
import type { KubeObject } from "../../lib/objects/pod";
import { admit } from "../support/admission";
import { startController, type Controller } from "../support/controller";
import { startStandIn, type StandInApi } from "../support/stand-in-api";
import { eventually } from "../support/wait";

let api: StandInApi;
let controller: Controller;

beforeAll(async () => {
  api = await startStandIn({
    objects: [
      {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: "lab", labels: { "admission-guard.dev/mode": "warn" } },
      },
      {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: "sandbox", labels: { "admission-guard.dev/mode": "off" } },
      },
      { apiVersion: "v1", kind: "Namespace", metadata: { name: "prod" } },
    ],
  });
  // The watch's first list of namespaces takes 4 s: the request below comes before it.
  api.holdLists("namespaces", 4000);
  controller = await startController({ api });
}, 60_000);
afterAll(async () => {
  await controller?.stop();
  await api?.stop();
});

const privilegedIn = (namespace: string): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "debug", namespace },
  spec: {
    containers: [{ name: "c", image: "busybox:1.36", securityContext: { privileged: true } }],
  },
});
const privileged = privilegedIn("lab");

test("a pod in a namespace labelled warn is judged in warn mode before the watch has listed", async () => {
  const result = await admit(controller, privileged);
  expect(result.allowed).toBe(true);
  expect(result.warnings).toContainEqual(
    expect.stringContaining("admission-guard/security-context: privileged"),
  );
  // Read through the API (a GET of that namespace), not guessed.
  expect(api.requests.some(r => r.method === "GET" && r.path === "/api/v1/namespaces/lab")).toBe(
    true,
  );
  expect(api.watching("Namespace")).toBe(0);
});

test("restarted under a load of requests: none judged with the wrong mode (warn, off, enforce)", async () => {
  // What each namespace's mode makes of a privileged pod.
  const expected: Record<string, (r: Awaited<ReturnType<typeof admit>>) => boolean> = {
    lab: r => r.allowed && r.warnings.some(w => w.includes("security-context: privileged")),
    sandbox: r => r.allowed && !r.warnings.some(w => w.includes("admission-guard/")),
    prod: r => !r.allowed && /security-context/.test(r.message ?? ""),
  };
  const answered: Record<string, number> = { lab: 0, sandbox: 0, prod: 0 };
  // Answers from the restarted process alone: the old one may still answer while it stops.
  const answeredAfterRestart: Record<string, number> = { lab: 0, sandbox: 0, prod: 0 };
  let restarted: Controller | undefined;
  const wrong: string[] = [];
  let unanswered = 0;
  let running = true;
  // One lane of requests per namespace, each sending its next once the last is answered.
  const lane = async (ns: string) => {
    while (running) {
      try {
        const to = controller;
        const r = await admit(to, privilegedIn(ns));
        answered[ns]++;
        if (to === restarted) answeredAfterRestart[ns]++;
        if (!expected[ns](r))
          wrong.push(`${ns}: allowed=${r.allowed} ${r.message ?? ""} ${r.warnings.join(" | ")}`);
      } catch {
        unanswered++; // the controller is down: the API server's failurePolicy decides, not we
      }
      await new Promise(res => setTimeout(res, 20));
    }
  };
  const load = Promise.all(Object.keys(expected).map(lane));
  await eventually(
    () => Object.values(answered).forEach(n => expect(n).toBeGreaterThan(1)),
    10_000,
  );
  const restartedAt = api.requests.length;
  // A restart: the new process's first namespace list is held, for longer than a start on a busy
  // machine takes, so that its first requests come before the list.
  api.holdLists("namespaces", 60_000); // longer than a start (30 s at most) and the lanes after it
  await controller.stop();
  controller = restarted = await startController({ api });
  await eventually(
    () => Object.values(answeredAfterRestart).forEach(n => expect(n).toBeGreaterThan(1)),
    18_000,
  );
  running = false;
  await load;
  expect(wrong).toEqual([]);
  // The restarted one judged before its watch had listed: it read each namespace through the API.
  const readAfterRestart = api.requests
    .slice(restartedAt)
    .filter(r => r.method === "GET" && /^\/api\/v1\/namespaces\/(lab|sandbox|prod)$/.test(r.path))
    .map(r => r.path);
  expect(new Set(readAfterRestart).size).toBe(3);
  process.stdout.write(
    `restart under load: answered ${JSON.stringify(answered)} (after the restart ${JSON.stringify(answeredAfterRestart)}), unanswered while down ${unanswered}\n`,
  );
}, 60_000);
