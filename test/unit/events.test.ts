// Events on the pods the module fixed: what they say, once per pod, only for new pods, and no
// more than the rate allows.
import { policies } from "../../capabilities";
import { fixedEvent, FixEvents, TokenBucket, type CoreEvent } from "../../lib/events";
import type { KubeObject } from "../../lib/pod";

const NOW = Date.parse("2026-11-30T12:00:00Z");

function pod(name: string, fixed?: string, createdAgoMs = 1000): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: "ml",
      uid: `uid-${name}`,
      creationTimestamp: new Date(NOW - createdAgoMs).toISOString() as unknown as Date,
      ...(fixed ? { annotations: { "admission-guard.dev/fixed": fixed } } : {}),
    },
    spec: { containers: [{ name: "c", image: "x" }] },
  };
}

describe("the Event of a fixed pod", () => {
  it("says what each capability changed and why, on the pod by uid", () => {
    const event = fixedEvent(
      pod(
        "trainer",
        "labels/component-from-app,security-context/runAsNonRoot,security-context/runAsUser",
      ),
      policies,
      new Date(NOW),
      "watcher-0",
    )!;
    expect(event).toMatchObject({
      apiVersion: "v1",
      kind: "Event",
      metadata: { generateName: "trainer.", namespace: "ml" },
      involvedObject: {
        apiVersion: "v1",
        kind: "Pod",
        name: "trainer",
        namespace: "ml",
        uid: "uid-trainer",
      },
      reason: "AdmissionGuardFixed",
      type: "Normal",
      source: { component: "admission-guard" },
      reportingInstance: "watcher-0",
      count: 1,
      firstTimestamp: "2026-11-30T12:00:00.000Z",
    });
    expect(event.message).toMatch(
      /^admission-guard fixed labels: component-from-app \(.+\); security-context: runAsNonRoot, runAsUser \(Pod Security Standards restricted/,
    );
  });

  it("none for a pod the module did not fix, or one that is not a stored pod", () => {
    expect(fixedEvent(pod("plain"), policies, new Date(NOW))).toBeUndefined();
    const noUid = pod("p", "labels/component-from-app");
    delete noUid.metadata!.uid;
    expect(fixedEvent(noUid, policies, new Date(NOW))).toBeUndefined();
  });

  it("keeps the message within what the API server stores", () => {
    const many = Array.from({ length: 200 }, (_, i) => `cap-${i}/rule-${i}`).join(",");
    expect(fixedEvent(pod("p", many), policies, new Date(NOW))!.message.length).toBe(1024);
  });
});

describe("writing them", () => {
  const setup = (perSecond = 10) => {
    const written: CoreEvent[] = [];
    let now = NOW;
    const events = new FixEvents({
      perSecond,
      write: async e => void written.push(e),
      policies: () => policies,
      now: () => now,
    });
    return { events, written, advance: (ms: number) => (now += ms) };
  };

  it("once per pod, however often the watcher sees it", async () => {
    const { events, written } = setup();
    const p = pod("a", "security-context/runAsNonRoot");
    await events.onPod(p);
    await events.onPod(p);
    await events.onPod(structuredClone(p));
    expect(written).toHaveLength(1);
  });

  it("not for pods created before the watcher started looking (a re-list of what already ran)", async () => {
    const { events, written } = setup();
    await events.onPod(pod("old", "security-context/runAsNonRoot", 10 * 60_000));
    expect(written).toEqual([]);
  });

  it("drops what goes over the rate, counts it, and writes again once the budget refills", async () => {
    const { events, written, advance } = setup(2); // bursts of 10
    for (let i = 0; i < 25; i++) await events.onPod(pod(`p${i}`, "security-context/runAsNonRoot"));
    expect(written).toHaveLength(10);
    expect(events.stats.dropped).toBe(15);
    advance(1000);
    for (let i = 25; i < 30; i++) await events.onPod(pod(`p${i}`, "security-context/runAsNonRoot"));
    expect(written).toHaveLength(12);
  });

  it("a failed write is counted and logged, never thrown", async () => {
    const warnings: string[] = [];
    const events = new FixEvents({
      perSecond: 10,
      write: async () => {
        throw new Error("forbidden");
      },
      policies: () => policies,
      now: () => NOW,
      log: { warn: (_o, m) => void warnings.push(m) },
    });
    await expect(events.onPod(pod("a", "security-context/runAsNonRoot"))).resolves.toBeUndefined();
    expect(events.stats.failed).toBe(1);
    expect(warnings).toEqual(["could not write the pod's Event"]);
  });
});

describe("TokenBucket", () => {
  it("allows a burst, then the rate", () => {
    let t = 0;
    const bucket = new TokenBucket(1, 3, () => t);
    expect([bucket.take(), bucket.take(), bucket.take(), bucket.take()]).toEqual([
      true,
      true,
      true,
      false,
    ]);
    t += 500;
    expect(bucket.take()).toBe(false);
    t += 500;
    expect(bucket.take()).toBe(true);
    t += 60_000;
    expect([bucket.take(), bucket.take(), bucket.take(), bucket.take()]).toEqual([
      true,
      true,
      true,
      false,
    ]);
  });
});
