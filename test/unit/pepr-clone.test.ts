// Pepr's request copy (ramda's clone, quadratic in alike entries) swapped for a linear one in the
// ramda Pepr itself resolves (lib/pepr/clone.ts). What it copies must come out the same.
import { createRequire } from "node:module";
import { installLinearClone, linearClone } from "../../lib/pepr/clone";

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
