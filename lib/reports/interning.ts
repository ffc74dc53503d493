// Results held once when equal: most objects find the same as others (a template's pods, the same
// skips), and at 100,000 pods their messages would be most of the scan's memory. Bounded in entries
// and in the key text seen: the keys are tenants' words (names, images, messages).
import { createHash } from "node:crypto";
import type { Finding, ObjectResults } from "./policy-report";

/** Distinct findings (and lists, and names) shared at most: past it a table starts over. */
export const MAX_SHARED = 50_000;
/** The key text a table has seen at most (keys are tenants' words: names, images, messages). */
export const MAX_SHARED_KEY_BYTES = 16 * 1024 * 1024;
/** A key longer than this is held as its digest (28 characters), not as itself. */
const DIGEST_KEYS_OVER = 64;

/**
 * Equal values held once, by a key; bounded in entries and in the key text seen (what was
 * shared stays shared after a start over). Long keys are held as their SHA-1.
 */
class Shared<T> {
  private readonly table = new Map<string, T>();
  private keyBytes = 0;
  of(key: string, value: T): T {
    const held =
      key.length > DIGEST_KEYS_OVER ? createHash("sha1").update(key).digest("base64") : key;
    const known = this.table.get(held);
    if (known !== undefined) return known;
    this.keyBytes += key.length;
    if (this.table.size >= MAX_SHARED || this.keyBytes > MAX_SHARED_KEY_BYTES) {
      this.table.clear();
      this.keyBytes = key.length;
    }
    this.table.set(held, value);
    return value;
  }
}

/** The tables one scan shares its objects' results through. */
export class ResultInterner {
  private readonly findings = new Shared<{ finding: Finding; id: number }>();
  private readonly findingLists = new Shared<readonly Finding[]>();
  private readonly names = new Shared<string>();
  private findingIds = 0;

  /** The results with their equal parts shared with other objects' (read only, as all results). */
  compact(results: ObjectResults): ObjectResults {
    const ids: number[] = [];
    const findings = results.findings.map(f => {
      const shared = this.findings.of(JSON.stringify(f), { finding: f, id: ++this.findingIds });
      ids.push(shared.id);
      return shared.finding;
    });
    const { ref } = results;
    return {
      ref: {
        ...ref,
        apiVersion: this.names.of(ref.apiVersion, ref.apiVersion),
        kind: this.names.of(ref.kind, ref.kind),
        namespace: this.names.of(ref.namespace, ref.namespace),
      },
      findings: this.findingLists.of(ids.join(","), findings) as Finding[],
      judgedBy: results.judgedBy,
    };
  }
}
