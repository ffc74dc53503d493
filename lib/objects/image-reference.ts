// Image references, parsed by @swimlane/docker-reference (the grammar of distribution/reference)
// and normalised the way the kubelet pulls them: `nginx` is `docker.io/library/nginx`.
//
// The library's name regex backtracks exponentially on some invalid input ("aaaa…a!" with 20
// letters hangs for minutes); patches/@swimlane+docker-reference+2.0.1.patch makes its separator
// `[-]+` as in distribution/reference, and the length cap below bounds the rest.
import { parseFamiliarName, parseQualifiedName } from "@swimlane/docker-reference";
import { withoutTrailingSlashes } from "./text";

/** Longer than any valid reference: 255 (name) + 1 + 128 (tag) + 1 + 135 (sha512 digest). */
export const MAX_REFERENCE_LENGTH = 1024;

export interface ImageRef {
  /** Registry host, lower-cased, with its port: "docker.io", "localhost:5000". */
  registry: string;
  /** Repository path inside the registry: "library/nginx", "myorg/app". */
  repository: string;
  tag?: string;
  digest?: string;
  /** registry/repository[:tag][@digest] */
  normalised: string;
}

export type ParsedImage =
  | { readonly ok: true; readonly ref: Readonly<ImageRef> }
  | { readonly ok: false; readonly reason: string };

const DEFAULT_REGISTRY = "docker.io";

export function formatRef(
  ref: Pick<ImageRef, "registry" | "repository" | "tag" | "digest">,
): string {
  return (
    `${ref.registry}/${ref.repository}` +
    (ref.tag ? `:${ref.tag}` : "") +
    (ref.digest ? `@${ref.digest}` : "")
  );
}

// Every request parses its images two or three times (the mirror rewrite, the allow-list, the
// image's user), and a cluster runs few distinct images: each is parsed once. Bounded: the map
// starts again when full. The results are frozen, since they are shared.
const PARSED_CAPACITY = 4096;
const parsedImages = new Map<string, ParsedImage>();

/** Parses an image as written in a container spec. Never throws. */
export function parseImage(image: unknown): ParsedImage {
  if (typeof image !== "string") return { ok: false, reason: "the image is not set" };
  // Never kept: a reference too long to be valid (the map holds at most 4096 short strings).
  if (image.length > MAX_REFERENCE_LENGTH)
    return { ok: false, reason: `the image is ${image.length} characters long` };
  let parsed = parsedImages.get(image);
  if (!parsed) {
    if (parsedImages.size >= PARSED_CAPACITY) parsedImages.clear();
    parsed = parseOnce(image);
    if (parsed.ok) Object.freeze(parsed.ref);
    parsedImages.set(image, Object.freeze(parsed));
  }
  return parsed;
}

function parseOnce(image: string): ParsedImage {
  if (image === "") return { ok: false, reason: "the image is empty" };
  if (image !== image.trim()) return { ok: false, reason: "the image has surrounding spaces" };
  try {
    const parsed = parseFamiliarName(image);
    const ref = {
      registry: (parsed.domain ?? DEFAULT_REGISTRY).toLowerCase(),
      repository: parsed.repository ?? "",
      tag: parsed.tag || undefined,
      digest: parsed.digest || undefined,
    };
    return { ok: true, ref: { ...ref, normalised: formatRef(ref) } };
  } catch (e) {
    return { ok: false, reason: e instanceof Error ? e.message : String(e) };
  }
}

/** An allow-list or mirror entry: a registry host, or a registry and a repository prefix. */
export interface RegistryPrefix {
  registry: string;
  /** "" for the whole registry; otherwise whole path segments: "myorg", "team/ml". */
  path: string;
  /** As written, for messages. */
  written: string;
}

export type ParsedPrefix = { ok: true; prefix: RegistryPrefix } | { ok: false; reason: string };

/**
 * Parses an entry such as "ghcr.io", "registry.internal:5000", "docker.io/myorg" or "myorg/team".
 * An entry without "/" is a registry host. Otherwise the first segment is a host when it looks like
 * one (a "." or ":" in it, or "localhost") — Docker's own rule — and else the entry is a
 * repository prefix on docker.io. Tags and digests make no sense in a prefix and are refused.
 */
export function parsePrefix(entry: string): ParsedPrefix {
  const written = entry;
  const trimmed = withoutTrailingSlashes(entry.trim());
  if (!trimmed) return { ok: false, reason: "empty entry" };
  if (trimmed.length > MAX_REFERENCE_LENGTH) return { ok: false, reason: "entry too long" };
  if (trimmed.includes("@")) return { ok: false, reason: "a prefix cannot carry a digest" };
  const slash = trimmed.indexOf("/");
  const first = slash === -1 ? trimmed : trimmed.slice(0, slash);
  const hostLike =
    slash === -1 || first.includes(".") || first.includes(":") || first === "localhost";
  const host = hostLike ? first : DEFAULT_REGISTRY;
  const path = hostLike ? (slash === -1 ? "" : trimmed.slice(slash + 1)) : trimmed;
  if (path.includes(":")) return { ok: false, reason: "a prefix cannot carry a tag" };
  try {
    // The parser checks the host and path grammar; "x" stands in for an empty path.
    const parsed = parseQualifiedName(`${host}/${path || "x"}`);
    if (parsed.tag || parsed.digest) return { ok: false, reason: "not a registry or repository" };
  } catch (e) {
    return { ok: false, reason: e instanceof Error ? e.message : String(e) };
  }
  const registry = host.toLowerCase() === "index.docker.io" ? DEFAULT_REGISTRY : host.toLowerCase();
  return { ok: true, prefix: { registry, path, written } };
}

/** Whether an image lies under a prefix, on whole path segments (docker.io/myorg ∌ docker.io/myorg-evil/x). */
export function underPrefix(ref: Pick<ImageRef, "registry" | "repository">, p: RegistryPrefix) {
  if (ref.registry !== p.registry) return false;
  return !p.path || ref.repository === p.path || ref.repository.startsWith(`${p.path}/`);
}

/** Whether prefix `inner` lies within prefix `outer` (every image under inner is under outer). */
export function prefixWithin(inner: RegistryPrefix, outer: RegistryPrefix): boolean {
  if (inner.registry !== outer.registry) return false;
  if (!outer.path) return true;
  return !!inner.path && underPrefix({ registry: inner.registry, repository: inner.path }, outer);
}

export function describePrefix(p: RegistryPrefix): string {
  return p.path ? `${p.registry}/${p.path}` : p.registry;
}
