// String helpers for what tenants write, kept linear: a regular expression such as /\/+$/ is
// retried from every slash of a long run ("/////…x"), quadratic in its length.

/** The text without trailing slashes ("" when it is slashes only). */
export function withoutTrailingSlashes(text: string): string {
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === 47 /* "/" */) end--;
  return text.slice(0, end);
}
