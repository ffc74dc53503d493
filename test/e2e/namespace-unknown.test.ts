// A controller that has just started, before its namespace watch has listed (a slow first list,
// as on a large cluster or a busy API server): a namespace's mode and labels are unknown, not
// "unlabelled". A request in a namespace labelled warn is judged in warn mode all the same — the
// controller reads that namespace once through the API — and never enforced by mistake.
import type { KubeObject } from "../../lib/pod";
import { admit } from "../support/admission";
import { startController, type Controller } from "../support/controller";
import { startStandIn, type StandInApi } from "../support/stand-in-api";

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

const privileged: KubeObject = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "debug", namespace: "lab" },
  spec: {
    containers: [{ name: "c", image: "busybox:1.36", securityContext: { privileged: true } }],
  },
};

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
