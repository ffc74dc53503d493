// Pepr's request copy (ramda's clone, quadratic in alike entries) swapped for a linear one in the
// ramda Pepr itself resolves (lib/pepr/clone.ts). What it copies must come out the same.
import { createRequire } from "node:module";
import { installLinearClone, linearClone } from "../../../lib/pepr/clone";

const peprRamda = () =>
  createRequire(require.resolve("pepr"))("ramda") as { clone: (v: unknown) => unknown };

test("the ramda Pepr loads copies with the linear clone, once however often it is installed", () => {
  const before = peprRamda().clone;
  expect(installLinearClone()).toBe(true);
  const swapped = peprRamda().clone;
  expect(swapped).not.toBe(before);
  expect(installLinearClone()).toBe(true);
  expect(peprRamda().clone).toBe(swapped);
});

test("a request's object is copied deep and whole: equal, and nothing shared", () => {
  const clone = linearClone(peprRamda().clone);
  const pod = {
    metadata: { name: "p", labels: { app: "a" }, annotations: null },
    spec: { containers: [{ name: "c", env: [{ name: "A", value: "1" }] }], volumes: [] },
  };
  const copy = clone(pod) as typeof pod;
  expect(copy).toEqual(pod);
  expect(copy).not.toBe(pod);
  copy.spec.containers[0].env[0].value = "2";
  copy.metadata.labels.app = "b";
  expect(pod.spec.containers[0].env[0].value).toBe("1");
  expect(pod.metadata.labels.app).toBe("a");
});

test("what structuredClone would copy differently goes to ramda's own clone", () => {
  const calls: unknown[] = [];
  const original = (v: unknown) => (calls.push(v), v);
  const clone = linearClone(original);
  const withFunction = { handler: () => 1 };
  class Store {
    x = 1;
  }
  const instance = new Store();
  expect(clone(withFunction)).toBe(withFunction);
  expect(clone(instance)).toBe(instance);
  expect(clone(7)).toBe(7);
  expect(calls).toEqual([withFunction, instance, 7]);
  expect(clone({ a: [1, { b: 2 }] })).toEqual({ a: [1, { b: 2 }] });
  expect(calls).toHaveLength(3);
});

test("a pod of 35,000 alike projected sources is copied with the linear clone, not ramda's", () => {
  const clone = linearClone(() => {
    throw new Error("ramda's quadratic clone was used");
  });
  const sources = Array.from({ length: 35_000 }, (_, i) => ({ secret: { name: `s${i}` } }));
  const pod = { spec: { volumes: [{ name: "v", projected: { sources } }] } };
  const copy = clone(pod) as typeof pod;
  expect(copy.spec.volumes[0].projected.sources).toHaveLength(35_000);
  expect(copy.spec.volumes[0].projected.sources[34_999]).toEqual({ secret: { name: "s34999" } });
});

describe("the copy of JSON's values (one walk; structuredClone past its bounds)", () => {
  const clone = linearClone(() => {
    throw new Error("ramda's clone was used");
  });

  test("a key named __proto__, as JSON.parse makes it, stays a key of the copy, not its prototype", () => {
    const parsed = JSON.parse('{"metadata":{"__proto__":{"polluted":true},"name":"p"}}');
    const copy = clone(parsed) as { metadata: Record<string, unknown> };
    expect(Object.getPrototypeOf(copy.metadata)).toBe(Object.prototype);
    expect(Object.keys(copy.metadata)).toEqual(["__proto__", "name"]);
    expect(copy.metadata.polluted).toBeUndefined();
    expect(JSON.stringify(copy)).toBe(JSON.stringify(parsed));
  });

  test("a cycle, or a nest deeper than an object has, is copied whole by structuredClone", () => {
    const cyclic: Record<string, unknown> = { name: "c" };
    cyclic.self = cyclic;
    const copy = clone(cyclic) as Record<string, unknown>;
    expect(copy).not.toBe(cyclic);
    expect(copy.self).toBe(copy);
    let deep: unknown = "leaf";
    for (let i = 0; i < 2_000; i++) deep = [deep];
    expect(JSON.stringify(clone(deep))).toBe(JSON.stringify(deep));
  });

  test("an object sharing its parts is copied once, not once per path to each", () => {
    let shared: unknown = { leaf: true };
    for (let i = 0; i < 40; i++) shared = { a: shared, b: shared }; // 2^40 paths
    const copy = clone(shared) as { a: unknown; b: unknown };
    expect(copy.a).toBe(copy.b); // structuredClone keeps the sharing
  });

  test("dates, maps and class instances inside go to structuredClone, copied as it copies them", () => {
    const when = new Date(0);
    const copy = clone({ at: when, seen: new Map([["k", 1]]) }) as {
      at: Date;
      seen: Map<string, number>;
    };
    expect(copy.at).toEqual(when);
    expect(copy.at).not.toBe(when);
    expect(copy.seen.get("k")).toBe(1);
  });
});
