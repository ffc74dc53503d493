// Pepr's webhook server parses request bodies with `express.json({ limit: "2mb" })`
// (pepr/src/lib/controller/index.ts). A bigger AdmissionReview never reaches our rules: express
// answers 413 with an HTML page, the API server reports "failed calling webhook … 413" and, with
// failurePolicy Fail, the user gets that opaque error (`request body too large`) instead of our
// payload-size denial. Reviews that big are legitimate: the API server accepts request bodies up to 3 MiB,
// and an UPDATE review carries the new object and the stored one (up to etcd's ~1.5 MiB, more once
// a Secret's bytes are base64 in JSON).
//
// Pepr is not bundled into dist/pepr-<uuid>.js (`pepr build` keeps it external and the controller
// image brings its own copy), so patching node_modules/pepr would change local runs only. Instead
// the module raises the limit at start-up, before Pepr creates its server, by wrapping the
// `json` factory of the very express instance Pepr loads. This code is in the bundle and works in
// the image. Pepr only, no rule logic: the rules stay pure.
import { createRequire } from "node:module";

/** Enough for any review the API server can send: 3 MiB new object + stored object + envelope. */
export const WEBHOOK_BODY_LIMIT = "8mb";

const WRAPPED = Symbol.for("admission-guard.body-limit");

type JsonFactory = ((options?: Record<string, unknown>) => unknown) & { [WRAPPED]?: string };

/**
 * Makes every later `express.json(...)` of Pepr's express use `limit`. Idempotent. Returns false
 * (and changes nothing) when Pepr's express cannot be found, e.g. in a future Pepr without it.
 */
export function raiseWebhookBodyLimit(limit: string = WEBHOOK_BODY_LIMIT): boolean {
  let express: { json?: JsonFactory };
  try {
    // Resolve express from Pepr's location, so both get the same instance.
    const fromPepr = createRequire(require.resolve("pepr"));
    express = fromPepr("express");
  } catch {
    return false;
  }
  const original = express.json;
  if (typeof original !== "function") return false;
  if (original[WRAPPED]) return true;
  const wrapped: JsonFactory = options => original({ ...options, limit });
  wrapped[WRAPPED] = limit;
  express.json = wrapped;
  return true;
}
