// The API server slow (5 s per answer) or unreachable: every admission is answered before the
// webhook timeout (10 s), with the documented fail mode (capabilities/service-account/README.md:
// the pod stays on "default" and the validator denies, naming the ServiceAccount and the kubectl
// command), and admission works again once the API server is back.
import { API_BUDGET_MS } from "../../lib/cluster/api-calls";
import type { KubeObject } from "../../lib/objects/pod";
import { admit, type AdmitResult } from "../support/admission";
import { useEnvironment } from "../support/environment";
import { eventually, cachesSynced } from "../support/wait";
import { clusterObjects } from "./cases";

const WEBHOOK_TIMEOUT_MS = 10_000;
const oldNamespace = (name: string): KubeObject => ({
  apiVersion: "v1",
  kind: "Namespace",
  metadata: { name, creationTimestamp: new Date("2024-05-12T14:00:00Z") },
});
const SLOW_NS = "slow-api";
const DOWN_NS = "api-down";
const env = useEnvironment({
  objects: [...clusterObjects, oldNamespace(SLOW_NS), oldNamespace(DOWN_NS)],
});

/** A pod on the "default" ServiceAccount: its admission asks the API server for "workload". */
const podIn = (namespace: string): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "trainer", namespace },
  spec: { containers: [{ name: "trainer", image: "ghcr.io/example/trainer:1.0" }] },
});

/** The whole admission (mutate, then validate), failing if it is not answered before the webhook timeout. */
async function admitInTime(pod: KubeObject): Promise<AdmitResult> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no answer within the webhook timeout (${WEBHOOK_TIMEOUT_MS} ms)`)),
      WEBHOOK_TIMEOUT_MS,
    );
  });
  try {
    return await Promise.race([admit(env.controller, pod), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function expectDocumentedFailMode(result: AdmitResult, namespace: string) {
  expect(result.mutateResponse?.allowed).toBe(true);
  expect((result.patched.spec as { serviceAccountName?: string }).serviceAccountName).toBe(
    "default",
  );
  expect(result.allowed).toBe(false);
  expect(result.message).toContain(
    `admission-guard/service-account: Pod ${namespace}/trainer runs as ServiceAccount "default"`,
  );
  expect(result.message).toContain(`within ${API_BUDGET_MS} ms`);
  expect(result.message).toMatch(/Fix: kubectl create serviceaccount workload/);
}

async function expectRecovered(namespace: string) {
  // The API call left running when the budget ran out may have created it meanwhile: either way
  // the pod is now moved to its dedicated ServiceAccount, which exists.
  const result = await eventually(
    async () => {
      const r = await admitInTime(podIn(namespace));
      expect((r.patched.spec as { serviceAccountName?: string }).serviceAccountName).toBe(
        "workload",
      );
      return r;
    },
    20_000,
    500,
  );
  expect(result.message).not.toContain("could not be created");
  expect(env.api.get("ServiceAccount", "workload", namespace)).toBeDefined();
}

describe("the API server slow or unreachable", () => {
  afterEach(() => {
    env.api.setLatency(0);
    env.api.setDown(false);
  });

  it(`slow (5 s a call): answered within the budget (${API_BUDGET_MS} ms a call), denied with the reason; recovers`, async () => {
    env.api.setLatency(5_000);
    expectDocumentedFailMode(await admitInTime(podIn(SLOW_NS)), SLOW_NS);
    env.api.setLatency(0);
    await expectRecovered(SLOW_NS);
  }, 60_000);

  it("unreachable: answered before the webhook timeout, denied with the reason; recovers", async () => {
    env.api.setDown(true);
    const result = await admitInTime(podIn(DOWN_NS));
    expect(result.mutateResponse?.allowed).toBe(true);
    expect((result.patched.spec as { serviceAccountName?: string }).serviceAccountName).toBe(
      "default",
    );
    expect(result.allowed).toBe(false);
    expect(result.message).toMatch(
      /could not be created \(.+\)\. Fix: kubectl create serviceaccount/,
    );
    env.api.setDown(false);
    await cachesSynced(env.api);
    await expectRecovered(DOWN_NS);
  }, 60_000);
});
