// lib/objects/text.ts: trailing slashes off in time linear in the input, where /\/+$/ is quadratic on a run
// of slashes a pod author or namespace admin writes (a mountPath, a registry annotation).
import { withoutTrailingSlashes } from "../../../lib/objects/text";
import { normalizePath } from "../../../capabilities/security-context/fix";
import { parsePrefix } from "../../../lib/objects/image-reference";

describe("withoutTrailingSlashes", () => {
  it.each([
    ["/tmp//", "/tmp"],
    ["/tmp", "/tmp"],
    ["///", ""],
    ["", ""],
    ["a/b/", "a/b"],
  ])("%j → %j", (input, want) => expect(withoutTrailingSlashes(input)).toBe(want));

  it("a path of slashes only is / for a mount, and an empty registry entry", () => {
    expect(normalizePath("///")).toBe("/");
    expect(parsePrefix("///")).toEqual({ ok: false, reason: "empty entry" });
  });

  it("200,000 slashes before a character are read once (a regex takes seconds)", () => {
    // Counted, not timed: each character from the end is looked at once, up to the first other.
    let reads = 0;
    const trailing = `/a${"/".repeat(200_000)}`;
    const original = String.prototype.charCodeAt;
    String.prototype.charCodeAt = function (this: string, i: number) {
      reads++;
      return original.call(this, i);
    };
    try {
      expect(withoutTrailingSlashes(trailing)).toBe("/a");
    } finally {
      String.prototype.charCodeAt = original;
    }
    expect(reads).toBe(200_001);
  });
});
