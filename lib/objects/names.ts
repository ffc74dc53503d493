// Names as the API server accepts them, for settings that name Kubernetes objects.
import * as z from "zod/mini";
import "./zod-messages";

/** A namespace name (RFC 1123 label), as the API server accepts it. */
export const namespaceName = z
  .string()
  .check(
    z.regex(
      /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/,
      "must be a namespace name (lower case, digits, '-')",
    ),
    z.maxLength(63),
  );
