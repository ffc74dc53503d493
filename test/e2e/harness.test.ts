// The harness itself, end to end: the real controller starts against the stand-in API and
// answers one mutate and one validate request over HTTPS.
import { admit, podCreateReview } from "../support/admission";
import { startController, type Controller } from "../support/controller";
import { startStandIn, type StandInApi } from "../support/stand-in-api";
import { eventually } from "../support/wait";
import { HELLO_LABEL } from "../../hello-pepr";
import cfg from "../../package.json";

let api: StandInApi;
let controller: Controller;

beforeAll(async () => {
  api = await startStandIn({
    objects: [{ apiVersion: "v1", kind: "Namespace", metadata: { name: "pepr-demo" } }],
  });
  controller = await startController({ api });
}, 60_000);

afterAll(async () => {
  await controller?.stop();
  await api?.stop();
});

const pod = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "hello", namespace: "pepr-demo" },
  spec: { containers: [{ name: "app", image: "nginx:1.27" }] },
};

describe("e2e harness", () => {
  it("starts the controller only after its Pepr store was listed, and watches it", async () => {
    const paths = () => api.requests.map(r => `${r.method} ${r.path}`);
    expect(paths().some(p => /^GET .*\/peprstores\?fieldSelector=metadata.name/.test(p))).toBe(
      true,
    );
    // The list alone makes Pepr ready; its watch request may follow a moment later.
    await eventually(() =>
      expect(paths().some(p => /^GET .*\/peprstores\?watch=true/.test(p))).toBe(true),
    );
    expect(api.list("PeprStore", "pepr-system").map(s => s.metadata?.name)).toContain(
      `pepr-${cfg.pepr.uuid}-store`,
    );
  });

  it("answers a mutate and a validate request", async () => {
    const result = await admit(controller, pod);
    expect(result.mutateResponse?.allowed).toBe(true);
    expect(result.mutateResponse?.patchType).toBe("JSONPatch");
    expect(result.patched.metadata?.labels?.[HELLO_LABEL]).toBe("true");
    expect(result.validateResponse.allowed).toBe(true);
    expect(result.request.uid).not.toBe(result.validateResponse.uid);
  });

  it("refuses a request on a wrong API path", async () => {
    const res = await controller.post("/mutate/not-the-path", JSON.stringify(podCreateReview(pod)));
    expect(res.status).toBe(401);
  });

  it("says to run the build when the bundle is missing", async () => {
    await expect(startController({ api, bundle: "/nonexistent/pepr-x.js" })).rejects.toThrow(
      /npm run build/,
    );
  });
});
