// The tables the scan shares equal results through (lib/reports/interning.ts): equal parts held
// once, and each table bounded in entries and in the key text a tenant can make it see.
import { MAX_SHARED, MAX_SHARED_KEY_BYTES, ResultInterner } from "../../../lib/reports/interning";
import type { Finding, ObjectResults } from "../../../lib/reports/policy-report";

const results = (name: string, messages: string[]): ObjectResults => ({
  ref: { apiVersion: "v1", kind: "Pod", namespace: "ml", name },
  findings: messages.map(
    (message): Finding => ({ policy: "labels", rule: "required", result: "fail", message }),
  ),
  judgedBy: [],
});

/** A table's private map (what it holds), by the interner's field name. */
const table = (interner: ResultInterner, name: "findings" | "findingLists" | "names") =>
  (interner as unknown as Record<string, { table: Map<string, unknown> }>)[name].table;

describe("ResultInterner", () => {
  it("equal findings, lists and names are the same objects across objects; results read the same", () => {
    const interner = new ResultInterner();
    const a = interner.compact(results("a", ["missing team", "missing owner"]));
    const b = interner.compact(results("b", ["missing team", "missing owner"]));
    const c = interner.compact(results("c", ["missing team"]));
    expect(b.findings).toBe(a.findings);
    expect(c.findings[0]).toBe(a.findings[0]);
    expect(c.findings).not.toBe(a.findings);
    expect(b.ref).toEqual({ apiVersion: "v1", kind: "Pod", namespace: "ml", name: "b" });
    expect(a.findings.map(f => f.message)).toEqual(["missing team", "missing owner"]);
  });

  it("a long key (a finding's text) is held as its digest, not as itself", () => {
    const interner = new ResultInterner();
    interner.compact(results("a", ["x".repeat(10_000)]));
    for (const name of ["findings", "findingLists"] as const)
      for (const key of table(interner, name).keys()) expect(key.length).toBeLessThanOrEqual(64);
  });

  it("past MAX_SHARED distinct findings a table starts over: it never holds more", () => {
    const interner = new ResultInterner();
    for (let i = 0; i <= MAX_SHARED; i++) interner.compact(results("p", [`finding ${i}`]));
    expect(table(interner, "findings").size).toBeLessThanOrEqual(MAX_SHARED);
    expect(table(interner, "findings").size).toBeGreaterThan(0);
  });

  it("past MAX_SHARED_KEY_BYTES of key text seen (long messages) a table starts over too", () => {
    const interner = new ResultInterner();
    const long = 64 * 1024;
    const n = MAX_SHARED_KEY_BYTES / long + 10;
    for (let i = 0; i < n; i++) interner.compact(results("p", [`${i} `.padEnd(long, "m")]));
    expect(table(interner, "findings").size).toBeLessThan(n - 1);
  });
});
