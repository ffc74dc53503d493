// Which registries an admin's cloud-credentials entry serves: host patterns as the kubelet's
// CredentialProviderConfig writes its matchImages hosts, `*` standing for part of one DNS label
// ("*.dkr.ecr.us-east-1.amazonaws.com", "*-docker.pkg.dev"), a port only when written. Pure.

/** A host pattern: lower-case labels, `*` within a label, an optional `:port`. */
const PATTERN =
  /^(\*|[a-z0-9*]([-a-z0-9*]*[a-z0-9*])?)(\.(\*|[a-z0-9*]([-a-z0-9*]*[a-z0-9*])?))*(:\d{1,5})?$/;

/** Why a pattern cannot work; undefined when it can. */
export function registryPatternProblem(pattern: string): string | undefined {
  if (pattern.length > 253) return `"${pattern.slice(0, 40)}..." is longer than a host name`;
  if (!PATTERN.test(pattern))
    return `"${pattern}" is not a registry host pattern: write a host such as myreg.azurecr.io, "*" for part of a label (*.dkr.ecr.us-east-1.amazonaws.com), a port when the registry has one; no scheme or path`;
  const host = pattern.replace(/:\d+$/, "");
  if (host.split(".").every(label => label === "*"))
    return `"${pattern}" matches every registry: the module's cloud credentials would go to any host a pod names`;
  return undefined;
}

/** Whether a pattern has a wildcard (ACR entries may not: see cloud/settings.ts). */
export const hasWildcard = (pattern: string) => pattern.includes("*");

/**
 * Whether a registry ("123.dkr.ecr.us-east-1.amazonaws.com", "127.0.0.1:5000") matches a pattern:
 * as many labels, each label matching its glob, the same port (none written matches none).
 */
export function registryMatches(pattern: string, registry: string): boolean {
  const [patternHost, patternPort] = splitPort(pattern);
  const [host, port] = splitPort(registry.toLowerCase());
  if (patternPort !== port) return false;
  const want = patternHost.split(".");
  const have = host.split(".");
  return want.length === have.length && want.every((glob, i) => labelMatches(glob, have[i]));
}

function splitPort(host: string): [string, string | undefined] {
  const match = /^(.*?)(?::(\d+))?$/.exec(host)!;
  return [match[1], match[2]];
}

/** A label against a glob whose `*` stands for any characters of that label (none included). */
function labelMatches(glob: string, label: string): boolean {
  const parts = glob.split("*");
  if (parts.length === 1) return glob === label;
  if (!label.startsWith(parts[0]) || !label.endsWith(parts[parts.length - 1])) return false;
  if (parts[0].length + parts[parts.length - 1].length > label.length) return false;
  let at = parts[0].length;
  const end = label.length - parts[parts.length - 1].length;
  for (const middle of parts.slice(1, -1)) {
    const found = label.indexOf(middle, at);
    if (found === -1 || found + middle.length > end) return false;
    at = found + middle.length;
  }
  return true;
}
