// The one type guard every reader of untrusted input needs: a plain object (not null, not a list).
export const isRecord = (x: unknown): x is Record<string, unknown> =>
  typeof x === "object" && x !== null && !Array.isArray(x);
