// A label whose values come from requests (a kind, a rule name) keeps the first `max` distinct
// values it sees and answers "other" for the rest: nothing a client sends can grow /metrics.
export const OTHER = "other";

export class BoundedLabel {
  private readonly seen = new Set<string>();

  constructor(
    private readonly max: number,
    private readonly maxLength = 63,
  ) {}

  /** The value to record: itself while it fits, "other" once the label is full or for odd input. */
  of(value: unknown): string {
    if (typeof value !== "string" || !value || value.length > this.maxLength) return OTHER;
    if (this.seen.has(value)) return value;
    if (this.seen.size >= this.max) return OTHER;
    this.seen.add(value);
    return value;
  }
}
